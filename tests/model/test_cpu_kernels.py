"""The CPU fallbacks compute what transformers' reference fallbacks compute, gradients included."""

from __future__ import annotations

import pytest
import torch

from botpsy.model import cpu_kernels


def reference(name):
    from transformers.models.qwen3_5 import modeling_qwen3_5

    return modeling_qwen3_5.__dict__.get("_botpsy_originals", {}).get(name) or getattr(modeling_qwen3_5, name)


def grads_of(fn, inputs, **kwargs):
    inputs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*inputs, **kwargs)
    out, state = out if isinstance(out, tuple) else (out, None)
    loss = out.square().sum() + (state.sum() if state is not None else 0)
    loss.backward()
    return out.detach(), state, [x.grad for x in inputs]


@pytest.mark.parametrize("length", [1, 63, 64, 200])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunk_rule_matches_reference(length, with_state):
    torch.manual_seed(length)
    batch, k_heads, v_heads, dim = 2, 2, 4, 16
    inputs = [torch.randn(batch, length, k_heads, dim), torch.randn(batch, length, k_heads, dim),
              torch.randn(batch, length, v_heads, dim), -torch.rand(batch, length, v_heads), torch.rand(batch, length, v_heads)]
    kwargs = dict(initial_state=torch.randn(batch, v_heads, dim, dim) if with_state else None,
                  output_final_state=True, use_qk_l2norm_in_kernel=True)
    ref = grads_of(reference("torch_chunk_gated_delta_rule"), inputs, **kwargs)
    ours = grads_of(cpu_kernels.chunk_gated_delta_rule, inputs, **kwargs)
    assert torch.allclose(ours[0], ref[0], atol=1e-4) and torch.allclose(ours[1], ref[1], atol=1e-4)
    for a, b in zip(ours[2], ref[2]):
        assert torch.allclose(a, b, atol=1e-3, rtol=1e-3)


def test_unit_lower_inverse_is_exact():
    strict = torch.randn(3, 64, 64).tril(-1) * 0.3
    eye = torch.eye(64)
    assert torch.allclose(cpu_kernels.unit_lower_inverse(strict) @ (eye + strict), eye.expand(3, 64, 64), atol=1e-4)


@pytest.mark.parametrize("activation", [None, "silu"])
def test_conv_matches_reference(activation):
    torch.manual_seed(0)
    x, weight, bias = torch.randn(2, 12, 37), torch.randn(12, 4), torch.randn(12)
    ref = grads_of(lambda a, w, b: reference("causal_conv1d_fn")(a, w, b, activation=activation), [x, weight, bias])
    ours = grads_of(lambda a, w, b: cpu_kernels.causal_depthwise_conv1d(a, w, b, activation=activation), [x, weight, bias])
    assert torch.allclose(ours[0], ref[0], atol=1e-5)
    for a, b in zip(ours[2], ref[2]):
        assert torch.allclose(a, b, atol=1e-4)


def test_model_outputs_unchanged_by_install(tiny_checkpoint):
    from botpsy.model.checkpoint import load_checkpoint

    model = load_checkpoint(tiny_checkpoint).model
    ids = torch.randint(0, 300, (2, 90))
    with torch.no_grad():
        fast = model(ids).logits
        cpu_kernels.uninstall()
        try:
            slow = model(ids).logits
        finally:
            cpu_kernels.install()
    assert torch.allclose(fast, slow, atol=1e-4)


def test_inverse_stays_exact_when_keys_in_a_chunk_are_alike():
    """Identical keys (padding, repeated tokens) make N all-beta below the diagonal."""
    strict = torch.full((2, 64, 64), 0.9).tril(-1)
    inverse = cpu_kernels.unit_lower_inverse(strict)
    assert torch.isfinite(inverse).all()
    assert torch.allclose(inverse @ (torch.eye(64) + strict), torch.eye(64).expand(2, 64, 64), atol=1e-4)


