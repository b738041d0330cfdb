"""Per-category and overall BFCL accuracy, combined the way BFCL's leaderboard combines them.

From ``bfcl_eval/eval_checker/eval_runner_helper.py::generate_leaderboard_csv``:

* non-live ``simple`` = unweighted mean of simple_python, simple_java, simple_javascript;
  non-live overall = unweighted mean of simple, multiple, parallel, parallel_multiple
  (irrelevance is not part of it).
* live overall = mean of live simple / multiple / parallel / parallel_multiple weighted by
  their item counts.
* multi-turn overall = unweighted mean of its four categories.
* hallucination: ``irrelevance`` = unweighted mean of irrelevance and live_irrelevance;
  ``relevance`` = live_relevance.
* overall = 10% non-live + 10% live + 10% irrelevance + 30% multi-turn + 40% agentic.
  Agentic (web search, memory) is not scored offline: ``overall_bfcl`` counts it as 0, as BFCL does
  for a missing category, and ``overall_offline`` renormalizes the weights over the four scored
  sections (10/60, 10/60, 10/60, 30/60).

A section (or overall) with a category absent from the verdicts is ``None``, not a guess.

Example::

    >>> from botpsy.eval.bfcl.scoring import Verdict
    >>> summarize([Verdict("a", "irrelevance", True), Verdict("b", "irrelevance", False)])["categories"]
    {'irrelevance': {'accuracy': 0.5, 'correct': 1, 'total': 2}}
"""

from __future__ import annotations

from typing import Iterable

from botpsy.eval.bfcl.items import CATEGORIES, LEFT_OUT

SIMPLE = ["simple_python", "simple_java", "simple_javascript"]
LIVE_AST = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
MULTI_TURN = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
SECTION_WEIGHTS = {"non_live": 10, "live": 10, "irrelevance": 10, "multi_turn": 30}
AGENTIC_WEIGHT = 40


def summarize(verdicts: Iterable) -> dict:
    """Accuracy per category, per BFCL section, and overall (see the module docstring)."""
    counts: dict[str, list[int]] = {}
    for verdict in verdicts:
        tally = counts.setdefault(verdict.category, [0, 0])
        tally[0] += bool(verdict.valid)
        tally[1] += 1
    categories = {c: {"accuracy": ok / total, "correct": ok, "total": total}
                  for c, (ok, total) in sorted(counts.items(), key=lambda kv: CATEGORIES.index(kv[0]))}
    acc = {c: v["accuracy"] for c, v in categories.items()}
    simple = mean([acc.get(c) for c in SIMPLE])
    sections = {
        "non_live": mean([simple] + [acc.get(c) for c in ("multiple", "parallel", "parallel_multiple")]),
        "live": weighted([(acc.get(c), counts.get(c, [0, 0])[1]) for c in LIVE_AST]),
        "irrelevance": mean([acc.get("irrelevance"), acc.get("live_irrelevance")]),
        "multi_turn": mean([acc.get(c) for c in MULTI_TURN]),
    }
    details = {"non_live_simple": simple, "relevance": acc.get("live_relevance")}
    complete = all(v is not None for v in sections.values())
    scored = sum(SECTION_WEIGHTS[s] * sections[s] for s in SECTION_WEIGHTS) if complete else None
    total_weight = sum(SECTION_WEIGHTS.values())
    return {
        "categories": categories,
        "sections": {**sections, **details},
        "overall_offline": scored / total_weight if complete else None,
        "overall_bfcl": scored / (total_weight + AGENTIC_WEIGHT) if complete else None,
        "left_out": dict(LEFT_OUT),
    }


def mean(values: list) -> float | None:
    return None if any(v is None for v in values) else sum(values) / len(values)


def weighted(pairs: list[tuple]) -> float | None:
    if any(acc is None for acc, _ in pairs):
        return None
    total = sum(n for _, n in pairs)
    return sum(acc * n for acc, n in pairs) / total
