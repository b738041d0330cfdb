"""One way for every command to report results: a human view or JSON (``--json``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable


def emit(result: Any, as_json: bool, human: Callable[[Any], str] | None = None) -> None:
    """Print ``result`` as indented JSON when ``as_json``, else through ``human`` (or JSON)."""
    if as_json or human is None:
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        sys.stdout.write(human(result).rstrip("\n") + "\n")


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A plain aligned text table (no dependency), for summaries printed to a terminal."""
    if not rows:
        return "(empty)"
    columns = columns or list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()
    out = [line(columns), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


def write_benchmark(result: dict, out: str | Path, as_json: bool, human: Callable[[Any], str]) -> Path:
    """Write a benchmark's result JSON to ``out`` and print it (table, or JSON with ``--json``)."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    emit(result, as_json, human)
    if not as_json:
        print(f"wrote {path}")
    return path
