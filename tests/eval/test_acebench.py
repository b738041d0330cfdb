"""The acebench suite: its scorer on hand-built right and wrong answers in every category, the
simulated platform against ACEBench's gold end states, and whole items through ``suite.run`` on
the scripted backend (one per group)."""

from __future__ import annotations

import copy
import doctest
import importlib
import json

import pytest

from botpsy.chat.template import render_completion
from botpsy.eval.acebench import ACEBenchSuite
from botpsy.eval.acebench.agent import check_state, process_score
from botpsy.eval.acebench.calls import CallSyntaxError, calls_in_text, parse_calls, render_calls
from botpsy.eval.acebench.checker import base_name, check_normal, check_special
from botpsy.eval.acebench.data import CATEGORIES, NORMAL, to_tool
from botpsy.eval.acebench.platform import Platform
from botpsy.eval.suites import SUITES, RunSettings, SuiteOptions
from botpsy.runtime.scripted import ScriptedBackend


@pytest.fixture(scope="module")
def items() -> dict[str, object]:
    """Every item by id (the packaged data)."""
    return {item.id: item.payload for item in ACEBenchSuite(SuiteOptions()).items()}


def first_of(items: dict, category: str):
    return next(item for item in items.values() if item.category == category)


def gold_calls(gold) -> list[tuple[str, dict]]:
    answer = gold[0] if isinstance(gold, list) else gold
    return [(base_name(name), copy.deepcopy(args)) for name, args in answer.items()]


def call_turn(*calls: tuple[str, dict]) -> str:
    """A scripted assistant turn (after ``<think>\\n``) making ``calls`` in botpsy's format."""
    return render_completion("Thinking.", "", [{"type": "function", "function": {"name": n, "arguments": a}}
                                               for n, a in calls])


def text_turn(text: str, thinking: bool = True) -> str:
    return render_completion("Thinking." if thinking else "", text) if thinking else f"{text}<|im_end|>\n"


# ---- items --------------------------------------------------------------------------------


def test_items_all_and_limited():
    suite = ACEBenchSuite(SuiteOptions())
    everything = suite.items()
    assert len(everything) == 900 and len({i.id for i in everything}) == 900
    limited = ACEBenchSuite(SuiteOptions(limit=20)).items()
    assert len(limited) == 20
    assert {i.payload.category for i in limited} == set(CATEGORIES)  # every sub-category in a small sample
    assert [i.id for i in limited] == [i.id for i in ACEBenchSuite(SuiteOptions(limit=20)).items()]
    conversation = next(i.payload for i in limited if i.payload.category == "normal_multi_turn_user_adjust")
    assert conversation.id == "normal_multi_turn_user_adjust_0" and len(conversation.entries) == 2


def test_registered_and_missing_data_is_a_clear_error(tmp_path):
    assert isinstance(SUITES["acebench"](SuiteOptions()), ACEBenchSuite)
    with pytest.raises(FileNotFoundError, match="ACEBench data not found"):
        ACEBenchSuite(SuiteOptions(data_dir=str(tmp_path))).items()


def test_tools_are_json_schema():
    spec = {"name": "reserve_flight", "parameters": {"type": "dict", "required": ["user_id", "payment_methods"],
            "properties": {"user_id": {"type": "string"}, "items": {"type": "list", "items": {"type": "dict"}}}}}
    tool = to_tool(spec)["function"]
    assert tool["parameters"]["type"] == "object" and tool["parameters"]["required"] == ["user_id"]
    assert tool["parameters"]["properties"]["items"] == {"type": "array", "items": {"type": "object"}}
    assert to_tool({"name": "f", "arguments": {"type": "object", "properties": {"x": {"type": "int"}}}})[
        "function"]["parameters"]["properties"] == {"x": {"type": "integer"}}


# ---- text calls -----------------------------------------------------------------------------


