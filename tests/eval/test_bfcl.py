"""BFCL v4 adapter: BFCL's own ground truth, written as Qwen3.5 output and parsed back, scores 100%
with the official checkers on every offline category; wrong answers fail in each category."""

import copy

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed --no-deps by runs/setup.sh")

from botpsy.chat import parse_output, render  # noqa: E402
from botpsy.chat.parse import parse_with_schemas  # noqa: E402
from botpsy.chat.template import render_completion  # noqa: E402
from botpsy.eval.bfcl import CATEGORIES, bfcl_items, run_item, score_item, summarize  # noqa: E402
from botpsy.eval.bfcl.gold import UNPASSABLE, gold_calls, gold_output, oracle, placeholder_call  # noqa: E402
from botpsy.eval.bfcl.items import LIVE, MULTI_TURN, NON_LIVE, expand_categories, to_tool  # noqa: E402
from botpsy.eval.bfcl.official import safe_call_string  # noqa: E402

SINGLE_TURN = NON_LIVE + LIVE
AST_CATEGORIES = [c for c in SINGLE_TURN if "relevance" not in c]


@pytest.fixture(scope="module")
def single_turn_items():
    return bfcl_items(SINGLE_TURN)


def test_ground_truth_scores_100_percent_on_every_single_turn_category(single_turn_items):
    verdicts = [score_item(item, gold_output(item)) for item in single_turn_items]
    failed = {v.id: f"{v.error_type}: {v.error}" for v in verdicts if not v.valid}
    assert set(failed) == set(UNPASSABLE), {k: v for k, v in failed.items() if k not in UNPASSABLE}
    counted = [v for v in verdicts if v.id not in UNPASSABLE]
    per_category = summarize(counted)["categories"]
    assert set(per_category) == set(SINGLE_TURN)
    assert all(c["accuracy"] == 1.0 for c in per_category.values()), per_category
    assert sum(c["total"] for c in summarize(verdicts)["categories"].values()) == 1390 + 2251


def test_the_ground_truth_goes_through_the_qwen_wire_format(single_turn_items):
    """The gold text is real Qwen3.5 tool-call text: botpsy's parser (with the scoring schemas) gives
    the gold calls back, and every sampled item's prompt renders with its tools."""
    for item in single_turn_items[::50]:
        calls = gold_calls(item)
        parsed = parse_with_schemas(gold_output(item), item.scoring_schemas())
        assert parsed.ok and [c.name for c in parsed.tool_calls] == [c["name"] for c in calls]
        prompt = render(item.messages, item.tools, add_generation_prompt=True)
        assert all(tool["function"]["name"] in prompt for tool in item.tools)


@pytest.mark.parametrize("category", MULTI_TURN)
def test_ground_truth_turn_by_turn_scores_100_percent_on_multi_turn(category):
    # multi_turn_base in full; the other three (same backends, same checker) sampled to keep the run short
    items = bfcl_items([category], limit=None if category == "multi_turn_base" else 40)
    verdicts = [run_item(item, oracle(item)) for item in items]
    assert [(v.id, v.error_type, v.error) for v in verdicts if not v.valid] == []


