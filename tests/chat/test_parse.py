"""parse_output: reasoning split, both call forms, schema conversion, round trips, malformed corpus."""

from __future__ import annotations

import doctest
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botpsy.chat import ParseError, ToolCall, generation_prompt, parse_output, render, render_completion
from botpsy.chat import parse as parse_module
from botpsy.chat.parse import STRAY_TAGS, convert_value, guess_value

FORMAT_TAGS = STRAY_TAGS + ("<tool_call>", "<|im_end|>", "<|endoftext|>")


def xml_call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_module_examples():
    assert doctest.testmod(parse_module).failed == 0


# --------------------------------------------------------------------------- reasoning


def test_thinking_output_starts_inside_reasoning():
    out = parse_output("\nPlan: answer.\n</think>\n\nHello!<|im_end|>")
    assert (out.reasoning, out.content, out.errors) == ("Plan: answer.", "Hello!", [])


def test_output_that_opens_its_own_think_block():
    text = "<think>\nhm\n</think>\n\nHi"
    assert parse_output(text, thinking=True).reasoning == "hm"
    assert parse_output(text, thinking=False).reasoning == "hm"
    assert parse_output(text, thinking=False).content == "Hi"


def test_thinking_off_splits_an_empty_think_block_and_keeps_plain_text():
    assert parse_output("<think>\n\n</think>\n\nHi", thinking=False) == parse_output("Hi", thinking=False)
    out = parse_output("  Hi there  <|endoftext|>", thinking=False)
    assert (out.reasoning, out.content, out.errors) == ("", "Hi there", [])


def test_unclosed_think_keeps_everything_as_reasoning():
    out = parse_output("Let me think about " + xml_call("f", a="1"))
    assert out.content == "" and out.tool_calls == []
    assert out.reasoning.startswith("Let me think about <tool_call>")
    assert [e.kind for e in out.errors] == ["unclosed_think"]
    assert "</think>" in out.errors[0].message


def test_text_after_the_end_of_turn_is_not_part_of_the_turn():
    out = parse_output("r\n</think>\n\nDone.<|im_end|>\n<|im_start|>user\nmore<|im_end|>")
    assert (out.content, out.errors) == ("Done.", [])


# --------------------------------------------------------------------------- calls


def test_xml_calls_with_text_before_between_and_after(standard_tools):
    text = ("r\n</think>\n\nSetting it.\n\n" + xml_call("set_alarm", hour="7", label="Gym")
            + "\nand\n" + xml_call("find_contact", query="Ana", limit="None") + "\nDone.")
    out = parse_output(text, standard_tools)
    assert out.tool_calls == [ToolCall("set_alarm", {"hour": 7, "label": "Gym"}),
                              ToolCall("find_contact", {"query": "Ana", "limit": None})]
    assert out.content == "Setting it.\n\n\nand\n\nDone."
    assert out.errors == []


def test_multiline_values_lose_only_the_framing_newlines():
    text = "</think>" + xml_call("send_message", to="Ana", body="\nline 1\n\nline 3\n")
    call = parse_output(text).tool_calls[0]
    assert call.arguments["body"] == "\nline 1\n\nline 3\n"


def test_hermes_json_calls(standard_tools):
    text = ("</think>\n\n<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"hour\": \"7\", \"label\": \"007\"}}\n"
            "</tool_call>\n<tool_call>{\"name\": \"send_message\", "
            "\"arguments\": \"{\\\"to\\\": \\\"Bo\\\"}\"}</tool_call>"
            "<tool_call>{\"name\": \"ping\", \"parameters\": {\"n\": \"3\"}}</tool_call>")
    out = parse_output(text, standard_tools)
    assert out.tool_calls == [ToolCall("set_alarm", {"hour": 7, "label": "007"}),
                              ToolCall("send_message", {"to": "Bo"}),
                              ToolCall("ping", {"n": "3"})]  # JSON strings stay strings without a schema


def test_schema_types_convert_parameter_text(standard_tools):
    text = "</think>" + xml_call("set_alarm", hour="07", minute=" 30 ", label="007", repeat="['mon', 'tue']",
                                 enabled="False") + xml_call("set_thermostat", celsius="21.5", mode="cool") + \
        xml_call("send_message", to="true", meta='{"tags": [1, null]}', reply_to="12")
    out = parse_output(text, standard_tools)
    assert out.errors == []
    assert [c.arguments for c in out.tool_calls] == [
        {"hour": 7, "minute": 30, "label": "007", "repeat": ["mon", "tue"], "enabled": False},
        {"celsius": 21.5, "mode": "cool"},
        {"to": "true", "meta": {"tags": [1, None]}, "reply_to": 12},
    ]


def test_unknown_tools_and_parameters_are_kept_with_a_guess(standard_tools):
    text = "</think>" + xml_call("set_alarm", hour="7", snooze="10") + xml_call("no_such_tool", x="[1]", y="hi")
    out = parse_output(text, standard_tools)
    assert out.tool_calls == [ToolCall("set_alarm", {"hour": 7, "snooze": 10}),
                              ToolCall("no_such_tool", {"x": [1], "y": "hi"})]


