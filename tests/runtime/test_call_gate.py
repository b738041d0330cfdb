"""The call gate: a turn's first tool call only when the model gives it at least a threshold.

Unit tests on the decision itself, then the real parts: llama.cpp and transformers mask what the
gate says in the logits their samplers read, and ``generate`` consults the gate only where the
answer may open its first call.
"""

from __future__ import annotations

import numpy as np
import pytest

from botpsy.chat.constrain import CallConstraint, CallGate, TokenTable
from botpsy.runtime.backend import SamplingConfig
from botpsy.runtime.generate import GenerateConfig, chat_prompt, generate

TABLE = TokenTable(["<tool_call>", "Sorry", " I", "\n\n", " ", "</think>", "x"])
TOOLS = [{"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm for the user.",
                                           "parameters": {"type": "object", "properties": {
                                               "hour": {"type": "integer"}, "minute": {"type": "integer"}}}}}]
GREEDY = SamplingConfig(temperature=0)


def probabilities(*values: float) -> np.ndarray:
    """Logits whose softmax is ``values`` padded to TABLE's size (float32, like a backend's)."""
    padded = np.full(len(TABLE.pieces), 1e-12)
    padded[:len(values)] = values
    return np.log(padded).astype(np.float32)


def test_the_gate_decides_only_before_the_first_call_of_the_answer():
    plain = CallGate(TABLE, 0.5, thinking=False)
    assert plain.active("") and plain.active("Sure, ") and not plain.active("<tool_call>\n<function=f>")
    assert not plain.active("<tool_call>\n<function=f>\n</function>\n</tool_call>\n")  # a parallel call: free
    reasoning = CallGate(TABLE, 0.5, thinking=True)
    assert not reasoning.active("") and not reasoning.active("I need the alarm tool.")
    assert reasoning.active("I need the alarm tool.\n</think>\n\n")
    assert not reasoning.active("Done.\n</think>\n\n<tool_call>\n")


def test_whitespace_is_left_out_of_the_odds_and_vetoes_count_only_a_call_ranked_first():
    gate = CallGate(TABLE, 0.5, thinking=False)
    assert not gate.should_mask(probabilities(0.6, 0.2, 0.2))
    assert gate.should_mask(probabilities(0.4, 0.3, 0.3)) and gate.vetoes == 1  # most likely, under half
    assert gate.should_mask(probabilities(0.1, 0.8, 0.1)) and gate.vetoes == 1  # masked, but not a veto
    # 0.3 against 0.2 of other words: 60% of what is not whitespace
    assert not gate.should_mask(probabilities(0.3, 0.1, 0.1, 0.4, 0.1))
    masked = probabilities(0.9, 0.1)
    masked[1:] = -np.inf
    assert not gate.should_mask(masked)  # only the call is left: certain
    assert not gate.should_mask(np.full(len(TABLE.pieces), -np.inf, dtype=np.float32))  # nothing to decide


def test_thresholds_are_checked():
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="call threshold"):
            CallGate(TABLE, bad, thinking=False)
    with pytest.raises(ValueError, match="call_threshold"):
        GenerateConfig(call_threshold=2.0)
    assert CallConstraint([], TABLE).gate_at("") is None
    constraint = CallConstraint([], TABLE, gate=CallGate(TABLE, 0.5, thinking=True))
    assert constraint.after("Let me see.\n</think>").gate_at("\n\n") is constraint.gate  # text of earlier streams counts
    assert constraint.gate_at("Let me see.") is None


def _first_token(backend, gate=None) -> int:
    prompt = "<|im_start|>user\nSet an alarm for 7:30.<|im_end|>\n<|im_start|>assistant\n"
    constraint = CallConstraint(TOOLS, backend.token_table(), gate=gate)
    return next(iter(backend.stream(prompt, GREEDY, 1, constraint=constraint))).id


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama_f32", "hf_backend"])
def test_real_backends_mask_what_the_gate_vetoes(name, request):
    """The tiny model never favours ``<tool_call>``, so the gate is pointed at its greedy first token:
    below the threshold it must be masked in the logits the sampler reads, above it kept."""
    backend = request.getfixturevalue(name)
    favourite = _first_token(backend)
    sure = CallGate(backend.token_table(), 1e-6, thinking=False)
    sure.call_ids = np.array([favourite])
    assert _first_token(backend, sure) == favourite and sure.vetoes == 0
    doubtful = CallGate(backend.token_table(), 1.0, thinking=False)
    doubtful.call_ids = np.array([favourite])
    assert _first_token(backend, doubtful) != favourite and doubtful.vetoes == 1


@pytest.mark.slow
@pytest.mark.parametrize("thinking", [False, True])
def test_generate_asks_the_gate_only_where_the_answer_may_open_a_call(llama_f32, monkeypatch, thinking):
    asked: list[int] = []

    class Recording(CallGate):
        def should_mask(self, logits):
            asked.append(len(logits))
            return super().should_mask(logits)

    monkeypatch.setattr("botpsy.chat.constrain.CallGate", Recording)
    prompt, prefix = chat_prompt([{"role": "user", "content": "Set an alarm for 7:30."}], TOOLS, enable_thinking=thinking)
    config = GenerateConfig(max_tokens=6, sampling=GREEDY, call_threshold=0.5)
    result = generate(llama_f32, prompt, config, tools=TOOLS, cache_prefix=prefix)
    if thinking:  # the tiny model never closes its reasoning in six tokens
        assert "</think>" not in result.text and asked == []
    else:
        assert len(asked) == result.completion_tokens and set(asked) == {llama_f32.n_vocab}
    assert result.call_vetoes == 0
    plain = generate(llama_f32, prompt, GenerateConfig(max_tokens=6, sampling=GREEDY), tools=TOOLS, cache_prefix=prefix)
    assert plain.text == result.text  # a call it never favoured: the gate changes nothing


@pytest.mark.slow
def test_an_agent_step_records_the_vetoes(llama_f32, monkeypatch):
    """The agent's model step carries the count, as the device suite's records keep it."""
    from botpsy.agent.loop import AgentConfig, model_turn

    messages = [{"role": "user", "content": "Set an alarm for 7:30."}]
    config = AgentConfig(enable_thinking=False, generation=GenerateConfig(max_tokens=3, sampling=GREEDY))
    plain, _ = model_turn(llama_f32, messages, TOOLS, config, 0, 3)
    favourite = llama_f32.tokenize(plain.content)[0] if plain.content else None
    if favourite is None:
        pytest.skip("the tiny model's first token is not text here")

    class AtFavourite(CallGate):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.call_ids = np.array([favourite])

    monkeypatch.setattr("botpsy.chat.constrain.CallGate", AtFavourite)
    gated = AgentConfig(enable_thinking=False,
                        generation=GenerateConfig(max_tokens=3, sampling=GREEDY, call_threshold=1.0))
    step, _ = model_turn(llama_f32, messages, TOOLS, gated, 0, 3)
    assert plain.call_vetoes == 0 and step.call_vetoes >= 1 and step.to_dict()["call_vetoes"] == step.call_vetoes
