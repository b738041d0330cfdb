"""The real student's learning curve: exact first calls on dev against training tokens.

Reads the points `botpsy sft --eval-calls-every N` logged in ``RUN/sft/curves.jsonl`` (greedy first
calls of the same dev examples at each point, step 0 being the untrained start), prints a table and
writes them to JSON.

    python bench/student_curve.py --run runs/student --out bench_out/student_sft_curve.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FIGURES = ("exact_call_rate", "schema_valid_rate", "parse_rate", "miss_no_call_rate", "miss_wrong_tool_rate",
           "miss_wrong_arguments_rate")


def curve_points(curves: Path) -> list[dict]:
    """One point per logged call check: step, tokens seen, dev loss (when measured) and the call figures."""
    if not curves.is_file():
        raise FileNotFoundError(f"{curves} does not exist; run `botpsy sft --eval-calls-every N` first")
    points = []
    for line in curves.read_text().splitlines():
        record = json.loads(line)
        dev = record.get("dev") or {}
        if "exact_call_rate" in dev:
            points.append({"step": record["step"], "tokens_seen": record.get("tokens_seen"), "dev_loss": dev.get("loss"),
                           "examples": dev.get("call_examples"), **{k: dev.get(k) for k in FIGURES}})
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="runs/student", help="Run folder holding sft/curves.jsonl.")
    parser.add_argument("--out", default="bench_out/student_sft_curve.json", help="JSON file to write.")
    args = parser.parse_args()
    points = curve_points(Path(args.run) / "sft" / "curves.jsonl")
    meta_file = Path(args.run) / "sft" / "meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    record = {"run": args.run, "base": meta.get("base"), "config": meta.get("config"), "points": points}
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print("step  tokens     dev loss  exact  schema-valid  no call  wrong tool  wrong args")
    for p in points:
        loss = f"{p['dev_loss']:.3f}" if p["dev_loss"] is not None else "  -  "
        print(f"{p['step']:>4}  {p['tokens_seen']:>9,}  {loss:>8}  {p['exact_call_rate']:>5.0%}  {p['schema_valid_rate']:>12.0%}"
              f"  {p['miss_no_call_rate']:>7.0%}  {p['miss_wrong_tool_rate']:>10.0%}  {p['miss_wrong_arguments_rate']:>10.0%}")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
