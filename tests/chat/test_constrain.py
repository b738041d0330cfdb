"""Constrained tool calls: only offered names, parameters and enum values, required ones before closing."""

from __future__ import annotations

import doctest
import random

import pytest

from botpsy.chat import constrain
from botpsy.chat.constrain import CallConstraint, TokenTable
from botpsy.chat.parse import parse_output
from botpsy.world.registry import REGISTRY

TOOLS = [REGISTRY[name].spec() for name in ("set_alarm", "list_alarms", "set_brightness")]
ALARM = {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {
    "time": {"type": "string"}, "repeat": {"type": "string", "enum": ["daily", "weekdays"]}}, "required": ["time"]}}}


def test_doctests():
    assert doctest.testmod(constrain).failed == 0


@pytest.fixture(scope="module")
def table(tiny_tokenizer):
    return TokenTable.from_tokenizer(tiny_tokenizer)


def texts(table, ids):
    return {table.pieces[i] for i in ids}


def test_outside_a_call_nothing_is_constrained(table):
    c = CallConstraint(TOOLS, table)
    for text in ("", "I will set it.", "<tool_call>\n<function=set_alarm>\n</function>\n</tool_call>\nDone"):
        assert c.allowed_ids(text) is None, text
    assert CallConstraint([], table).allowed_ids("<tool_call>\n<function") is None  # no tools: free


def test_a_turn_without_tools_cannot_open_a_call(table):
    from botpsy.chat.constrain import NoCallConstraint

    allowed = NoCallConstraint(table).after("Sure.").allowed_ids("Here")
    opening = {i for i, text in enumerate(table.pieces) if "<tool_call" in text}
    assert opening and not opening & allowed
    assert allowed | opening == set(range(len(table.pieces)))  # everything else stays open


def test_names_are_kept_to_the_offered_tools(table):
    c = CallConstraint(TOOLS, table)
    after = texts(table, c.allowed_ids("<tool_call>\n<function"))
    assert after and all(any(f"={n}>".startswith(p) or p.startswith(f"={n}>") for n in ("set_alarm", "list_alarms",
                                                                                              "set_brightness"))
                         for p in after)
    assert "=" in after or any(p.startswith("=s") or p.startswith("=l") for p in after)
    mid = texts(table, c.allowed_ids("<tool_call>\n<function=set_"))
    assert mid and all("alarm>".startswith(p) or "brightness>".startswith(p) for p in mid)
    assert not any(p.startswith("r") for p in mid)  # set_reminder is not offered


def test_required_parameters_come_before_the_close_and_none_twice(table):
    c = CallConstraint([ALARM], table)
    start = "<tool_call>\n<function=set_alarm>\n"
    assert all("<parameter".startswith(p) for p in texts(table, c.allowed_ids(start)))  # time is required
    names = texts(table, c.allowed_ids(start + "<parameter"))
    assert names and all("=time>".startswith(p) or "=repeat>".startswith(p) or p.startswith("=time>")
                         or p.startswith("=repeat>") for p in names)
    done = start + "<parameter=time>\n07:00\n</parameter>\n"
    options = texts(table, c.allowed_ids(done))
    assert any("</function>".startswith(p) for p in options) and any("<parameter".startswith(p) for p in options)
    again = texts(table, c.allowed_ids(done + "<parameter="))
    assert all("repeat>".startswith(p) or p.startswith("repeat>") for p in again)  # time is taken
    enum = texts(table, c.allowed_ids(done + "<parameter=repeat>\n"))
    assert enum and all(any(f"{v}\n</parameter>".startswith(p) for v in ("daily", "weekdays")) for p in enum)
    closed = texts(table, c.allowed_ids(done + "</function>"))
    assert closed and all("\n</tool_call>".startswith(p) for p in closed)


def test_after_binds_the_text_of_earlier_streams(table):
    c = CallConstraint(TOOLS, table)
    assert c.after("<tool_call>\n").allowed_ids("<function") == c.allowed_ids("<tool_call>\n<function")
    assert c.after("") is c


