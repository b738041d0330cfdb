"""The report's metrics on hand-made records: what each counts, what it leaves out."""

from __future__ import annotations

import pytest

from botpsy.agent.steps import ModelStep, ToolStep
from botpsy.eval import metrics
from botpsy.eval.harness import gate_scores, model_metrics


def gen(finish="stop", loops=(), calls=0, errors=0, reasoning=0) -> dict:
    return {"finish_reason": finish, "loop_events": [{"where": w} for w in loops],
            "tool_calls": [{"name": "f", "arguments": {}}] * calls,
            "parse_errors": [{"kind": "bad", "message": "x"}] * errors, "reasoning_tokens": reasoning}


def device(kind, success, turns=1, calls=1, domain="device") -> dict:
    return {"id": f"{kind}-{success}-{turns}", "kind": kind, "domain": domain, "success": success,
            "correct": success, "score": 1.0 if success else 0.0, "stats": {"model_steps": turns, "tool_calls": calls}}


def test_loop_rate_counts_generations_with_a_reasoning_loop():
    generations = [gen(loops=["reasoning", "reasoning"]), gen(loops=["answer"]), gen(), gen(loops=["answer", "reasoning"])]
    assert metrics.loop_rate(generations) == 0.5
    assert metrics.loop_rate([]) is None


def test_cap_hit_rate_counts_length_stops_only():
    generations = [gen("length"), gen("stop"), gen("loop"), gen("length")]
    assert metrics.cap_hit_rate(generations) == 0.5


def test_schema_valid_rate_ignores_generations_without_calls():
    generations = [gen(calls=2), gen(calls=1, errors=1), gen(errors=1), gen(), gen()]
    assert metrics.schema_valid_call_rate(generations) == pytest.approx(1 / 3, abs=1e-4)
    assert metrics.schema_valid_call_rate([gen()]) is None
    cut_reasoning = {**gen("length"), "parse_errors": [{"kind": "unclosed_think", "message": "cut"}]}
    assert metrics.schema_valid_call_rate([cut_reasoning]) is None  # no call was attempted


def test_schema_valid_rate_counts_calls_the_world_rejected():
    steps = [ModelStep(0, 10, "", "", [{"id": "1", "name": "nope", "arguments": {}}], [], "stop", 5).to_dict(),
             ToolStep(0, "1", "nope", {}, {"error": "unknown_tool"}, "unknown_tool", validation_error=True).to_dict(),
             ModelStep(1, 10, "", "", [{"id": "2", "name": "f", "arguments": {}}], [], "stop", 5).to_dict(),
             ToolStep(1, "2", "f", {}, {"ok": True}).to_dict()]
    generations = metrics.all_generations([{"id": "t", "steps": steps}])
    assert [g["invalid_calls"] for g in generations] == [1, 0]
    assert metrics.schema_valid_call_rate(generations) == 0.5


def test_device_generations_come_from_model_steps():
    steps = [ModelStep(0, 10, "r", "", [{"id": "1", "name": "f", "arguments": {}}], [], "length", 5, reasoning_tokens=3,
                       loop_events=[{"where": "reasoning"}]).to_dict(),
             ToolStep(0, "1", "f", {}, {"ok": True}).to_dict(),
             ModelStep(1, 20, "", "done", [], [], "stop", 2).to_dict()]
    records = [{"id": "t", "correct": True, "steps": steps}]
    generations = metrics.all_generations(records)
    assert len(generations) == 2
    assert metrics.loop_rate(generations) == 0.5 and metrics.cap_hit_rate(generations) == 0.5
    assert metrics.reasoning_tokens(records[0]) == 3


def test_reasoning_tokens_per_correct_uses_items_all_models_got_right():
    a = [{"id": i, "correct": True, "generations": [gen(reasoning=r)]} for i, r in (("1", 10), ("2", 20), ("3", 1000))]
    b = [{"id": "1", "correct": True, "generations": [gen(reasoning=40)]},
         {"id": "2", "correct": True, "generations": [gen(reasoning=60), gen(reasoning=20)]},
         {"id": "3", "correct": False, "generations": [gen(reasoning=5)]}]
    c = [{"id": "1", "correct": False, "generations": []}, {"id": "2", "correct": True, "generations": [gen(reasoning=7)]}]
    two = metrics.reasoning_tokens_per_correct({"a": a, "b": b})
    assert two == {"items": 2, "per_model": {"a": 15.0, "b": 60.0}}
    three = metrics.reasoning_tokens_per_correct({"a": a, "b": b, "c": c})
    assert three == {"items": 1, "per_model": {"a": 20.0, "b": 80.0, "c": 7.0}}
    assert metrics.reasoning_tokens_per_correct({"a": a, "c": [c[0]]})["per_model"] == {"a": None, "c": None}


def test_reasoning_tokens_spent_charges_failures_and_is_defined_for_a_model_alone():
    a = [{"id": "1", "correct": True, "generations": [gen(reasoning=10)]},
         {"id": "2", "correct": False, "generations": [gen(reasoning=50), gen(reasoning=20)]}]
    assert metrics.reasoning_tokens_spent(a) == {"items": 2, "correct": 1, "reasoning_tokens": 80, "per_correct": 80.0}
    nothing = [{"id": "1", "correct": False, "generations": [gen(reasoning=160)]}]
    assert metrics.reasoning_tokens_spent(nothing)["per_correct"] is None
    assert metrics.reasoning_tokens_spent([]) == {"items": 0, "correct": 0, "reasoning_tokens": 0, "per_correct": None}


