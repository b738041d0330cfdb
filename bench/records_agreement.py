"""Do two runs of the same model give the same answers? Compare two record files item by item.

`botpsy eval` resumes a row only for the same model bytes and settings (its fingerprint). When a
row is run again, on another machine or from a re-exported file, this says how much of it came
out the same: the items both files hold, how many produced identical text (greedy decoding), and
how many were scored the same, with time per item on each side.

    python bench/records_agreement.py OLD/bfcl.jsonl NEW/bfcl.jsonl [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def read(path: Path) -> dict[str, dict]:
    records = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}: not a JSON record ({error.msg}); a run cut mid-write?") from None
            records[record["id"]] = record
    return records


def agreement(first: dict[str, dict], second: dict[str, dict]) -> dict:
    """Shared items, identical raw text, the same verdict, and the median seconds per item on each side."""
    shared = [i for i in first if i in second]
    same_text = [i for i in shared if first[i].get("raw") == second[i].get("raw")]
    same_verdict = [i for i in shared if bool(first[i].get("correct")) == bool(second[i].get("correct"))]

    def median_seconds(records: dict[str, dict]) -> float | None:
        seconds = [records[i]["seconds"] for i in shared if isinstance(records[i].get("seconds"), (int, float))]
        return round(statistics.median(seconds), 2) if seconds else None

    return {"shared_items": len(shared), "identical_text": len(same_text), "same_verdict": len(same_verdict),
            "correct_first": sum(bool(first[i].get("correct")) for i in shared),
            "correct_second": sum(bool(second[i].get("correct")) for i in shared),
            "differing_items": sorted(set(shared) - set(same_text)),
            "median_seconds_first": median_seconds(first), "median_seconds_second": median_seconds(second)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = {"first": str(args.first), "second": str(args.second), **agreement(read(args.first), read(args.second))}
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
