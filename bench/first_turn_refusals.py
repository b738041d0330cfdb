"""Which models open a device task with the *unavailable* refusal, task by task.

The unavailable kind teaches the student to say that no offered tool can do what is asked. After
MOPD the student opened 27 of the 150 device tasks that way, most of them tasks whose tool was
offered (docs/recipe.md, "What MOPD broke"). This counts, over the tasks of the first records file
(or the ones every file has), the first model turn that refuses so, split into the unavailable kind
(where the refusal is right) and the others (where the tool is offered), with each model's success.

    python bench/first_turn_refusals.py sft=A/device.jsonl mopd=B/device.jsonl teacher=C/device.jsonl --out F.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# The refusal of botpsy's unavailable-kind answers: the reasoning line, or the reply itself.
REFUSAL_MARKS = ("None of the offered tools can do this", "none of the tools I have right now can do that",
                 "isn't something my available tools can do")


def refuses(record: dict) -> bool:
    """Does the record's first model turn refuse for want of a tool (and call nothing)?"""
    first = next((s for s in record.get("steps", []) if s.get("type") == "model"), None)
    if first is None or first.get("tool_calls"):
        return False
    text = f"{first.get('reasoning') or ''}\n{first.get('content') or ''}"
    return any(mark.lower() in text.lower() for mark in REFUSAL_MARKS)


def compare(labelled: dict[str, Path]) -> dict:
    records = {label: {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}
               for label, path in labelled.items()}
    ids = sorted(set.intersection(*(set(rows) for rows in records.values())))
    result = {"tasks": len(ids), "models": {}}
    for label, rows in records.items():
        part = {"unavailable": [rows[i] for i in ids if rows[i]["kind"] == "unavailable"],
                "tool offered": [rows[i] for i in ids if rows[i]["kind"] != "unavailable"]}
        result["models"][label] = {
            name: {"tasks": len(rs), "refuses_first": sum(refuses(r) for r in rs), "solved": sum(bool(r["correct"]) for r in rs),
                   "refusing_ids": [r["id"] for r in rs if refuses(r)]}
            for name, rs in part.items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="LABEL=PATH of a device.jsonl")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    labelled = {}
    for item in args.records:
        label, sep, path = item.partition("=")
        if not sep:
            parser.error(f"expected LABEL=PATH, got {item!r}")
        labelled[label] = Path(path)
    text = json.dumps(compare(labelled), indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
