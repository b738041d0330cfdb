"""StreamParser: tags split across deltas, early ToolCallStart, and equality with parse_output."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from botpsy.chat import StreamParser, ToolCall, parse_output, render_completion
from botpsy.chat.stream import ContentDelta, ErrorEvent, ReasoningDelta, ToolCallEnd, ToolCallStart

ALARM = "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n</function>\n</tool_call>"


def run(chunks: list[str], tools=None, thinking: bool = True) -> tuple[list, StreamParser]:
    parser = StreamParser(tools, thinking=thinking)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events + parser.close(), parser


def texts(events: list, kind: type) -> str:
    return "".join(event.text for event in events if isinstance(event, kind))


def test_a_tag_split_across_deltas_is_not_leaked():
    events, parser = run(["I plan.</thi", "nk>\n\nHel", "lo <", "b> and <tool_", "call>"])
    assert texts(events, ReasoningDelta) == "I plan."
    assert texts(events, ContentDelta) == "\n\nHello <b> and "
    assert [e.error.kind for e in events if isinstance(e, ErrorEvent)] == ["truncated_tool_call"]


def test_only_a_possible_tag_prefix_is_held_back():
    parser = StreamParser(thinking=False)
    assert parser.feed("abc <") == [ContentDelta("abc ")]
    assert parser.feed("b") == [ContentDelta("<b")]
    assert parser.feed("<|im_") == []
    assert parser.feed("end|> ignored") == []
    assert parser.close() == [] and parser.result().content == "abc <b"


def test_the_first_end_marker_ends_the_turn_even_inside_one_delta():
    text = "r</think>a<|endoftext|>b<|im_end|>c"
    events, parser = run([text])
    assert texts(events, ContentDelta) == "a" and parser.result() == parse_output(text)


def test_tool_call_start_fires_as_soon_as_the_name_is_complete(standard_tools):
    parser = StreamParser(standard_tools)
    assert parser.feed("ok</think>\n\n<tool_call>\n<function=set_al") == [ReasoningDelta("ok"), ContentDelta("\n\n")]
    assert parser.feed("arm>\n<parameter=hour>\n") == [ToolCallStart("set_alarm")]
    assert parser.feed("7\n</parameter>\n</function>\n</tool_call") == []
    assert parser.feed(">") == [ToolCallEnd(ToolCall("set_alarm", {"hour": 7}))]


def test_hermes_call_announces_its_name_too():
    events, _ = run(['</think><tool_call>{"name": "pi', 'ng", "arguments": {}}</tool_call>'])
    assert [e for e in events if isinstance(e, (ToolCallStart, ToolCallEnd))] == [
        ToolCallStart("ping"), ToolCallEnd(ToolCall("ping", {}))]


def test_errors_arrive_as_events_in_order(standard_tools):
    text = "r</think>" + ALARM.replace("\n7\n", "\nseven\n") + "<tool_call>\nnothing</tool_call>"
    events, parser = run([text], standard_tools)
    assert [e.error.kind for e in events if isinstance(e, ErrorEvent)] == ["bad_parameter_value", "missing_function"]
    assert parser.result() == parse_output(text, standard_tools)


def test_unclosed_think_is_reported_at_close():
    parser = StreamParser()
    assert parser.feed("still thinking") == [ReasoningDelta("still thinking")]
    assert [type(e) for e in parser.close()] == [ErrorEvent]
    assert parser.result().errors[0].kind == "unclosed_think"


def test_feed_after_close_is_a_programming_error():
    parser = StreamParser()
    parser.close()
    with pytest.raises(RuntimeError):
        parser.feed("x")


def test_every_corpus_output_one_character_at_a_time(malformed_case):
    case = malformed_case
    _, parser = run(list(case["text"]), case["tools"], case["thinking"])
    assert parser.result() == parse_output(case["text"], case["tools"], thinking=case["thinking"])


@st.composite
def chunked(draw, text_strategy):
    text = draw(text_strategy)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in zip(bounds, bounds[1:])]


fragments = st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>", "<function=set_alarm>",
                             "<function=", "</function>", "<parameter=hour>", "</parameter>", "\n", " ", "7", "x",
                             '{"name": "set_alarm", "arguments": {"hour": 7}}', "<", "</", "<|im_end|>",
                             "<|endoftext|>", "<tool_response>", ALARM, "é"])
messy = st.lists(fragments | st.text(max_size=4), max_size=30).map("".join)
rendered = st.builds(
    lambda reasoning, content, hours: render_completion(
        reasoning, content, [{"name": "set_alarm", "arguments": {"hour": h, "label": content}} for h in hours]),
    st.text(max_size=20), st.text(max_size=20), st.lists(st.integers(0, 23), max_size=3))


@settings(max_examples=300, deadline=None)
@given(chunked(messy | rendered), st.booleans(), st.booleans())
def test_property_stream_equals_batch_on_any_chunking(standard_tools, text_chunks, thinking, with_tools):
    text, chunks = text_chunks
    tools = standard_tools if with_tools else None
    events, parser = run(chunks, tools, thinking)
    expected = parse_output(text, tools, thinking=thinking)
    assert parser.result() == expected
    assert texts(events, ReasoningDelta).strip() == expected.reasoning
    assert texts(events, ContentDelta).strip() == expected.content
    assert [e.call for e in events if isinstance(e, ToolCallEnd)] == expected.tool_calls
    assert [e.error for e in events if isinstance(e, ErrorEvent)] == expected.errors
