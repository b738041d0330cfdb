"""The metrics the report quotes, as pure functions of the records ``botpsy eval`` writes.

A **generation** is one assistant turn as recorded: the agent's ``ModelStep.to_dict()`` (device
suite) or ``generation_record(GenerationResult)`` (BFCL, IFEval, IFBench). Both carry
``finish_reason``, ``loop_events`` (each with ``where``: reasoning or answer), ``tool_calls``,
``parse_errors``, ``reasoning_tokens`` and ``completion_tokens``. An **item record** is one line of
a suite's JSONL: ``id``, ``correct`` and its ``generations`` (device records also carry the
task's ``kind``, ``domain``, ``success``, ``score``, ``wasted_calls`` and the agent's ``stats``).

Nothing here runs a model; ``botpsy eval`` computes every figure of its table with these, so a
number can always be traced back to the records.

Example::

    >>> gens = [{"finish_reason": "length", "loop_events": [{"where": "reasoning"}]},
    ...         {"finish_reason": "stop", "loop_events": []}]
    >>> loop_rate(gens), cap_hit_rate(gens)
    (0.5, 0.5)
"""

from __future__ import annotations

import math
from typing import Any, Iterable

SPECIAL_KINDS = ("incomplete", "wrong_value", "unavailable")
REFUSAL_KINDS = ("irrelevant",)
BFCL_REFUSAL_CATEGORIES = ("irrelevance", "live_irrelevance")
NON_CALL_ERRORS = ("unclosed_think",)  # parse errors that are not about a call
MULTI_TURN_KINDS = ("multi_step", "multi_turn")  # device tasks that need more than one assistant turn


def share(hits: int, total: int) -> float | None:
    """``hits / total`` rounded to 4 places; None when there is nothing to divide by.

    >>> share(1, 3), share(0, 0)
    (0.3333, None)
    """
    return round(hits / total, 4) if total else None


def generation_record(result: Any) -> dict[str, Any]:
    """The fields of a ``GenerationResult`` that the metrics and the JSONL keep (text excluded:
    the suites store the raw output beside it)."""
    return {
        "finish_reason": result.finish_reason,
        "loop_events": list(result.loop_events),
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in result.parsed.tool_calls],
        "parse_errors": [{"kind": e.kind, "message": e.message} for e in result.parsed.errors],
        "budget_hit": result.budget_hit,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "reasoning_tokens": result.reasoning_tokens,
        "ttft_ms": round(result.ttft_ms, 2),
        "total_ms": round(result.total_ms, 2),
        **({"call_vetoes": result.call_vetoes} if getattr(result, "call_vetoes", 0) else {}),
    }


def all_generations(records: Iterable[dict]) -> list[dict]:
    """Every generation of every item record, in order (a device record's are its model steps).

    >>> all_generations([{"generations": [{"a": 1}]}, {"steps": [{"type": "model", "index": 0}, {"type": "tool"}]}])
    [{'a': 1}, {'type': 'model', 'index': 0, 'invalid_calls': 0}]
    """
    return [g for r in records for g in generations_of(r)]


def generations_of(record: dict) -> list[dict]:
    """An item's generations; a device record's model steps each gain ``invalid_calls``, how many
    of that turn's calls the world rejected as malformed (unknown tool, arguments off the schema)."""
    if "generations" in record:
        return record["generations"] or []
    steps = record.get("steps") or []
    invalid: dict[int, int] = {}
    for step in steps:
        if step.get("type") == "tool" and step.get("validation_error"):
            invalid[step["index"]] = invalid.get(step["index"], 0) + 1
    return [{**s, "invalid_calls": invalid.get(s.get("index"), 0)} for s in steps if s.get("type") == "model"]


def loop_rate(generations: list[dict]) -> float | None:
    """Share of generations in which the loop guard (observe mode: it records, never intervenes)
    detected a loop in the reasoning.

    >>> loop_rate([{"loop_events": [{"where": "answer"}]}, {"loop_events": []}])
    0.0
    >>> loop_rate([{"loop_events": [{"where": "reasoning"}, {"where": "reasoning"}]}, {}])
    0.5
    """
    looped = sum(any(e.get("where") == "reasoning" for e in g.get("loop_events") or []) for g in generations)
    return share(looped, len(generations))


