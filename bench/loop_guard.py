"""Loop guard benchmark: recall, false positives and cost per token on the generated loop set.

    .venv/bin/python bench/loop_guard.py                       # writes bench_out/loop_guard.json
    .venv/bin/python bench/loop_guard.py --decode-us-per-token 2400 --json

The set comes from ``botpsy.runtime.loopset.generate_loopset`` (seeded, labels checked by
``check_label``; the number of label problems is reported and must be 0). Texts are
tokenized with the simple splitter ``loopguard.split_words`` (runs of word characters,
runs of punctuation; whitespace dropped; floods such as "!!!!..." or blank-line runs split
so they can repeat); the runtime feeds the model's token ids instead. A second, held-out set
(``loopset_runs.generate_runs_loopset``: one word or one token written again and again, and
non-loops full of the same characters) is scored beside it under ``runs_set``, to the same
targets.

Metrics (definitions in ``loopset.score`` and ``loopset.catch_window``):

* recall: loops on which the guard fired no earlier than the first repeated token
  (``start + period``) and within two periods of it, or within 64 tokens for periods under
  32 (stalls: within 512 tokens of their start). ``recall_two_periods`` drops the 64-token
  allowance. Target >= 99%.
* false_positive_rate: non-loop texts on which the guard fired at all. Target <= 0.5%.
* cost: detector time per token (tokenization excluded: the runtime has ids already; each
  text's fastest of ``--timing-repeats`` runs, so preemption is not counted), compared with a decode time per
  token: 1,000 us by default, a conservative phone-class CPU figure for a sub-billion model
  (pass a measured llama.cpp figure with ``--decode-us-per-token``). Target < 1%.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field

from botpsy.config import parse_config
from botpsy.output import table, write_benchmark
from botpsy.runtime.loopguard import LoopDetector, LoopGuardConfig, word_token_ids
from botpsy.runtime.loopset import check_label, generate_loopset, score
from botpsy.runtime.loopset_runs import generate_runs_loopset

TARGETS = {"recall": 0.99, "false_positive_rate": 0.005, "fraction_of_decode": 0.01}


@dataclass
class LoopBenchConfig:
    """Score the loop guard on the generated labelled set and time it per token."""

    seed: int = field(default=0, metadata={"help": "Seed of the generated set."})
    n_loops: int = field(default=480, metadata={"help": "Loop texts in the set."})
    n_clean: int = field(default=660, metadata={"help": "Non-loop (hard negative) texts in the set."})
    runs_loops: int = field(default=120, metadata={"help": "One-word / one-token loop texts in the held-out runs set."})
    runs_clean: int = field(default=200, metadata={"help": "Non-loop texts in the held-out runs set."})
    decode_us_per_token: float = field(
        default=1000.0, metadata={"help": "Decode time per token to compare the guard's cost with, in microseconds."})
    timing_repeats: int = field(default=3, metadata={"help": "Timed runs of each text; the fastest counts."})
    out: str = field(default="bench_out/loop_guard.json", metadata={"help": "Where to write the JSON results."})
    json: bool = field(default=False, metadata={"help": "Print the JSON results instead of the table."})


def time_detector(token_streams: list[list[int]], config: LoopGuardConfig, repeats: int) -> dict[str, float]:
    """Microseconds per token over the set, and for the slowest text.

    Each text is timed ``repeats`` times and its fastest run kept, so that a preemption on
    a busy machine does not count as detector cost. Tokens after a firing are not fed: the
    runtime stops or resets the guard there.
    """
    total, tokens, worst = 0.0, 0, 0.0
    for ids in token_streams:
        fastest = float("inf")
        for _ in range(repeats):
            began = time.perf_counter()
            detector = LoopDetector(config)
            detector.feed(ids)
            fastest = min(fastest, time.perf_counter() - began)
        total += fastest
        tokens += detector.count
        worst = max(worst, fastest / detector.count)
    return {"tokens": tokens, "us_per_token": 1e6 * total / tokens, "worst_text_us_per_token": 1e6 * worst}


def run(cfg: LoopBenchConfig) -> dict:
    guard = LoopGuardConfig()
    items = generate_loopset(cfg.seed, cfg.n_loops, cfg.n_clean)
    label_problems = {item.id: problems for item in items if (problems := check_label(item, guard))}
    scores = score(items, guard)
    streams = [[token_id for token_id, _ in word_token_ids(item.text)] for item in items]
    cost = time_detector(streams, guard, cfg.timing_repeats)
    cost["decode_us_per_token"] = cfg.decode_us_per_token
    cost["fraction_of_decode"] = cost["us_per_token"] / cfg.decode_us_per_token
    measured = {"recall": scores["recall"], "false_positive_rate": scores["false_positive_rate"],
                "fraction_of_decode": cost["fraction_of_decode"]}
    runs = runs_set(cfg, guard)
    meets = {"recall": measured["recall"] >= TARGETS["recall"],
             "false_positive_rate": measured["false_positive_rate"] <= TARGETS["false_positive_rate"],
             "fraction_of_decode": measured["fraction_of_decode"] < TARGETS["fraction_of_decode"],
             "runs_recall": runs["scores"]["recall"] >= TARGETS["recall"],
             "runs_false_positive_rate": runs["scores"]["false_positive_rate"] <= TARGETS["false_positive_rate"]}
    return {
        "bench": asdict(cfg), "guard": asdict(guard), "python": sys.version.split()[0],
        "tokenizer": "loopguard.split_words: runs of word characters or of punctuation, whitespace dropped, "
                     "floods (16+ characters of a unit of up to 4; 8+ line breaks) split into tokens",
        "label_problems": label_problems, "scores": scores, "cost": cost, "runs_set": runs,
        "targets": TARGETS, "meets_targets": meets,
        "all_targets_met": all(meets.values()) and not label_problems and not runs["label_problems"],
    }


def runs_set(cfg: LoopBenchConfig, guard: LoopGuardConfig) -> dict:
    """The held-out one-word / one-token set: its label problems and scores."""
    items = generate_runs_loopset(cfg.seed, cfg.runs_loops, cfg.runs_clean)
    problems = {item.id: found for item in items if (found := check_label(item, guard))}
    return {"label_problems": problems, "scores": score(items, guard)}


def human(result: dict) -> str:
    s, c = result["scores"], result["cost"]
    rows = [{"category": row["category"], "kind": "loop" if row["is_loop"] else "non-loop", "n": row["n"],
             "caught / fired": f"{100 * row['rate']:.1f}%",
             "median latency (tokens)": row["median_latency_tokens"] if row["is_loop"] else "-"}
            for row in s["by_category"]]
    verdict = lambda key: "ok" if result["meets_targets"][key] else "MISSED"
    lines = [
        table(rows), "",
        f"recall                {100 * s['recall']:.2f}%  (target >= 99%)  {verdict('recall')}"
        f"   [strict two periods: {100 * s['recall_two_periods']:.2f}%, period exact: {100 * s['period_exact']:.1f}%]",
        f"false positives       {100 * s['false_positive_rate']:.2f}%  (target <= 0.5%)  {verdict('false_positive_rate')}",
        f"cost                  {c['us_per_token']:.2f} us/token = {100 * c['fraction_of_decode']:.3f}% of "
        f"{c['decode_us_per_token']:.0f} us decode (target < 1%)  {verdict('fraction_of_decode')}"
        f"   [slowest text {c['worst_text_us_per_token']:.2f} us/token, {c['tokens']} tokens]",
        f"label problems        {len(result['label_problems'])}",
    ]
    runs = result["runs_set"]["scores"]
    lines += ["", "held-out runs set (one word / one token again and again):",
              table([{"category": row["category"], "kind": "loop" if row["is_loop"] else "non-loop", "n": row["n"],
                      "caught / fired": f"{100 * row['rate']:.1f}%"} for row in runs["by_category"]]),
              f"recall {100 * runs['recall']:.2f}%  {verdict('runs_recall')}   false positives "
              f"{100 * runs['false_positive_rate']:.2f}%  {verdict('runs_false_positive_rate')}   "
              f"label problems {len(result['runs_set']['label_problems'])}"]
    return "\n".join(lines)


def main(cfg: LoopBenchConfig) -> int:
    result = run(cfg)
    write_benchmark(result, cfg.out, cfg.json, human)
    return 0 if result["all_targets_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main(parse_config(LoopBenchConfig, prog="bench/loop_guard.py")))
