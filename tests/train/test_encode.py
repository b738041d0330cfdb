"""Loss masks cover exactly what the assistant generates, in both thinking modes."""

from __future__ import annotations

import pytest

from botpsy.train.encode import IGNORE, encode_example, query_segments
from tests.chat.conversations import ALARM, WEATHER, A, S, T, U, call

MULTI = [
    S("sys"),
    U("alarm at 7"),
    A("", "set it", [call("set_alarm", hour=7)]),
    T('{"ok": true}'),
    A("Done.", "report"),
    U("weather in Rome?"),
    A("", "look up", [call("get_weather", city="Rome")]),
    T('{"temp": 3}'),
    A("3 degrees.", "answer"),
]


def decoded_targets(tokenizer, enc):
    return tokenizer.decode([t for t in enc.labels if t != IGNORE])


def test_one_sequence_per_user_query():
    assert query_segments(MULTI) == [(1, 5), (5, 9)]


@pytest.mark.parametrize("thinking", [True, False])
def test_loss_only_on_assistant_turns_of_each_query(tiny_tokenizer, thinking):
    encoded = encode_example({"messages": MULTI, "tools": [ALARM, WEATHER], "thinking": thinking}, tiny_tokenizer, 4096)
    assert len(encoded) == 2
    first, second = (decoded_targets(tiny_tokenizer, e) for e in encoded)
    reasoning = "set it\n</think>\n\n" if thinking else ""
    assert first.startswith(reasoning + "<tool_call>") and "<function=set_alarm>" in first and first.endswith("Done.<|im_end|>")
    assert "alarm at 7" not in first and '{"ok": true}' not in first
    # Context of the second sequence keeps the first turn without its reasoning; no loss there.
    assert "set_alarm" not in second and second.endswith("3 degrees.<|im_end|>")
    assert ("look up" in second) == thinking


def test_too_long_sequences_are_dropped(tiny_tokenizer):
    assert encode_example({"messages": MULTI, "tools": [ALARM]}, tiny_tokenizer, 16) == []


def test_loss_on_labelled_positions_equals_the_models_own_loss(tiny_checkpoint, tiny_tokenizer):
    import torch

    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.common import causal_lm_loss, collate

    model = load_checkpoint(tiny_checkpoint).model
    encoded = encode_example({"messages": MULTI, "tools": [ALARM, WEATHER]}, tiny_tokenizer, 4096)
    ids, labels = collate(encoded, tiny_tokenizer.pad_token_id)
    with torch.no_grad():
        assert torch.allclose(causal_lm_loss(model, ids, labels), model(input_ids=ids, labels=labels).loss, atol=1e-5)