def cap_hit_rate(generations: list[dict]) -> float | None:
    """Share of generations that stopped at the max-token cap (``finish_reason == "length"``).

    >>> cap_hit_rate([{"finish_reason": "length"}, {"finish_reason": "stop"}, {"finish_reason": "stop"}])
    0.3333
    """
    return share(sum(g.get("finish_reason") == "length" for g in generations), len(generations))


def call_errors(generation: dict) -> list[dict]:
    """The parse errors that concern a tool call (a reasoning block cut at the cap does not)."""
    return [e for e in generation.get("parse_errors") or [] if e.get("kind") not in NON_CALL_ERRORS]


def schema_valid_call_rate(generations: list[dict]) -> float | None:
    """Share of the generations that tried to call a tool whose calls all parsed against the tools'
    schemas: no malformed call block, and (device world) no call rejected as unknown or with
    arguments off its schema (``invalid_calls``).

    >>> schema_valid_call_rate([{"tool_calls": [{"name": "a"}], "parse_errors": []},
    ...                         {"tool_calls": [], "parse_errors": [{"kind": "bad_json"}]},
    ...                         {"tool_calls": [{"name": "b"}], "invalid_calls": 1},
    ...                         {"tool_calls": [], "parse_errors": [{"kind": "unclosed_think"}]}])
    0.3333
    """
    attempted = [g for g in generations if g.get("tool_calls") or call_errors(g)]
    valid = sum(not call_errors(g) and not g.get("invalid_calls") for g in attempted)
    return share(valid, len(attempted))


def reasoning_tokens(record: dict) -> int:
    """Reasoning tokens an item cost, over all its generations."""
    return sum(g.get("reasoning_tokens", 0) for g in generations_of(record))


def reasoning_tokens_per_correct(records_by_model: dict[str, list[dict]]) -> dict[str, Any]:
    """Mean reasoning tokens per item, over only the items that **every** model answered correctly,
    so that a model is not rewarded for being right only on easy items.

    >>> a = [{"id": "1", "correct": True, "generations": [{"reasoning_tokens": 10}]},
    ...      {"id": "2", "correct": True, "generations": [{"reasoning_tokens": 99}]}]
    >>> b = [{"id": "1", "correct": True, "generations": [{"reasoning_tokens": 30}]},
    ...      {"id": "2", "correct": False, "generations": [{"reasoning_tokens": 5}]}]
    >>> reasoning_tokens_per_correct({"a": a, "b": b})
    {'items': 1, 'per_model': {'a': 10.0, 'b': 30.0}}
    """
    correct_ids = [{r["id"] for r in records if r.get("correct")} for records in records_by_model.values()]
    common = set.intersection(*correct_ids) if correct_ids else set()
    per_model = {}
    for label, records in records_by_model.items():
        picked = [reasoning_tokens(r) for r in records if r["id"] in common]
        per_model[label] = round(sum(picked) / len(picked), 1) if picked else None
    return {"items": len(common), "per_model": per_model}


def paired(records_a: list[dict], records_b: list[dict]) -> dict[str, Any]:
    """Two models on the items both ran: how many each got right where the other did not, and the
    exact two-sided McNemar p-value (a sign test on those discordant items). A gap between two
    rows is only worth quoting when the discordant items say so: 11 against 16 of 150 is p = 0.44.

    >>> a = [{"id": str(i), "correct": i < 8} for i in range(10)]
    >>> b = [{"id": str(i), "correct": i < 2} for i in range(10)] + [{"id": "x", "correct": True}]
    >>> paired(a, b)
    {'items': 10, 'both': 2, 'only_a': 6, 'only_b': 0, 'p_value': 0.0312}
    """
    right_b = {r["id"]: bool(r.get("correct")) for r in records_b}
    pairs = [(bool(r.get("correct")), right_b[r["id"]]) for r in records_a if r["id"] in right_b]
    only_a = sum(a and not b for a, b in pairs)
    only_b = sum(b and not a for a, b in pairs)
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2 ** n if n else 0.5
    return {"items": len(pairs), "both": sum(a and b for a, b in pairs), "only_a": only_a, "only_b": only_b,
            "p_value": round(min(1.0, 2 * tail), 4)}