def wrong_value(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1000
    if isinstance(value, list):
        return value + ["zzz extra"]
    if isinstance(value, dict):
        return {**value, "zzz_extra": 1}
    return "zzz wrong value"


def with_mutation(item, mutation):
    calls = copy.deepcopy(gold_calls(item))
    if mutation == "name":
        calls[0]["name"] += "_wrong"
    else:
        name, value = next(iter(calls[0]["arguments"].items()))
        calls[0]["arguments"][name] = wrong_value(value)
    return render_completion("Calling.", "", calls)


@pytest.mark.parametrize("category", AST_CATEGORIES)
@pytest.mark.parametrize("mutation", ["name", "value"])
def test_a_wrong_function_name_or_value_fails(category, mutation):
    items = [i for i in bfcl_items([category], limit=12) if i.id not in UNPASSABLE]
    if mutation == "value":
        items = [i for i in items if gold_calls(i)[0]["arguments"]]
    assert len(items) >= 5
    verdicts = [score_item(item, with_mutation(item, mutation)) for item in items]
    assert [v.id for v in verdicts if v.valid] == []


@pytest.mark.parametrize("category", ["irrelevance", "live_irrelevance"])
def test_a_call_on_an_irrelevance_item_fails(category):
    for item in bfcl_items([category], limit=10):
        call = placeholder_call(item.entry["function"][0])
        verdict = score_item(item, render_completion("Try it.", "", [call]))
        assert not verdict.valid and verdict.error_type == "irrelevance_error:decoder_success"


def test_no_call_on_a_relevance_item_fails():
    for item in bfcl_items(["live_relevance"]):
        assert not score_item(item, render_completion("Hmm.", "I cannot do that.")).valid


def wrong_oracle(item, mode):
    """The gold oracle with one turn broken: a wrong first argument, or no calls at all."""
    broken = copy.deepcopy(item)
    turn = next(i for i, calls in enumerate(broken.ground_truth) if calls)
    gold = oracle(item)

    def generate(messages, tools):
        turn_index = sum(1 for m in messages if m["role"] == "user") - 1
        if turn_index != turn or messages[-1]["role"] == "tool":
            return gold(messages, tools)
        if mode == "silent":
            return render_completion("I will not call anything.", "Done.")
        parsed = parse_output(gold(messages, tools), tools)
        calls = [{"name": c.name, "arguments": dict(c.arguments)} for c in parsed.tool_calls]
        key = next(k for c in calls for k in c["arguments"])
        target = next(c for c in calls if key in c["arguments"])
        target["arguments"][key] = wrong_value(target["arguments"][key])
        return render_completion("Calling.", "", calls)

    return generate


@pytest.mark.parametrize("category", MULTI_TURN)
@pytest.mark.parametrize("mode", ["value", "silent"])
def test_a_wrong_multi_turn_answer_fails(category, mode):
    items = bfcl_items([category], limit=8)
    if mode == "value":  # the first turn with calls must have an argument to change
        items = [i for i in items if any("=" in c or "('" in c for c in next(t for t in i.ground_truth if t))]
    verdicts = [run_item(item, wrong_oracle(item, mode)) for item in items]
    assert len(verdicts) >= 5 and [v.id for v in verdicts if v.valid] == []


def test_scoring_an_item_twice_starts_from_the_same_backend_state():
    item = bfcl_items(["multi_turn_base"], limit=1)[0]
    first = run_item(item, oracle(item))
    assert first.valid
    assert not run_item(item, wrong_oracle(item, "silent")).valid
    assert run_item(item, oracle(item)).valid
    # what run_item recorded (raw text per turn and step) scores the same again, as a resumed run would
    assert score_item(item, first.raw).valid and len(first.raw) == len(item.turns)


def test_miss_func_adds_the_held_out_function_at_its_turn():
    item = next(i for i in bfcl_items(["multi_turn_miss_func"], limit=5) if i.added_tools)
    (turn, added), = item.added_tools.items()
    names = lambda tools: {t["function"]["name"] for t in tools}  # noqa: E731
    assert names(added) & names(item.tools) == set()
    assert names(added) <= names(item.tools_at(turn)) and not names(added) & names(item.tools_at(turn - 1))
    assert item.turns[turn][0]["content"].startswith("I have updated some more functions")


def test_bfcl_types_become_json_schema():
    tool = to_tool({"name": "f.g", "description": "d", "parameters": {"type": "dict", "required": ["a"], "properties": {
        "a": {"type": "float", "description": "x"}, "b": {"type": "tuple", "items": {"type": "integer"}},
        "c": {"type": "dict", "properties": {"d": {"type": "any"}}}, "e": {"description": "no type"}}}})
    fn = tool["function"]
    assert fn["name"] == "f.g" and fn["description"].endswith("Python 3 syntax.")
    props = fn["parameters"]["properties"]
    assert fn["parameters"]["type"] == "object" and fn["parameters"]["required"] == ["a"]
    assert props["a"]["type"] == "number" and props["a"]["description"].endswith("float type value.")
    assert props["b"] == {"type": "array", "items": {"type": "integer"}}
    assert props["c"]["type"] == "object" and props["c"]["properties"]["d"]["type"] == "string"
    assert props["e"]["type"] == "string"


def test_java_parameters_are_source_text_strings():
    item = bfcl_items(["simple_java"], limit=1)[0]
    schema = item.tools[0]["function"]["parameters"]["properties"]
    assert all(p["type"] == "string" for p in schema.values())
    assert "Java" in next(iter(schema.values()))["description"]


def test_calls_that_could_run_other_code_are_defused():
    methods = {"cd": None}
    assert safe_call_string("cd", {"folder": "a'); import os; ('"}, methods) == \
        "cd(folder=\"a'); import os; ('\")"
    for name, args in [("open", {"file": "/etc/passwd", "mode": "w"}), ("__import__", {"name": "os"}),
                       ("eval", {}), ("cd", {"folder=1,x": 2}), ("a.b", {})]:
        assert safe_call_string(name, args, methods) == "botpsy_rejected_call()"


def test_categories_left_out_are_refused_with_the_reason():
    assert len(expand_categories(["all"])) == len(CATEGORIES) == 17
    with pytest.raises(ValueError, match="paid"):
        expand_categories(["web_search_base"])
    with pytest.raises(ValueError, match="unknown"):
        expand_categories(["nope"])


def test_sections_and_overall_follow_bfcl_weights():
    from botpsy.eval.bfcl.scoring import Verdict

    def verdicts(category, correct, total):
        return [Verdict(f"{category}_{i}", category, i < correct) for i in range(total)]

    accuracy = {"simple_python": (3, 4), "simple_java": (1, 2), "simple_javascript": (0, 1), "multiple": (1, 1),
                "parallel": (0, 1), "parallel_multiple": (1, 2), "irrelevance": (1, 1), "live_simple": (1, 1),
                "live_multiple": (0, 3), "live_parallel": (1, 1), "live_parallel_multiple": (1, 1),
                "live_irrelevance": (0, 1), "live_relevance": (1, 1), "multi_turn_base": (1, 2),
                "multi_turn_miss_func": (1, 1), "multi_turn_miss_param": (0, 1), "multi_turn_long_context": (0, 1)}
    summary = summarize([v for c, (ok, n) in accuracy.items() for v in verdicts(c, ok, n)])
    simple = (0.75 + 0.5 + 0.0) / 3
    non_live = (simple + 1 + 0 + 0.5) / 4
    live = 3 / 6  # weighted by item counts: 1 + 0 + 1 + 1 correct of 1 + 3 + 1 + 1
    hallucination = (1 + 0) / 2
    multi = (0.5 + 1 + 0 + 0) / 4
    sections = summary["sections"]
    assert sections["non_live_simple"] == pytest.approx(simple)
    assert (sections["non_live"], sections["live"], sections["irrelevance"], sections["multi_turn"]) == \
        pytest.approx((non_live, live, hallucination, multi))
    weighted = 10 * non_live + 10 * live + 10 * hallucination + 30 * multi
    assert summary["overall_offline"] == pytest.approx(weighted / 60)
    assert summary["overall_bfcl"] == pytest.approx(weighted / 100)
    partial = summarize(verdicts("multiple", 1, 1))
    assert partial["sections"]["non_live"] is None and partial["overall_bfcl"] is None