def test_guess_rule_without_a_schema():
    cases = {"7": 7, "-2.5": -2.5, "007": "007", "5 apples": "5 apples", "True": True, "false": False,
             "null": None, '"Paris"': '"Paris"', "[1, 'a']": [1, "a"], '{"a": 1}': {"a": 1}, "{x}": "{x}",
             "NaN": "NaN", "1e999": "1e999", "": "", "  ": "  ", "[1e999]": "[1e999]"}
    assert {raw: guess_value(raw) for raw in cases} == cases


def test_numbers_follow_the_declared_type():
    assert type(convert_value("7.0", {"type": "integer"})) is int
    assert type(convert_value("7", {"type": "number"})) is int
    assert convert_value("1e3", {"type": "number"}) == 1000.0
    assert convert_value("+4", {"type": "integer"}) == 4


def test_enum_anyof_and_type_lists():
    assert convert_value("2", {"type": "integer", "enum": [1, 2]}) == 2
    assert convert_value("1", {"enum": ["1", "2"]}) == "1"
    assert convert_value("true", {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}) is True
    assert convert_value("5", {"type": ["string", "integer"]}) == "5"
    assert convert_value("5", {"type": ["null", "integer"]}) == 5
    assert convert_value("x", {"type": "mystery"}) == "x"


def test_enum_keeps_booleans_apart_from_numbers():
    out = parse_output('</think><tool_call>{"name": "f", "arguments": {"v": true}}</tool_call>',
                       [{"type": "function", "function": {"name": "f", "parameters": {
                           "properties": {"v": {"enum": [1, 2]}}}}}])
    assert [e.kind for e in out.errors] == ["unknown_enum_value"]


def test_error_message_is_written_for_the_model(standard_tools):
    out = parse_output("</think>" + xml_call("set_alarm", hour="seven"), standard_tools)
    assert out.errors == [ParseError(
        "bad_parameter_value",
        "The tool call for `set_alarm` has parameter `hour`=`seven`, which is not an integer. "
        "Call it again with valid arguments.",
        "\n<function=set_alarm>\n<parameter=hour>\nseven\n</parameter>\n</function>\n")]


def test_malformed_corpus(malformed_case):
    out = parse_output(malformed_case["text"], malformed_case["tools"], thinking=malformed_case["thinking"])
    assert [e.kind for e in out.errors] == malformed_case["kinds"]
    assert len(out.tool_calls) == malformed_case["calls"]
    assert all(e.message and len(e.raw) <= 203 for e in out.errors)


def test_corpus_is_large_enough_and_covers_every_kind(malformed_corpus):
    cases = malformed_corpus
    kinds = {kind for case in cases for kind in case["kinds"]}
    assert len(cases) >= 25
    assert kinds >= {"unclosed_think", "truncated_tool_call", "missing_function", "bad_json", "bad_parameter_value",
                     "unknown_enum_value", "duplicate_parameter", "stray_tag", "malformed_tool_call"}


# --------------------------------------------------------------------------- round trips


def test_round_trip_through_a_rendered_conversation(standard_tools):
    calls = [{"type": "function", "function": {"name": "send_message", "arguments": json.dumps(
        {"to": "Zoë 张", "body": "Line one\nline two\n", "meta": {"nested": {"list": [1, 2.5, True, None]}},
         "reply_to": None})}},
             {"type": "function", "function": {"name": "set_alarm", "arguments": {
                 "hour": 6, "label": "", "repeat": ["mon"], "enabled": True}}}]
    messages = [{"role": "user", "content": "text Zoë"},
                {"role": "assistant", "reasoning_content": "Two things.", "content": "On it.", "tool_calls": calls}]
    prompt = render(messages[:1], standard_tools, enable_thinking=True)
    full = render(messages, standard_tools, add_generation_prompt=False)
    completion = full[len(prompt):]  # what the model generates after the prompt
    assert prompt.endswith(generation_prompt(True))
    for text in (completion, "<think>\n" + completion):
        out = parse_output(text, standard_tools)
        assert out.to_message() == {"role": "assistant", "content": "On it.", "reasoning_content": "Two things.",
                                    "tool_calls": [{"type": "function", "function": {
                                        "name": c["function"]["name"],
                                        "arguments": c["function"]["arguments"] if isinstance(
                                            c["function"]["arguments"], dict) else json.loads(
                                            c["function"]["arguments"])}} for c in calls]}


def test_round_trip_with_thinking_off(standard_tools):
    completion = render_completion("", "Sure.", [{"name": "set_alarm", "arguments": {"hour": 9}}])
    after_prompt = completion.split("</think>\n\n", 1)[1]  # the prompt already closed the think block
    out = parse_output(after_prompt + "<|im_end|>", standard_tools, thinking=False)
    assert (out.reasoning, out.content, out.tool_calls, out.errors) == (
        "", "Sure.", [ToolCall("set_alarm", {"hour": 9})], [])


