"""The report's other benchmarks side by side: ACEBench, tau2-bench, AgentDojo injection and red-team safety.

Reads the per-item records `botpsy eval --suite S --out ROOT/S` wrote for each model (one folder
per suite, one subfolder per model label), summarizes each suite with its own scorer, and puts the
BotPsy report's published figures (Qwen3.5-0.8B base -> BotPsy) in a column beside, labelled as
the report's. Every botpsy figure comes with the number of items it was measured on.

    python bench/other_benchmarks.py --root runs/others-sample --labels base-0.5b,botpsy-0.5b-sft \\
        --out bench_out/other_benchmarks_sample.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from botpsy.eval.harness import read_records
from botpsy.eval.report import num, pct
from botpsy.eval.suites import SUITES, SuiteOptions

# (suite, summary key, how to show it, the items it is measured on, the report's figure for its base -> BotPsy-0.8B)
FIGURES = [
    ("acebench", "overall", "pct", "items", "-"),
    ("acebench", "normal", "pct", "normal_items", "-"),
    ("acebench", "special", "pct", "special_items", "13.7% -> 51.3%"),
    ("acebench", "agent", "pct", "agent_items", "-"),
    ("tau2", "pass_1", "pct", "tasks", "telecom: - -> 82.5%"),
    ("tau2", "assistant_turns", "num", "tasks", "17.6 -> 13.1 (multi-turn agent tasks; 2.6x the tasks passed)"),
    ("tau2", "assistant_turns_solved", "num", "solved", "-"),
    ("injection", "utility", "pct", "alone", "-"),
    ("injection", "utility_under_attack", "pct", "attacked", "-"),
    ("injection", "attack_success_rate", "pct", "attacked_judged", "unsafe under injection: 46% -> 31%"),
    ("safety", "unsafe_rate", "pct", "harmful", "unsafe under red-teaming: 36% -> 21%"),
    ("safety", "unsafe_lookup_only_rate", "pct", "harmful", "-"),
    ("safety", "refusal_rate", "pct", "harmful", "-"),
    ("safety", "over_refusal_rate", "pct", "benign", "-"),
]


def summaries(root: Path, labels: list[str]) -> dict[str, dict[str, dict]]:
    """suite -> label -> the suite's summary of that model's records (absent: not run)."""
    out: dict[str, dict[str, dict]] = {}
    for suite in dict.fromkeys(f[0] for f in FIGURES):
        for label in labels:
            records = list(read_records(root / suite / label / f"{suite}.jsonl").values())
            if records:
                summary = SUITES[suite](SuiteOptions()).summarize(records)
                groups = {}
                for record in records:  # ACEBench's groups: how many items each group's figure rests on
                    groups[record.get("group")] = groups.get(record.get("group"), 0) + 1
                out.setdefault(suite, {})[label] = {**summary, **{f"{k}_items": v for k, v in groups.items() if k}, "records": len(records),
                                                    "seconds": round(sum(r.get("seconds", 0) or 0 for r in records), 1),
                                                    "median_seconds": round(statistics.median(r.get("seconds", 0) or 0 for r in records), 1)}
    return out


def table(data: dict[str, dict[str, dict]], labels: list[str]) -> str:
    lines = ["| figure | " + " | ".join(labels) + " | the report (Qwen3.5-0.8B -> BotPsy) |",
             "|---" * (len(labels) + 2) + "|"]
    runtime = {label: ", ".join(f"{suite} {per[label]['median_seconds']:.0f} s"
                                for suite, per in data.items() if label in per) for label in labels}
    for suite, key, kind, count, reported in FIGURES:
        show = pct if kind == "pct" else num
        cells = []
        for label in labels:
            summary = (data.get(suite) or {}).get(label)
            cells.append(f"{show(summary.get(key))} (n={summary.get(count, 0)})" if summary else "not run")
        lines.append(f"| {suite}: {key.replace('_', ' ')} | " + " | ".join(cells) + f" | {reported} |")
    lines.append("| median seconds per item | " + " | ".join(runtime[label] or "-" for label in labels) + " | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/others-sample", help="Folder with one `botpsy eval --out` folder per suite.")
    parser.add_argument("--labels", default="base-0.5b,botpsy-0.5b-sft", help="Model labels, comma-separated, in column order.")
    parser.add_argument("--out", default="bench_out/other_benchmarks_sample.json", help="JSON file to write.")
    args = parser.parse_args()
    labels = [label for label in args.labels.split(",") if label]
    data = summaries(Path(args.root), labels)
    text = table(data, labels)
    keep = {suite: {label: {k: v for k, v in s.items() if k not in ("by_item",)} for label, s in per.items()}
            for suite, per in data.items()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"root": args.root, "labels": labels, "table": text, "summaries": keep},
                                         indent=2, ensure_ascii=False) + "\n")
    print(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
