"""The scripted fake backend: exact tokenization round trip, end-of-turn and max_tokens stops, call records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from botpsy.runtime.backend import BackendError, SamplingConfig, Utf8Decoder
from botpsy.runtime.scripted import ScriptedBackend


PIECES = list("ab <>|/\n\t.,é请") + ["<think>", "<|im_end|>", "</tool_call>"]


@given(st.lists(st.sampled_from(PIECES)).map("".join))
def test_tokenize_round_trips(text):
    backend = ScriptedBackend([])
    assert backend.detokenize(backend.tokenize(text)) == text


def test_special_tags_are_single_tokens():
    backend = ScriptedBackend([])
    ids = backend.tokenize("ok<|im_end|>\n</think>")
    assert [backend.detokenize([i]) for i in ids] == ["ok", "<|im_end|>", "\n", "</think>"]


def test_stream_stops_at_end_of_turn_and_records_the_call():
    backend = ScriptedBackend(["Hello there.<|im_end|>ignored", lambda prompt: f"saw {len(prompt)} chars"])
    stream = backend.stream("prompt text", SamplingConfig(temperature=0), 100, prefix_tokens=1)
    assert "".join(t.text for t in stream) == "Hello there.<|im_end|>"
    assert stream.info.finish_reason == "stop" and stream.info.prompt_tokens == 2
    assert backend.calls[0].prompt == "prompt text" and backend.calls[0].prefix_tokens == 1
    second = backend.stream(backend.tokenize("abc"), SamplingConfig(), 100)
    assert "".join(t.text for t in second) == "saw 3 chars" and backend.remaining == 0


def test_stream_respects_max_tokens():
    stream = ScriptedBackend(["one two three four"]).stream("p", SamplingConfig(), 2)
    assert [t.text for t in stream] == ["one", " two"] and stream.info.finish_reason == "length"


def test_running_out_of_scripts_is_a_clear_error():
    with pytest.raises(BackendError, match="only 0 scripts"):
        list(ScriptedBackend([]).stream("p", SamplingConfig(), 5))


def test_max_tokens_must_be_positive():
    with pytest.raises(ValueError, match="max_tokens"):
        ScriptedBackend(["x"]).stream("p", SamplingConfig(), 0)


def test_sampling_config_validates():
    with pytest.raises(ValueError, match="temperature"):
        SamplingConfig(temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0)
    raised = SamplingConfig(repeat_penalty=1.5).with_penalties(1.3, 0.5)
    assert (raised.repeat_penalty, raised.presence_penalty) == (1.5, 0.5)


def test_utf8_decoder_holds_split_characters():
    data = "a请é".encode()
    decoder = Utf8Decoder()
    pieces = [decoder.feed(data[i:i + 1]) for i in range(len(data))]
    assert "".join(pieces) == "a请é" and pieces[1:3] == ["", ""]
    assert decoder.feed(b"\xe8") == "" and decoder.flush() == "\ufffd"