def test_chunk_rule_finite_on_repeated_tokens():
    key = torch.ones(1, 256, 2, 16)
    out, _ = cpu_kernels.chunk_gated_delta_rule(key, key, torch.ones(1, 256, 2, 16), torch.zeros(1, 256, 2),
                                                torch.full((1, 256, 2), 0.9), use_qk_l2norm_in_kernel=True)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_update_matches_reference_over_decode_steps(activation, with_bias):
    """Several one-token steps in a row: same outputs and the same in-place state each step."""
    torch.manual_seed(1)
    batch, channels, kernel = 3, 12, 4
    weight, bias = torch.randn(channels, kernel), (torch.randn(channels) if with_bias else None)
    ref_state = torch.randn(batch, channels, kernel)
    our_state = ref_state.clone()
    address = our_state.data_ptr()
    for _ in range(5):
        x = torch.randn(batch, channels, 1)
        ref = reference("causal_conv1d_update")(x, ref_state, weight, bias, activation)
        ours = cpu_kernels.causal_depthwise_conv1d_update(x, our_state, weight, bias, activation)
        assert ours.shape == ref.shape == (batch, channels, 1) and ours.dtype == ref.dtype
        assert torch.allclose(ours, ref, atol=1e-5)
        assert torch.equal(our_state, ref_state)
    assert our_state.data_ptr() == address


@pytest.mark.parametrize("length, state_len", [(3, 4), (1, 3), (2, 5)])
def test_conv_update_matches_reference_for_other_shapes(length, state_len):
    torch.manual_seed(2)
    x, weight = torch.randn(2, 8, length), torch.randn(8, 4)
    ref_state = torch.randn(2, 8, state_len)
    our_state = ref_state.clone()
    ref = reference("causal_conv1d_update")(x, ref_state, weight, None, "silu")
    ours = cpu_kernels.causal_depthwise_conv1d_update(x, our_state, weight, None, "silu")
    assert ours.shape == ref.shape and torch.allclose(ours, ref, atol=1e-5)
    assert torch.equal(our_state, ref_state)


def test_conv_update_dtypes_follow_reference():
    """bf16 input and state with float32 weights: computed in float32, state and output cast like the original."""
    torch.manual_seed(3)
    x, weight = torch.randn(2, 8, 1).bfloat16(), torch.randn(8, 4)
    ref_state = torch.randn(2, 8, 4).bfloat16()
    our_state = ref_state.clone()
    ref = reference("causal_conv1d_update")(x, ref_state, weight, None, "silu")
    ours = cpu_kernels.causal_depthwise_conv1d_update(x, our_state, weight, None, "silu")
    assert ours.dtype == ref.dtype == torch.bfloat16 and our_state.dtype == torch.bfloat16
    assert torch.allclose(ours.float(), ref.float(), atol=1e-2)
    assert torch.equal(our_state, ref_state)


def test_greedy_generation_unchanged_by_install(tiny_checkpoint):
    from transformers.models.qwen3_5 import modeling_qwen3_5

    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.rollout import sample_batch

    checkpoint = load_checkpoint(tiny_checkpoint)
    assert modeling_qwen3_5.causal_conv1d_update is cpu_kernels.causal_depthwise_conv1d_update
    prompts = ["hello there", "the weather today is", "a", "call the function with two arguments please"]
    fast = sample_batch(checkpoint.model, checkpoint.tokenizer, prompts, max_new_tokens=12, temperature=0)
    cpu_kernels.uninstall()
    try:
        assert modeling_qwen3_5.causal_conv1d_update is not cpu_kernels.causal_depthwise_conv1d_update
        slow = sample_batch(checkpoint.model, checkpoint.tokenizer, prompts, max_new_tokens=12, temperature=0)
    finally:
        cpu_kernels.install()
    assert [s.completion_ids for s in fast] == [s.completion_ids for s in slow]
    assert all(len(s.completion_ids) > 1 for s in fast)  # decode steps actually ran
