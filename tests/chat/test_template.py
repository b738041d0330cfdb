"""The renderer against the official Qwen3.5 template, and botpsy's own Jinja template."""

from __future__ import annotations

import json

import pytest

from botpsy.chat.template import RenderError, render, render_completion
from tests.chat.conversations import ALARM, CONVERSATIONS, A, U, call
from tests.chat.official_template import load_official_template

IDS = [c[0] for c in CONVERSATIONS]


@pytest.fixture(scope="module")
def official_tokenizer(tiny_tokenizer):
    template, source = load_official_template()
    if template is None:
        pytest.skip(f"official Qwen3.5 template unavailable: {source}")
    tok = tiny_tokenizer.__class__.from_pretrained(str(tiny_tokenizer.path))
    tok.chat_template = template
    return tok


def hf_render(tokenizer, messages, tools, add_generation_prompt, enable_thinking):
    return tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt, enable_thinking=enable_thinking
    )


def test_enough_conversations():
    assert len(CONVERSATIONS) >= 20


@pytest.mark.parametrize("case", CONVERSATIONS, ids=IDS)
def test_matches_official_template(case, official_tokenizer):
    _, messages, tools, gen, think = case
    expected = hf_render(official_tokenizer, messages, tools, gen, think)
    assert render(messages, tools, add_generation_prompt=gen, enable_thinking=think) == expected


@pytest.mark.parametrize("case", CONVERSATIONS, ids=IDS)
def test_own_jinja_template_matches_renderer(case, tiny_tokenizer):
    _, messages, tools, gen, think = case
    expected = render(messages, tools, add_generation_prompt=gen, enable_thinking=think)
    assert hf_render(tiny_tokenizer, messages, tools, gen, think) == expected


def test_json_string_arguments_render_like_objects():
    as_object = [U("x"), A("", "r", [call("set_alarm", hour=7, repeat=["mon"])])]
    as_string = [U("x"), A("", "r", [{"type": "function", "function": {"name": "set_alarm", "arguments": json.dumps({"hour": 7, "repeat": ["mon"]})}}])]
    assert render(as_object, [ALARM]) == render(as_string, [ALARM])


def test_render_completion_is_the_tail_of_the_rendered_turn():
    calls = [call("set_alarm", hour=7)]
    full = render([U("x"), A("ok", "because", calls)], [ALARM], add_generation_prompt=False)
    prompt = render([U("x")], [ALARM], add_generation_prompt=True)
    assert full == prompt + render_completion("because", "ok", calls)


@pytest.mark.parametrize(
    "messages,match",
    [
        ([], "no messages"),
        ([{"role": "system", "content": "s"}], "no user query"),
        ([U("a"), {"role": "system", "content": "late"}], "first message"),
        ([U("a"), {"role": "robot", "content": "?"}], "unexpected message role"),
        ([U("a"), A("", None, [{"function": {"name": "f", "arguments": "{not json"}}])], "not valid JSON"),
        ([U("a"), A("", None, [{"function": {"arguments": {}}}])], "without a function name"),
        ([{"role": "user", "content": [{"type": "image"}]}], "only text content"),
    ],
)
def test_bad_conversations_raise_clear_errors(messages, match):
    with pytest.raises(RenderError, match=match):
        render(messages)
