"""Reference agreement: do botpsy's checkers reproduce the official IFEval/IFBench verdicts?

Runs the checkers over the published reference responses in ``<data>/{ifeval,ifbench}/reference``
and compares every item's ``follow_all_instructions`` (and every instruction's verdict) with the
official scorer's output, strict and loose. Items that contain an instruction botpsy skips are
reported apart: they are listed, and excluded from the agreement over comparable items.

Example::

    python -m botpsy.eval.instructions.agreement --json
    python -m botpsy.eval.instructions.agreement --benchmark ifbench --out bench_out/if.json
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botpsy.config import parse_config
from botpsy.eval.instructions.registry import INSTRUCTIONS
from botpsy.eval.instructions.scoring import score_item
from botpsy.output import emit, table, write_benchmark

BENCHMARKS = {
    "ifeval": ("ifeval/input_data.jsonl", "ifeval/reference/responses_gpt4.jsonl"),
    "ifbench": ("ifbench/IFBench_test.jsonl", "ifbench/reference/responses_sample.jsonl"),
}


PACKAGED_DATA = Path(__file__).resolve().parents[2] / "evaldata"


def default_data_dir() -> Path:
    """``$BOTPSY_DATA_DIR``, else the evaluation data shipped inside the package (``botpsy/evaldata``)."""
    return Path(os.environ.get("BOTPSY_DATA_DIR") or PACKAGED_DATA)


@dataclass
class AgreementConfig:
    """Compare botpsy's instruction checkers with the official verdicts on reference responses."""

    benchmark: list[str] = field(
        default_factory=lambda: ["ifeval", "ifbench"],
        metadata={"help": "Benchmarks to check (repeatable).", "choices": list(BENCHMARKS)},
    )
    data_dir: str = field(
        default="", metadata={"help": "Folder holding ifeval/ and ifbench/ (default: the packaged botpsy/evaldata)."}
    )
    out: str = field(
        default="bench_out/if_agreement.json", metadata={"help": "Where to write the JSON result."}
    )
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _match_records(responses: list[dict], records: list[dict]) -> list[dict | None]:
    """The benchmark record of each reference response, found by prompt (surrounding spaces
    ignored); a response whose prompt was altered falls back to the one unused record with
    the same instruction list."""
    by_prompt = {r["prompt"].strip(): r for r in records}
    matched = [by_prompt.get(resp["prompt"].strip()) for resp in responses]
    used = {id(r) for r in matched if r is not None}
    for index, (response, record) in enumerate(zip(responses, matched)):
        if record is None:
            candidates = [r for r in records if id(r) not in used
                          and r["instruction_id_list"] == response.get("instruction_id_list")]
            if len(candidates) == 1:
                matched[index] = candidates[0]
                used.add(id(candidates[0]))
    return matched


LANGUAGE_CHECKS = ("language:response_language", "change_case:english_capital",
                   "change_case:english_lowercase")


def known_cause(instruction_id: str, kwargs: dict[str, Any]) -> str:
    """The reason a verdict can legitimately differ from the official one, when one is known."""
    letter = str(kwargs.get("letter") or "")
    if instruction_id == "keywords:letter_frequency" and not ("a" <= letter.lower() <= "z"):
        return (f"the official scorer replaces the non a-z letter {letter!r} with a random letter "
                "each time it builds the check, so its verdict is random; botpsy counts the "
                "character the prompt asks for")
    if instruction_id in LANGUAGE_CHECKS:
        return "langdetect samples at random; the official run was unseeded, botpsy's is seeded"
    return "botpsy's checker differs from the official scorer on this response"


def _compare(mode: str, official: dict, mine: dict) -> dict | None:
    """A disagreement record for one item and one mode, or None when the item agrees."""
    ours = mine["strict"] if mode == "strict" else mine["loose"]
    theirs = official["follow_instruction_list"]
    differing = [
        {"instruction": i, "official": t, "botpsy": o, "reason": known_cause(i, k)}
        for i, k, t, o in zip(official["instruction_id_list"], mine["kwargs"], theirs, ours)
        if o is not None and o != t
    ]
    ours_all = mine[f"follow_all_{mode}"]
    if ours_all == official["follow_all_instructions"] and not differing:
        return None
    return {"mode": mode, "official_follow_all": official["follow_all_instructions"],
            "botpsy_follow_all": ours_all, "instructions": differing}