def test_text_calls_read_acebench_quirks():
    stone = "[add_food_delivery_order(username='Eve', merchant_name='Domino's', items=[{'product': 'Super Supreme', 'quantity': 1}])]"
    assert parse_calls(stone) == [("add_food_delivery_order", {"username": "Eve", "merchant_name": "Domino's",
                                                               "items": [{"product": "Super Supreme", "quantity": 1}]})]
    assert parse_calls("[f(a=-2.5, b=True, c=None, d=\"x, y\")]") == [("f", {"a": -2.5, "b": True, "c": None, "d": "x, y"})]
    assert parse_calls(render_calls([("g", {"n": 3, "l": ["a"]})])) == [("g", {"n": 3, "l": ["a"]})]
    with pytest.raises(CallSyntaxError):
        parse_calls("[f(a=1")
    assert calls_in_text("I will call [f(a=1)] now", {"f"}) == [("f", {"a": 1})]
    assert calls_in_text("[g(a=1)]", {"f"}) == [] and calls_in_text("no calls", {"f"}) == []


@pytest.mark.parametrize("module", ["calls", "checker", "data", "agent"])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(f"botpsy.eval.acebench.{module}"))
    assert result.failed == 0 and result.attempted > 0


# ---- normal: right and wrong answers for each sub-kind -------------------------------------


def mutate_first(calls: list, path: list, value) -> list:
    """``calls`` with the value at ``path`` (call index, then keys) replaced."""
    calls = copy.deepcopy(calls)
    target = calls[path[0]][1]
    for key in path[1:-1]:
        target = target[key]
    target[path[-1]] = value
    return calls


def first_leaf(args: dict, want: type) -> list:
    """The key path to the first value of type ``want`` in ``args`` (depth first)."""
    for key, value in args.items():
        if isinstance(value, want) and (want is not int or not isinstance(value, bool)):
            return [key]
        if isinstance(value, dict):
            inner = first_leaf(value, want)
            if inner:
                return [key, *inner]
    return []


WRONG = {  # sub-kind -> a wrong value for the first leaf of this type
    "normal_atom_bool": (bool, lambda v: not v),
    "normal_atom_enum": (str, lambda v: "qqqq"),
    "normal_atom_number": (float, lambda v: v + 7),
    "normal_atom_list": (list, lambda v: list(reversed(v)) + ["extra"]),
    "normal_atom_object_short": (dict, lambda v: {**v, "invented_key": 1}),
    "normal_atom_object_deep": (dict, lambda v: {**v, "invented_key": 1}),
    "normal_single_turn_single_function": (str, lambda v: "qqqq"),
    "normal_similar_api": (str, lambda v: "qqqq"),
    "normal_preference": (str, lambda v: "qqqq"),
}


@pytest.mark.parametrize("category", [c for c in NORMAL if "multi_turn" not in c])
def test_normal_right_and_wrong(items, category):
    checked = 0
    for item in (i for i in items.values() if i.category == category):
        entry, gold = item.entries[0], item.golds[0]
        right = gold_calls(gold)
        assert check_normal(entry["function"], right, gold).valid, item.id
        assert check_normal(entry["function"], list(reversed(right)), gold).valid, item.id  # order is free
        assert not check_normal(entry["function"], [], gold).valid
        if category == "normal_single_turn_parallel_function":
            assert not check_normal(entry["function"], right[:-1], gold).valid  # a call left out
            assert not check_normal(entry["function"], right + right[:1], gold).valid  # one call too many
            checked += 1
            continue
        want, change = WRONG[category]
        if category == "normal_atom_number":
            want = (int, float)
        path = next((p for p in [first_leaf(args, want) for _, args in right] if p), [])
        if not path:
            continue
        index = next(i for i, (_, args) in enumerate(right) if first_leaf(args, want) == path)
        value = right[index][1]
        for key in path:
            value = value[key]
        wrong = mutate_first(right, [index, *path], change(value))
        check = check_normal(entry["function"], wrong, gold)
        assert not check.valid, (item.id, wrong)
        checked += 1
    assert checked >= 10


def test_normal_rules_in_detail(items):
    item = items["normal_atom_bool_0"]
    functions, gold = item.entries[0]["function"], item.golds[0]
    right = gold_calls(gold)
    name, args = right[0]
    assert check_normal(functions, [(name, {**args, "cuisine_preference": "asian cuisine"})], gold).valid  # gold text contained
    assert check_normal(functions, [(name, {**args, "include_vegetarian_options": "true"})], gold).valid  # "true" reads as True
    assert check_normal(functions, [("ai.assistantModelSelector", args)], gold).error_type == "function_mismatch"
    assert check_normal(functions, [(name, {**args, "calories": 5})], gold).error_type == "unexpected_param"
    assert check_normal(functions, [(name, {k: v for k, v in args.items() if k != "meal_type"})],
                        gold).error_type == "missing_required"
    assert check_normal(functions, [(name, {**args, "meal_type": 3})], gold).error_type == "type_error"
    two = items["normal_atom_bool_11"]  # a gold file entry with two acceptable answers
    second = gold_calls([two.golds[0][1]])
    assert check_normal(two.entries[0]["function"], second, two.golds[0]).valid