def reasoning_tokens_spent(records: list[dict]) -> dict[str, Any]:
    """All the reasoning tokens one model spent on a suite, divided by the items it got right.

    The companion of ``reasoning_tokens_per_correct``: that one compares models on the items all
    of them solved, so it is undefined when one model solves nothing (an untrained base). This one
    is defined for each model alone and charges it for the reasoning of its failures too;
    ``per_correct`` is None when nothing was right (the tokens were spent for no answer).

    >>> reasoning_tokens_spent([{"id": "1", "correct": True, "generations": [{"reasoning_tokens": 10}]},
    ...                         {"id": "2", "correct": False, "generations": [{"reasoning_tokens": 30}]}])
    {'items': 2, 'correct': 1, 'reasoning_tokens': 40, 'per_correct': 40.0}
    >>> reasoning_tokens_spent([{"id": "1", "correct": False, "generations": [{"reasoning_tokens": 7}]}])
    {'items': 1, 'correct': 0, 'reasoning_tokens': 7, 'per_correct': None}
    """
    correct = sum(bool(r.get("correct")) for r in records)
    total = sum(reasoning_tokens(r) for r in records)
    return {"items": len(records), "correct": correct, "reasoning_tokens": total,
            "per_correct": round(total / correct, 1) if correct else None}


def turns_per_solved_task(device_records: list[dict], kinds: tuple[str, ...] = MULTI_TURN_KINDS) -> dict[str, Any]:
    """Assistant turns and tool calls per solved multi-turn device task (the agent's own counts,
    format retries included: they cost time on the device).

    >>> records = [{"kind": "multi_step", "success": True, "stats": {"model_steps": 3, "tool_calls": 2}},
    ...            {"kind": "multi_turn", "success": True, "stats": {"model_steps": 5, "tool_calls": 2}},
    ...            {"kind": "multi_turn", "success": False, "stats": {"model_steps": 9, "tool_calls": 7}},
    ...            {"kind": "single", "success": True, "stats": {"model_steps": 1, "tool_calls": 1}}]
    >>> turns_per_solved_task(records)
    {'solved': 2, 'assistant_turns': 4.0, 'tool_calls': 2.0}
    """
    solved = [r for r in device_records if r.get("kind") in kinds and r.get("success")]
    if not solved:
        return {"solved": 0, "assistant_turns": None, "tool_calls": None}
    return {"solved": len(solved),
            "assistant_turns": round(sum(r["stats"]["model_steps"] for r in solved) / len(solved), 2),
            "tool_calls": round(sum(calls_made(r) for r in solved) / len(solved), 2)}


def calls_made(record: dict) -> int:
    """Tool calls the model made in a device record: counted from its model steps (records written
    before 2026-12-05 said 0 in ``stats``), else the agent's own count.

    >>> calls_made({"stats": {"tool_calls": 0}, "steps": [{"type": "model", "tool_calls": [{}, {}]}, {"type": "model", "tool_calls": []}]})
    2
    """
    steps = [s for s in record.get("steps") or [] if s.get("type") == "model"]
    return sum(len(s.get("tool_calls") or []) for s in steps) if steps else record["stats"]["tool_calls"]


def first_call_accuracy(device_records: list[dict], kinds: tuple[str, ...] = ("single", "parallel")) -> dict[str, Any]:
    """How often the first turn made exactly the gold calls, on the device tasks of ``kinds``.

    >>> first_call_accuracy([{"kind": "single", "first_call": {"exact": True}},
    ...                      {"kind": "parallel", "first_call": {"exact": False}}, {"kind": "irrelevant", "first_call": None}])
    {'tasks': 2, 'exact': 1, 'exact_rate': 0.5}
    """
    rows = [r for r in device_records if r.get("kind") in kinds and r.get("first_call")]
    exact = sum(bool(r["first_call"]["exact"]) for r in rows)
    return {"tasks": len(rows), "exact": exact, "exact_rate": share(exact, len(rows))}


def device_costs(device_records: list[dict]) -> dict[str, Any]:
    """What solving costs on the device: generated tokens per solved task (every generation of the
    task counted, reasoning included), the median time to first token over every assistant turn
    (the first turn of a task prefills the tools block, later turns restore it from the prefix
    cache), and the mean decode speed per task.

    >>> device_costs([{"success": True, "stats": {"completion_tokens": 40, "decode_tokens_per_s": 20},
    ...                "steps": [{"type": "model", "ttft_ms": 900}, {"type": "model", "ttft_ms": 100}]},
    ...               {"success": False, "stats": {"completion_tokens": 90, "decode_tokens_per_s": 22},
    ...                "steps": [{"type": "model", "ttft_ms": 300}]}])
    {'generated_tokens_per_solved': 40.0, 'generated_tokens_per_task': 65.0, 'ttft_ms_median': 300.0, 'decode_tokens_per_s': 21.0}
    """
    import statistics

    stats = [r.get("stats") or {} for r in device_records]
    solved = [s for r, s in zip(device_records, stats) if r.get("success")]
    tokens = [s.get("completion_tokens", 0) for s in stats]
    ttft = [s["ttft_ms"] for r in device_records for s in r.get("steps") or [] if s.get("type") == "model" and s.get("ttft_ms")]
    decode = [s["decode_tokens_per_s"] for s in stats if s.get("decode_tokens_per_s")]
    return {"generated_tokens_per_solved": round(sum(s.get("completion_tokens", 0) for s in solved) / len(solved), 1) if solved else None,
            "generated_tokens_per_task": round(sum(tokens) / len(tokens), 1) if tokens else None,
            "ttft_ms_median": round(float(statistics.median(ttft)), 1) if ttft else None,
            "decode_tokens_per_s": round(sum(decode) / len(decode), 2) if decode else None}