def clean_text(max_size: int = 40) -> st.SearchStrategy[str]:
    return st.text(max_size=max_size).filter(lambda s: not any(tag in s for tag in FORMAT_TAGS))


names = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
json_leaf = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) \
    | clean_text(10)
json_data = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3)
                         | st.dictionaries(clean_text(6), inner, max_size=3), max_leaves=8)


@st.composite
def schema_and_value(draw):
    """A JSON schema and a value of it whose rendered text reads back unambiguously."""
    kind = draw(st.sampled_from(["integer", "number", "boolean", "string", "array", "object", "enum",
                                 "nullable", "anyof"]))
    if kind == "integer":
        return {"type": "integer"}, draw(st.integers(-10**12, 10**12))
    if kind == "number":
        return {"type": "number"}, draw(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-999, 999))
    if kind == "boolean":
        return {"type": "boolean"}, draw(st.booleans())
    if kind == "string":
        return {"type": "string"}, draw(clean_text(60))
    if kind == "array":
        return {"type": "array"}, draw(st.lists(json_data, max_size=4))
    if kind == "object":
        return {"type": "object"}, draw(st.dictionaries(clean_text(8), json_data, max_size=4))
    if kind == "enum":
        options = draw(st.lists(clean_text(12), min_size=1, max_size=4, unique=True))
        return {"type": "string", "enum": options}, draw(st.sampled_from(options))
    if kind == "nullable":
        return {"type": ["integer", "null"]}, draw(st.none() | st.integers())
    return {"anyOf": [{"type": "number"}, {"type": "array"}]}, draw(st.integers() | st.lists(json_data, max_size=2))


@st.composite
def tools_and_calls(draw):
    tools, calls = [], []
    for name in draw(st.lists(names, min_size=1, max_size=3, unique=True)):
        params = draw(st.dictionaries(names, schema_and_value(), max_size=4))
        tools.append({"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {key: schema for key, (schema, _) in params.items()}}}})
        calls.append({"name": name, "arguments": {key: value for key, (_, value) in params.items()}})
    return tools, draw(st.permutations(calls))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools_and_calls(), clean_text(), clean_text(), st.booleans())
def test_property_parse_inverts_render(tools_calls, reasoning, content, with_end):
    tools, calls = tools_calls
    text = render_completion(reasoning, content, calls) + ("<|im_end|>" if with_end else "")
    out = parse_output(text, tools)
    assert out.errors == []
    assert (out.reasoning, out.content) == (reasoning.strip(), content.strip())
    assert [(c.name, c.arguments) for c in out.tool_calls] == [(c["name"], c["arguments"]) for c in calls]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(names, st.dictionaries(names, json_data.filter(lambda v: not isinstance(v, str)),
                                                max_size=3)), max_size=3))
def test_property_round_trip_without_tools_for_non_string_values(calls):
    text = render_completion("r", "", [{"name": n, "arguments": a} for n, a in calls])
    assert [(c.name, c.arguments) for c in parse_output(text).tool_calls] == calls


fragments = st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>", "<function=f>", "<function=",
                             "</function>", "<parameter=a>", "</parameter>", '{"name": "f", "arguments": {"a": "1"}}',
                             "\n", "{", "}", '"name"', '"f"', ":",
                             '"arguments"', "<|im_end|>", "<", ">", "7", "x", " ", "[1, 'a']", "True", "\"", "é"])
messy_text = st.lists(fragments | st.text(max_size=5), max_size=40).map("".join)


# Schemas as found in the wild, odd ones included: parsing must survive them all.
odd_schemas = st.sampled_from([
    {"type": "integer"}, {"type": ["integer", 7]}, {"anyOf": ["x", {"type": "boolean"}]}, {"enum": "abc"},
    {"enum": [None, {"a": 1}]}, {"type": None}, "integer", None, {"type": "array", "enum": [[1]]}, {"oneOf": []},
])
odd_tools = st.none() | st.just("not a list") | st.lists(
    st.builds(lambda schema: {"type": "function", "function": {"name": "f", "parameters": {
        "properties": {"a": schema}}}}, odd_schemas) | st.just({"function": "f"}) | st.just(3), max_size=2)


@settings(max_examples=300, deadline=None)
@given(messy_text, st.booleans(), odd_tools)
def test_property_never_raises_and_never_drops_a_call_silently(text, thinking, tools):
    out = parse_output(text, tools, thinking=thinking)
    assert isinstance(out.reasoning, str) and isinstance(out.content, str)
    if not any(e.kind == "unclosed_think" for e in out.errors):
        turn = text.split("<|im_end|>")[0]
        after_think = turn.split("</think>", 1)[1] if "</think>" in turn else turn
        call_errors = [e for e in out.errors if e.kind != "stray_tag"]
        # every opened call became a call or left at least one error behind
        assert len(out.tool_calls) + len(call_errors) >= after_think.count("<tool_call>")