def check_benchmark(name: str, data_dir: Path) -> dict[str, Any]:
    """Agreement of one benchmark's reference responses with the official verdicts."""
    inputs_file, responses_file = BENCHMARKS[name]
    records = _read_jsonl(data_dir / inputs_file)
    responses = _read_jsonl(data_dir / responses_file)
    official = {mode: _read_jsonl(data_dir / f"{name}/reference/eval_results_{mode}.jsonl")
                for mode in ("strict", "loose")}
    for response, verdict in zip(responses, official["strict"]):
        response["instruction_id_list"] = verdict["instruction_id_list"]
    matched = _match_records(responses, records)
    result: dict[str, Any] = {"items": len(responses), "unmatched": [], "skipped_items": [],
                              "disagreements": []}
    agree = {"strict": 0, "loose": 0}
    for index, (response, record) in enumerate(zip(responses, matched)):
        if record is None:
            result["unmatched"].append({"index": index, "prompt": response["prompt"][:120]})
            continue
        mine = score_item(record, response["response"])
        mine["kwargs"] = [k or {} for k in record.get("kwargs") or [{}] * len(mine["strict"])]
        if mine["skipped"]:
            reasons = {i: INSTRUCTIONS[i].skipped for i in mine["skipped"]}
            result["skipped_items"].append({"index": index, "key": record.get("key"),
                                            "skipped": reasons})
            continue
        for mode in ("strict", "loose"):
            difference = _compare(mode, official[mode][index], mine)
            if difference is None:
                agree[mode] += 1
            else:
                result["disagreements"].append(
                    {"index": index, "key": record.get("key"), **difference,
                     "errors": mine["errors"], "response_start": response["response"][:160]})
    comparable = len(responses) - len(result["unmatched"]) - len(result["skipped_items"])
    result["comparable_items"] = comparable
    for mode in ("strict", "loose"):
        result[f"agreement_{mode}"] = round(100 * agree[mode] / comparable, 2) if comparable else None
        result[f"agreement_{mode}_all_items"] = round(100 * agree[mode] / len(responses), 2)
    return result


def run(config: AgreementConfig) -> dict[str, Any]:
    """Check each requested benchmark and return {benchmark: result}."""
    data_dir = Path(config.data_dir) if config.data_dir else default_data_dir()
    missing = [b for b in config.benchmark if not (data_dir / BENCHMARKS[b][1]).exists()]
    if missing:
        raise FileNotFoundError(f"reference data for {missing} not found under {data_dir}")
    return {name: check_benchmark(name, data_dir) for name in config.benchmark}


def _human(result: dict[str, Any]) -> str:
    rows = [{"benchmark": name, "items": r["items"], "comparable": r["comparable_items"],
             "skipped": len(r["skipped_items"]), "strict %": r["agreement_strict"],
             "loose %": r["agreement_loose"], "strict % (all)": r["agreement_strict_all_items"],
             "loose % (all)": r["agreement_loose_all_items"]} for name, r in result.items()]
    lines = [table(rows), ""]
    for name, r in result.items():
        for d in r["disagreements"]:
            for x in d["instructions"] or [{"instruction": "follow_all", "official":
                                             d["official_follow_all"], "reason": "differs"}]:
                lines.append(f"{name} #{d['index']} {d['mode']} {x['instruction']} "
                             f"(official={x['official']}): {x['reason']}")
        for item in r["skipped_items"]:
            for instruction_id, reason in item["skipped"].items():
                lines.append(f"{name} #{item['index']} skipped {instruction_id}: {reason}")
    return "\n".join(lines)


def main(config: AgreementConfig) -> int:
    try:
        result = run(config)
    except FileNotFoundError as error:
        emit({"error": str(error)}, True)
        return 2
    write_benchmark(result, config.out, config.json, _human)
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_config(AgreementConfig, prog="python -m botpsy.eval.instructions.agreement")))
