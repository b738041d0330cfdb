"""How a model's answers open: the first sentence of each record's reasoning, counted by category.

The SFT students write one short reasoning line before acting, and its first words carry the
decision (call, ask, refuse, answer). Counting them over an eval's records shows which verdict a
model reaches for; a record whose answer was wrong is counted apart.

    python bench/reasoning_openers.py runs/student/eval/sft3/bfcl.jsonl [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path


def opener(raw: str) -> str:
    """The reasoning's first sentence, with a named tool replaced by "..." ("" when there is none)."""
    head = (raw or "").split("</think>")[0] if "</think>" in (raw or "") else ""
    first = head.strip().split(". ")[0].split("\n")[0].strip().rstrip(".")
    if first.startswith("I'll use "):
        return "I'll use ..."
    return first[:100]


def count(path: Path) -> dict:
    by_category: dict[str, dict[str, Counter]] = defaultdict(lambda: {"right": Counter(), "wrong": Counter()})
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        outcome = "right" if record.get("correct") else "wrong"
        by_category[record.get("category", record.get("kind", "all"))][outcome][opener(record.get("raw", ""))] += 1
    return {cat: {k: dict(v.most_common()) for k, v in parts.items()} for cat, parts in sorted(by_category.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = {str(p): count(p) for p in args.records}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