def test_any_walk_through_the_allowed_tokens_gives_a_well_formed_call(table):
    """Sample uniformly among allowed tokens (free-text values written by hand; numbers, enums and
    booleans sampled too): every call parses, names an offered tool, uses only its parameters, each
    once, has every required one, and every value fits its schema."""
    tools = [REGISTRY[name].spec() for name in ("set_alarm", "set_brightness", "open_app", "list_alarms", "set_wifi")]
    c = CallConstraint(tools, table)
    rng = random.Random(0)
    for _ in range(40):
        text = "<tool_call>"
        for _step in range(400):
            allowed = c.allowed_ids(text)
            if allowed is None or allowed is table.free_value_ids:
                if allowed is None and "</tool_call>" in text:
                    break
                name = text.split("<parameter=")[-1].split(">")[0]
                text += f"\nvalue of {name}\n</parameter>"
                continue
            text += table.pieces[rng.choice(sorted(allowed))]
        parsed = parse_output(text + "<|im_end|>", None, thinking=False)
        assert parsed.ok and len(parsed.tool_calls) == 1, text
        call = parsed.tool_calls[0]
        schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == call.name)
        assert set(call.arguments) <= set(schema.get("properties", {})), text
        assert set(schema.get("required", [])) <= set(call.arguments), text
        assert text.count("<parameter=") == len(call.arguments), text
        assert not validate_arguments(call, schema), text


def validate_arguments(call, schema) -> list[str]:
    """Values of the wrong JSON type (the walk writes free text only for string parameters)."""
    types = {"integer": int, "number": (int, float), "boolean": bool, "string": str}
    problems = []
    for name, value in call.arguments.items():
        spec = schema["properties"][name]
        expected = types.get(spec.get("type"))
        if expected and (not isinstance(value, expected) or (spec.get("type") != "boolean" and isinstance(value, bool))):
            problems.append(f"{name}={value!r} is not {spec['type']}")
        if "enum" in spec and value not in spec["enum"]:
            problems.append(f"{name}={value!r} not in {spec['enum']}")
    return problems


NUMBERS = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "count": {"type": "integer"}, "ratio": {"type": "number"}, "on": {"type": "boolean"},
    "note": {"type": "string"}}, "required": ["count"]}}}


def test_number_values_take_only_digits_then_the_close(table):
    c = CallConstraint([NUMBERS], table)
    start = "<tool_call>\n<function=f>\n<parameter=count>"
    first = texts(table, c.allowed_ids(start))
    assert "\n" in first and not any(ch.isalpha() for p in first for ch in p)
    digits = texts(table, c.allowed_ids(start + "\n12"))
    assert "3" in digits and "\n" in digits and "." not in digits and not any(ch.isalpha() for p in digits for ch in p)
    assert all("</parameter>".startswith(p) or p.startswith("</parameter>") for p in texts(table, c.allowed_ids(start + "\n12\n")))
    ratio = texts(table, c.allowed_ids("<tool_call>\n<function=f>\n<parameter=ratio>\n0"))
    assert "." in ratio and "x" not in ratio
    boolean = texts(table, c.allowed_ids("<tool_call>\n<function=f>\n<parameter=on>\n"))
    assert boolean and all("true\n</parameter>".startswith(p) or "false\n</parameter>".startswith(p) for p in boolean)


def test_free_values_may_not_open_a_tag_or_end_the_turn(table):
    c = CallConstraint([NUMBERS], table)
    free = c.allowed_ids("<tool_call>\n<function=f>\n<parameter=note>\nbuy milk")
    assert free is table.free_value_ids  # one shared set, so backends build its mask once
    assert "\n" in texts(table, free) and any("</parameter>".startswith(p) for p in texts(table, free) if len(p) > 1)
    closing = texts(table, c.allowed_ids("<tool_call>\n<function=f>\n<parameter=note>\nbuy milk\n</"))
    assert closing and all("parameter>".startswith(p) or p.startswith("parameter>") for p in closing)
    banned = {p for p in table.pieces if any(m in p for m in constrain.TAG_MARKS)}
    assert banned and not banned & texts(table, free)
    assert {"<parameter", "<|im_end|>"} <= banned


def test_schema_types_map_to_value_targets():
    assert constrain.value_targets({"type": "float"}) == "number"
    assert constrain.value_targets({"type": ["integer", "null"]}) == constrain.FREE_VALUE
    assert constrain.value_targets(None) == constrain.FREE_VALUE
    assert constrain.value_targets({"type": "boolean"}) == ["\ntrue\n</parameter>", "\nfalse\n</parameter>"]