def refusal_accuracy(device_records: list[dict], bfcl_records: list[dict]) -> dict[str, Any]:
    """When no tool fits, does the model decline instead of calling one? Device ``irrelevant``
    tasks (scored by the world's checker) and BFCL's irrelevance categories, apart and pooled.

    >>> refusal_accuracy([{"kind": "irrelevant", "success": True}, {"kind": "single", "success": False}],
    ...                  [{"category": "irrelevance", "correct": False}])
    {'device': 1.0, 'bfcl': 0.0, 'all': 0.5, 'items': 2}
    """
    device = [bool(r.get("success")) for r in device_records if r.get("kind") in REFUSAL_KINDS]
    bfcl = [bool(r.get("correct")) for r in bfcl_records if r.get("category") in BFCL_REFUSAL_CATEGORIES]
    pooled = device + bfcl
    return {"device": share(sum(device), len(device)), "bfcl": share(sum(bfcl), len(bfcl)),
            "all": share(sum(pooled), len(pooled)), "items": len(pooled)}


def special_case_accuracy(device_records: list[dict]) -> dict[str, Any]:
    """Success on the device kinds where the right move is not the obvious call: a request missing
    a detail (``incomplete``), a value the world rejects (``wrong_value``), an action no tool offers
    (``unavailable``); per kind and pooled.

    >>> special_case_accuracy([{"kind": "incomplete", "success": True}, {"kind": "unavailable", "success": False}])
    {'incomplete': 1.0, 'wrong_value': None, 'unavailable': 0.0, 'all': 0.5, 'items': 2}
    """
    out: dict[str, Any] = {}
    pooled: list[bool] = []
    for kind in SPECIAL_KINDS:
        wins = [bool(r.get("success")) for r in device_records if r.get("kind") == kind]
        out[kind] = share(sum(wins), len(wins))
        pooled += wins
    out.update({"all": share(sum(pooled), len(pooled)), "items": len(pooled)})
    return out


def quant_deltas(scores: dict[str, dict[str, float | None]], baseline: str, max_drop: float) -> dict[str, Any]:
    """Each quantization's change against ``baseline`` on every figure it shares with it; a figure
    where higher is better (accuracies, schema-valid rate) is flagged when it drops by more than
    ``max_drop``; a rate where lower is better (``loop_rate``, ``cap_hit_rate``) when it rises by more.

    >>> scores = {"bf16": {"device": 0.8, "loop_rate": 0.01}, "q4": {"device": 0.7, "loop_rate": 0.02}}
    >>> result = quant_deltas(scores, "bf16", max_drop=0.05)
    >>> result["deltas"]["q4"], result["flagged"]
    ({'device': -0.1, 'loop_rate': 0.01}, [{'model': 'q4', 'metric': 'device', 'delta': -0.1}])
    """
    if baseline not in scores:
        raise ValueError(f"baseline {baseline!r} is not among the compared models {sorted(scores)}")
    base = scores[baseline]
    deltas: dict[str, dict[str, float]] = {}
    flagged = []
    for label, values in scores.items():
        if label == baseline:
            continue
        deltas[label] = {}
        for metric, value in values.items():
            if value is None or base.get(metric) is None:
                continue
            delta = round(value - base[metric], 4)
            deltas[label][metric] = delta
            worse = delta > max_drop if metric in ("loop_rate", "cap_hit_rate") else -delta > max_drop
            if worse:
                flagged.append({"model": label, "metric": metric, "delta": delta})
    return {"baseline": baseline, "max_drop": max_drop, "deltas": deltas, "flagged": flagged}