@pytest.mark.parametrize("category", ["normal_multi_turn_user_adjust", "normal_multi_turn_user_switch"])
def test_normal_multi_turn_conversation(items, category):
    item = first_of(items, category)
    backend_right = ScriptedBackend([call_turn(*gold_calls(g)) for g in item.golds])
    suite = ACEBenchSuite(SuiteOptions())
    record = suite.run(backend_right, _item(item), RunSettings(max_tokens=512))
    assert record["correct"] and record["process"] == 1.0 and len(record["turns"]) == len(item.golds)
    wrong_last = [call_turn(*gold_calls(g)) for g in item.golds[:-1]] + [text_turn("I am not sure.")]
    record = suite.run(ScriptedBackend(wrong_last), _item(item), RunSettings(max_tokens=512))
    assert not record["correct"] and record["process"] == round((len(item.golds) - 1) / len(item.golds), 4)


def _item(payload):
    from botpsy.eval.suites import Item

    return Item(payload.id, payload)


# ---- special ----------------------------------------------------------------------------------


def test_special_incomplete(items):
    item = first_of(items, "special_incomplete")
    (api, missing), = item.golds[0].items()
    right = f"Missing necessary parameters ({', '.join(missing)}) for the api ({api})"
    assert check_special(item.category, item.golds[0], right, []).valid
    assert check_special(item.category, item.golds[0], right.replace("Missing", "missing"), []).valid  # phrase case
    assert check_special(item.category, item.golds[0], "Please give me more details.", []).error_type == "error_detection"
    assert check_special(item.category, item.golds[0], f"Missing necessary parameters for the api ({api})",
                         []).error_type == "error_correction"
    assert check_special(item.category, item.golds[0], right, [(api, {})]).error_type == "called_a_function"


def test_special_error_param(items):
    item = first_of(items, "special_error_param")
    (param, values), = item.golds[0].items()
    right = f"There is incorrect value ({', '.join(values)}) for the parameters ({param}) in the conversation history."
    assert check_special(item.category, item.golds[0], right, []).valid
    assert not check_special(item.category, item.golds[0], "There is incorrect value (x) for the parameters (y).", []).valid
    assert not check_special(item.category, item.golds[0], f"The value {values[0]} looks odd.", []).valid


def test_special_irrelevant(items):
    item = first_of(items, "special_irrelevant")
    assert check_special(item.category, item.golds[0], item.golds[0], []).valid
    assert not check_special(item.category, item.golds[0], "Sure, here you go.", []).valid
    assert not check_special(item.category, item.golds[0], item.golds[0], [("f", {"a": 1})]).valid


# ---- agent: platform, end state, process ----------------------------------------------------


def replay(item) -> Platform:
    entry = item.entries[0]
    platform = Platform(entry["involved_classes"], entry["initial_config"])
    for stone in item.milestones:
        for name, args in parse_calls(stone):
            platform.call(name, args)
    return platform


def test_gold_milestones_reach_the_gold_state(items):
    """Replaying the gold milestones in the platform gives the gold end state (for the items whose
    milestones and gold state agree: a few in ACEBench's data do not, e.g. they order 'Super Supreme'
    where the gold state holds 'Super Supreme Pizza')."""
    agent = [i for i in items.values() if i.group == "agent" and not isinstance(i.milestones[0], list)]
    passed = [i.id for i in agent if not check_state(i.golds[0], replay(i).state())]
    assert len(passed) >= 25
    assert {"agent_multi_step_2", "agent_multi_turn_0", "agent_multi_turn_24", "agent_multi_turn_26"} <= set(passed)


