"""Rollouts and scoring on the student's attention-only family: a GRPO group shares one prompt encoding."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.slow

PROMPT = "<|im_start|>user\nSet an alarm for seven.<|im_end|>\n<|im_start|>assistant\n"


def test_a_rollout_group_shares_one_prefill_on_the_students_family(qwen2_gguf, tiny_tokenizer):
    """RL's torch rollouts on a Qwen2 model: copies of one prompt are prefilled once (the KV cache is
    copied per row) and sample what each samples alone, from its own generator."""
    from botpsy.train.rollout import sample_batch

    _, model = qwen2_gguf
    prompts = [PROMPT] * 3 + ["<|im_start|>user\nhi<|im_end|>\n"]
    grouped = sample_batch(model, tiny_tokenizer, prompts, max_new_tokens=8, temperature=1.0, seed=2, batch_size=4)
    alone = sample_batch(model, tiny_tokenizer, prompts, max_new_tokens=8, temperature=1.0, seed=2, batch_size=1)
    assert [s.completion_ids for s in grouped] == [s.completion_ids for s in alone]
    assert len({tuple(s.completion_ids) for s in grouped[:3]}) > 1


def test_scoring_encodes_a_shared_context_once_and_matches_a_plain_forward(qwen2_gguf, tiny_tokenizer):
    """``hidden_after`` with a cut (the prompt encoded without gradient): rows that share their
    context are encoded once; the values equal one ordinary forward pass and gradient still reaches
    the weights through the positions after the cut."""
    from botpsy.train.common import hidden_after

    _, model = qwen2_gguf
    prompt = tiny_tokenizer(PROMPT)["input_ids"]
    rows = [prompt + tiny_tokenizer(t)["input_ids"][:3] for t in ("Done.", "Okay then", "Done.")]
    other = tiny_tokenizer("<|im_start|>user\nhi there, how are you?<|im_end|>\n")["input_ids"][: len(rows[0])]
    ids = torch.tensor(rows + [other + [0] * (len(rows[0]) - len(other))])
    cut = len(prompt) - 1
    calls = []
    forward = type(model.model).forward
    model.model.forward = lambda *a, **k: calls.append(k["input_ids"].shape) or forward(model.model, *a, **k)
    try:
        hidden = hidden_after(model, ids, cut)
    finally:
        del model.model.forward
    assert calls[0][0] == 2  # two distinct contexts among four rows
    plain = model.model(input_ids=ids).last_hidden_state[:, cut:]
    assert torch.allclose(hidden, plain, atol=1e-5)
    for order in ([3, 0], [0, 3]):  # distinct contexts in either order (one of them not the sorted one)
        assert torch.allclose(hidden_after(model, ids[order], cut), plain[order], atol=1e-5)
    model.zero_grad()
    hidden.sum().backward()
    assert model.lm_head.weight.grad is None and model.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    model.zero_grad()