def test_turns_per_solved_task_only_counts_solved_multi_turn_tasks():
    records = [device("multi_turn", True, 4, 2), device("multi_step", True, 2, 2), device("multi_step", False, 9, 9),
               device("single", True, 1, 1)]
    assert metrics.turns_per_solved_task(records) == {"solved": 2, "assistant_turns": 3.0, "tool_calls": 2.0}
    assert metrics.turns_per_solved_task([device("single", True)])["solved"] == 0


def test_paired_counts_discordant_items_and_gives_an_exact_p_value():
    a = [{"id": str(i), "correct": i % 2 == 0} for i in range(20)]
    b = [{"id": str(i), "correct": i % 2 == 0} for i in range(20)]
    assert metrics.paired(a, b) == {"items": 20, "both": 10, "only_a": 0, "only_b": 0, "p_value": 1.0}
    b = [{"id": str(i), "correct": True} for i in range(12)]  # 8 items only a ran are left out
    result = metrics.paired(a, b)
    assert (result["items"], result["only_a"], result["only_b"]) == (12, 0, 6)
    assert result["p_value"] == 0.0312  # 2 x (1/2)^6, the exact sign test
    assert metrics.paired(b, a)["p_value"] == result["p_value"]  # symmetric


def test_refusal_and_special_case_accuracy():
    records = [device("irrelevant", True), device("irrelevant", False), device("incomplete", True),
               device("wrong_value", False), device("unavailable", True), device("unavailable", True),
               device("single", False)]
    bfcl = [{"category": "irrelevance", "correct": True}, {"category": "live_irrelevance", "correct": True},
            {"category": "simple_python", "correct": False}]
    refusal = metrics.refusal_accuracy(records, bfcl)
    assert refusal == {"device": 0.5, "bfcl": 1.0, "all": 0.75, "items": 4}
    special = metrics.special_case_accuracy(records)
    assert special == {"incomplete": 1.0, "wrong_value": 0.0, "unavailable": 1.0, "all": 0.75, "items": 4}


def test_quant_deltas_flag_drops_and_rises_beyond_the_threshold():
    scores = {"bf16": {"device": 0.80, "bfcl": 0.50, "loop_rate": 0.02, "schema_valid_call_rate": 0.99},
              "q8_0": {"device": 0.79, "bfcl": 0.52, "loop_rate": 0.03, "schema_valid_call_rate": 0.98},
              "q4_k_m": {"device": 0.70, "bfcl": None, "loop_rate": 0.10, "schema_valid_call_rate": 0.90}}
    result = metrics.quant_deltas(scores, "bf16", max_drop=0.05)
    assert result["deltas"]["q8_0"] == {"device": -0.01, "bfcl": 0.02, "loop_rate": 0.01, "schema_valid_call_rate": -0.01}
    assert "bfcl" not in result["deltas"]["q4_k_m"]  # no number, no delta, no flag
    assert {(f["model"], f["metric"]) for f in result["flagged"]} == {
        ("q4_k_m", "device"), ("q4_k_m", "loop_rate"), ("q4_k_m", "schema_valid_call_rate")}
    assert metrics.quant_deltas(scores, "bf16", max_drop=0.2)["flagged"] == []
    with pytest.raises(ValueError, match="baseline"):
        metrics.quant_deltas(scores, "f32", max_drop=0.05)


def test_model_metrics_and_gate_scores_from_records():
    per_suite = {"device": [{**device("irrelevant", True), "steps": []}, {**device("incomplete", False), "steps": []}],
                 "bfcl": [{"id": "x", "category": "irrelevance", "correct": False,
                           "generations": [gen("length", ["reasoning"], calls=1, errors=1)]},
                          {"id": "y", "category": "simple_python", "correct": False, "backend_error": "full",
                           "generations": []}]}
    figures = model_metrics(per_suite)
    assert figures["generations"] == 1 and figures["loop_rate"] == 1.0 and figures["cap_hit_rate"] == 1.0
    assert figures["schema_valid_call_rate"] == 0.0 and figures["backend_errors"] == 1
    assert figures["refusal_accuracy"]["all"] == 0.5
    summary = {"models": {"m": {"suites": {"device": {"success_rate": 0.5}, "bfcl": {"accuracy": 0.0}},
                                "metrics": figures}}}
    assert gate_scores(summary) == {"m": {"device": 0.5, "bfcl": 0.0, "loop_rate": 1.0, "schema_valid_call_rate": 0.0}}


@pytest.mark.parametrize("module", ["botpsy.eval.metrics", "botpsy.eval.suites", "botpsy.eval.harness",
                                    "botpsy.eval.report"])
def test_docstring_examples(module):
    import doctest
    import importlib

    failed, attempted = doctest.testmod(importlib.import_module(module))
    assert attempted > 0 and failed == 0