def test_agent_end_state_right_and_wrong(items):
    for item_id in ("agent_multi_step_2", "agent_multi_turn_0", "agent_multi_turn_25"):
        item = items[item_id]
        platform = replay(item)
        assert check_state(item.golds[0], platform.state()) == []
        wrong = Platform(item.entries[0]["involved_classes"], item.entries[0]["initial_config"])
        wrong.call(*parse_calls(item.milestones[0])[0])  # only the first step
        errors = check_state(item.golds[0], wrong.state())
        assert errors, item_id
    assert check_state(items["agent_multi_step_2"].golds[0], []) == ["no function was run, so there is no end state"]


def test_platform_rules():
    phone = Platform(["BaseApi", "MessageApi", "FoodPlatform"], {"BaseApi": {"wifi": False, "logged_in": True}})
    assert phone.call("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "hi"})["status"] is False
    phone.call("turn_on_wifi", {})
    assert "full" in phone.call("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "hi"})["message"]
    assert phone.call("get_earliest_message_id", {})["message_id"] == 3
    assert phone.call("add_reminder", {"title": "t", "description": "d", "time": "now"})["error"] == "unknown_function"
    assert phone.call("delete_message", {"id": 3})["error"] == "invalid_arguments"
    phone.call("login_food_platform", {"username": "Jack", "password": "password654"})
    order = {"username": "Jack", "merchant_name": "Jiutian BBQ", "items": [{"product": "Korean Grilled Beef", "quantity": 1}]}
    assert phone.call("add_food_delivery_order", order)["message"] == "Insufficient balance to place the order"
    travel = Platform(["Travel"])
    booking = {"user_id": "user3", "password": "password789", "flight_no": "MU3561", "cabin": "Economy Class",
               "payment_method": "bank", "baggage_count": 4}
    assert "res_5" in travel.call("reserve_flight", booking)
    assert travel.state()[0]["Travel"]["users"]["user3"]["bank_balance"] == 5000.0 - 1500 - 50
    assert travel.call("reserve_flight", {**booking, "flight_no": "XX1"})["status"] == "error"


def test_process_score_against_milestones():
    stones = ["[turn_on_wifi()]", "[get_earliest_message_id()]", "[delete_message(message_id=3)]"]
    assert process_score(stones, [[("turn_on_wifi", {})], [("get_earliest_message_id", {})],
                                  [("delete_message", {"message_id": 3.0})]]) == 1.0
    # a milestone never found ends the search (ACEBench's rule), so the later match does not count
    assert process_score(stones, [[("turn_on_wifi", {})], [("delete_message", {"message_id": 3})]]) == round(1 / 3, 4)
    assert process_score(stones, [[("delete_message", {"message_id": 3})], [("turn_on_wifi", {})]]) == round(1 / 3, 4)
    assert process_score([stones[:1], stones], [[("turn_on_wifi", {})]]) == 1.0  # the best gold path


# ---- whole items through suite.run (scripted backend) -------------------------------------------


SETTINGS = RunSettings(max_tokens=512)


def test_run_normal_item(items):
    suite = ACEBenchSuite(SuiteOptions())
    item = items["normal_single_turn_parallel_function_1"]
    record = suite.run(ScriptedBackend([call_turn(*gold_calls(item.golds[0]))]), _item(item), SETTINGS)
    assert record["correct"] and record["group"] == "normal" and len(record["generations"]) == 1
    assert record["generations"][0]["tool_calls"] and record["turns"][0]["calls"]
    text = render_calls(gold_calls(item.golds[0]))  # ACEBench's text form in the answer also counts
    assert suite.run(ScriptedBackend([text_turn(text)]), _item(item), SETTINGS)["correct"]
    wrong = suite.run(ScriptedBackend([call_turn(*gold_calls(item.golds[0])[:1])]), _item(item), SETTINGS)
    assert not wrong["correct"] and wrong["error_type"] == "wrong_call_count"
    broken = suite.run(ScriptedBackend(["<tool_call>\n<function=oops"]), _item(item), SETTINGS)
    assert not broken["correct"]  # a malformed answer is a failed item, not a crash


def test_run_special_item(items):
    suite = ACEBenchSuite(SuiteOptions())
    item = first_of(items, "special_incomplete")
    (api, missing), = item.golds[0].items()
    answer = f"Missing necessary parameters ({', '.join(missing)}) for the api ({api})"
    record = suite.run(ScriptedBackend([text_turn(answer)]), _item(item), SETTINGS)
    assert record["correct"] and record["turns"][0]["content"] == answer
    function = item.entries[0]["function"][0]["name"]
    record = suite.run(ScriptedBackend([call_turn((function, {}))]), _item(item), SETTINGS)
    assert not record["correct"] and record["error_type"] == "called_a_function"


def test_run_agent_multi_step(items):
    suite = ACEBenchSuite(SuiteOptions())
    item = items["agent_multi_step_2"]
    turns = [call_turn(*parse_calls(stone)) for stone in item.milestones] + [text_turn("Done. finish conversation")]
    record = suite.run(ScriptedBackend(turns), _item(item), SETTINGS)
    assert record["correct"] and record["process"] == 1.0 and record["stop_reason"] == "finished"
    assert len(record["generations"]) == len(turns) and record["end_state"]
    early = [turns[0], text_turn("Which account should I use?"), text_turn("finish conversation")]
    record = suite.run(ScriptedBackend(early), _item(item), SETTINGS)
    assert not record["correct"] and record["process"] == round(1 / 3, 4) and record["state_errors"]
    assert any(m["role"] == "user" and "do not ask me" in m["content"] for m in record["messages"])  # the nudge


def test_run_agent_multi_turn_with_the_model_as_user(items):
    suite = ACEBenchSuite(SuiteOptions())
    item = items["agent_multi_turn_0"]
    user_open = text_turn("I am Grace. Send Frank: 'Are you free tomorrow to have lunch with me?'", thinking=False)
    agent = [call_turn(*parse_calls(stone)) for stone in item.milestones]
    scripts = [user_open, *agent, text_turn("Sent it. Anything else?"), text_turn("finish conversation", thinking=False)]
    record = suite.run(ScriptedBackend(scripts), _item(item), SETTINGS)
    assert record["correct"] and record["stop_reason"] == "user_finished"
    assert record["user_model"] == "the model under test" and len(record["user_generations"]) == 2
    wrong = [user_open, call_turn(*parse_calls(item.milestones[-1])), text_turn("Done. finish conversation")]
    record = suite.run(ScriptedBackend(wrong), _item(item), SETTINGS)
    assert not record["correct"] and record["state_errors"]  # wifi off: nothing was sent


def test_run_agent_multi_turn_with_a_user_model(items, tmp_path):
    item = items["agent_multi_turn_0"]
    user_file = tmp_path / "user.json"
    user_file.write_text(json.dumps([text_turn("Message Frank for me, I am Grace.", thinking=False),
                                     text_turn("finish conversation", thinking=False)]))
    suite = ACEBenchSuite(SuiteOptions(user_model=f"scripted:{user_file}"))
    agent = [call_turn(*parse_calls(stone)) for stone in item.milestones] + [text_turn("Sent.")]
    record = suite.run(ScriptedBackend(agent), _item(item), SETTINGS)
    assert record["correct"] and record["user_model"] == f"scripted:{user_file}"
    assert len(record["generations"]) == len(agent) and len(record["user_generations"]) == 2


# ---- failure and summary ------------------------------------------------------------------------


def test_failure_and_summary(items):
    suite = ACEBenchSuite(SuiteOptions())
    records = [
        {"id": "a", "category": "normal_atom_bool", "correct": True},
        {"id": "b", "category": "normal_atom_bool", "correct": False},
        {"id": "c", "category": "normal_similar_api", "correct": True},
        {"id": "d", "category": "special_irrelevant", "correct": True},
        {"id": "e", "category": "agent_multi_step", "correct": False, "process": 0.5},
        suite.failure(_item(items["agent_multi_turn_0"]), "BackendError: context full"),
    ]
    summary = suite.summarize(records)
    assert summary["normal"] == 0.75 and summary["special"] == 1.0 and summary["agent"] == 0.0
    assert summary["overall"] == round((0.578 * 0.75 + 0.2676 * 1.0 + 0.1545 * 0.0) / (0.578 + 0.2676 + 0.1545), 4)
    assert summary["by_category"]["agent_multi_step"]["process"] == 0.5 and summary["backend_errors"] == 1
    assert summary["table"][0] == ["overall", summary["overall"], "pct"]
    assert ["agent_multi_turn process", 0.0, "pct"] in summary["table"]
    only_normal = suite.summarize(records[:3])
    assert only_normal["overall"] == only_normal["normal"] and only_normal["special"] is None
