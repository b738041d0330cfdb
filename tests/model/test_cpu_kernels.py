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
