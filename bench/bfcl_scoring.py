"""BFCL scoring benchmark: how long botpsy's adapter takes to score BFCL's own ground truth.

    .venv/bin/python bench/bfcl_scoring.py                      # every offline category -> bench_out/bfcl_scoring.json
    .venv/bin/python bench/bfcl_scoring.py --category non_live --json

Each item's ground truth is written as Qwen3.5 output (``gold.gold_output``; multi-turn: the
``gold.oracle`` answering turn by turn), parsed back with botpsy's parser and scored with BFCL's
official checkers, multi-turn calls executed on BFCL's backends. Reported per section: items,
seconds (loading and writing the gold text apart from scoring) and accuracy, which must be 100%
apart from ``gold.UNPASSABLE`` (answers the official checker or the format cannot accept).
Target: the non-live items score in seconds (under 10 s on the 2-core dev machine).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field

from botpsy.config import parse_config
from botpsy.eval.bfcl import bfcl_items, run_item, score_item, summarize
from botpsy.eval.bfcl.gold import UNPASSABLE, gold_output, oracle
from botpsy.eval.bfcl.items import GROUPS, expand_categories
from botpsy.output import table, write_benchmark

TARGET_NON_LIVE_SECONDS = 10.0


@dataclass
class BfclBenchConfig:
    """Time scoring BFCL v4's ground truth through the adapter and the official checkers."""

    category: list[str] = field(default_factory=lambda: ["non_live", "live", "multi_turn"],
                                metadata={"help": "Categories or groups (non_live, live, multi_turn, all) to score."})
    out: str = field(default="bench_out/bfcl_scoring.json", metadata={"help": "Where to write the JSON results."})
    json: bool = field(default=False, metadata={"help": "Print the JSON results instead of the table."})


def time_section(name: str, categories: list[str]) -> tuple[dict, list]:
    began = time.perf_counter()
    items = bfcl_items(categories)
    load_s = time.perf_counter() - began
    if items and items[0].multi_turn:
        began = time.perf_counter()
        verdicts = [run_item(item, oracle(item)) for item in items]
        return {"section": name, "items": len(items), "load_s": round(load_s, 3),
                "score_s": round(time.perf_counter() - began, 3)}, verdicts
    began = time.perf_counter()
    outputs = [gold_output(item) for item in items]
    gold_s = time.perf_counter() - began
    began = time.perf_counter()
    verdicts = [score_item(item, text) for item, text in zip(items, outputs, strict=True)]
    return {"section": name, "items": len(items), "load_s": round(load_s, 3), "gold_text_s": round(gold_s, 3),
            "score_s": round(time.perf_counter() - began, 3)}, verdicts


def run(cfg: BfclBenchConfig) -> dict:
    wanted = expand_categories(cfg.category)
    sections, verdicts = [], []
    for name in ("non_live", "live", "multi_turn"):
        categories = [c for c in GROUPS[name] if c in wanted]
        if categories:
            timing, section_verdicts = time_section(name, categories)
            wrong = [v.id for v in section_verdicts if not v.valid]
            timing["unexpected_failures"] = [i for i in wrong if i not in UNPASSABLE]
            timing["known_unpassable"] = len([i for i in wrong if i in UNPASSABLE])
            sections.append(timing)
            verdicts += section_verdicts
    non_live = next((s for s in sections if s["section"] == "non_live"), None)
    failures = [i for s in sections for i in s["unexpected_failures"]]
    return {
        "bench": asdict(cfg), "python": sys.version.split()[0], "cpus": os.cpu_count(),
        "sections": sections,
        "summary_all_items": summarize(verdicts),
        "summary_without_unpassable": summarize([v for v in verdicts if v.id not in UNPASSABLE]),
        "unpassable": UNPASSABLE,
        "target_non_live_seconds": TARGET_NON_LIVE_SECONDS,
        "meets_target": not failures and (non_live is None or non_live["score_s"] < TARGET_NON_LIVE_SECONDS),
    }


def human(result: dict) -> str:
    rows = [{"section": s["section"], "items": s["items"], "load s": s["load_s"], "gold text s": s.get("gold_text_s", "-"),
             "score s": s["score_s"], "known unpassable": s["known_unpassable"],
             "unexpected failures": len(s["unexpected_failures"])} for s in result["sections"]]
    categories = result["summary_all_items"]["categories"]
    per_category = table([{"category": c, "correct": v["correct"], "total": v["total"],
                           "accuracy": f"{100 * v['accuracy']:.2f}%"} for c, v in categories.items()])
    summary = result["summary_all_items"]
    sections = ", ".join(f"{k} {100 * v:.2f}%" for k, v in summary["sections"].items() if v is not None)
    overall = summary["overall_offline"]
    overall_text = "n/a (not every category scored)" if overall is None else f"{100 * overall:.2f}%"
    return (f"{table(rows)}\n\n{per_category}\n\nsections: {sections}\noverall (offline weights): {overall_text}"
            f"\n\nmeets target: {result['meets_target']}")


def main(cfg: BfclBenchConfig) -> int:
    result = run(cfg)
    write_benchmark(result, cfg.out, cfg.json, human)
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main(parse_config(BfclBenchConfig, sys.argv[1:], prog="bench/bfcl_scoring.py")))
