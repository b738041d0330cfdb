"""Faster pure-PyTorch fallbacks for Qwen3.5's linear-attention layers on CPUs.

Without the optional ``flash-linear-attention`` and ``causal-conv1d`` kernels, transformers
falls back to PyTorch code that is correct but slow on a CPU. Two pieces dominated a
training step here, and both have exact cheaper forms:

* the depthwise causal convolution (kernel 4): PyTorch's grouped ``conv1d`` backward took
  most of the step; a sum of 4 shifted, scaled copies computes the same thing with
  elementwise ops whose backward is cheap.
* the chunked gated delta rule: the fallback solves a unit lower-triangular system per
  64-token chunk with ``torch.linalg.solve_triangular``; those batched 64x64 solves (and
  their backward) took about 40% of a step. ``unit_lower_inverse`` builds the same inverse
  by block forward substitution from matrix products alone. The rest is the same chunked
  recurrence (intra-chunk attention with pairwise decays, then a scan over chunks carrying
  the recurrent state).

A third replacement serves the one-token decode path (``causal_conv1d_update``): it shifts the
cached window in place like the original, then takes the weighted sum over the kernel dim
elementwise instead of a grouped ``conv1d``. Same output and state; about 1.4x faster per call
(batch 16, 1024 channels, one thread), but on runs/try1/sft with ~800-token prompts that call
was only ~5% of a decode step (the KV-cache ``cat`` and matmuls dominate), so batched decoding
there is not measurably faster end to end.

``install()`` swaps all three into transformers' Qwen3.5 module (training, prefill and
decode). Tests check outputs, gradients and updated conv states against the originals, and
that greedy generation is unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def diagonal_blocks(matrix: torch.Tensor, size: int) -> torch.Tensor:
    """The ``size`` x ``size`` blocks on the diagonal of [..., n, n] as [..., n // size, size, size]."""
    tiles = matrix.unfold(-2, size, size).unfold(-2, size, size)  # [..., rows, cols, size, size]
    return torch.diagonal(tiles, dim1=-4, dim2=-3).movedim(-1, -3)


def unit_lower_inverse(strict_lower: torch.Tensor) -> torch.Tensor:
    """Inverse of ``I + N`` for strictly lower-triangular ``N`` of size a power of two.

    Block forward substitution, doubling the block size each round: with the inverses
    ``X``, ``Y`` of two neighbouring diagonal blocks, the inverse of the block they form is
    ``[[X, 0], [-Y A21 X, Y]]``. Only matrix products, and as stable as the triangular solve
    (a power series in ``N`` would cancel huge terms when keys in a chunk are alike).
    """
    size = strict_lower.shape[-1]
    if size & (size - 1):
        raise ValueError(f"chunk size {size} is not a power of two")
    lead = strict_lower.shape[:-2]
    blocks = torch.ones(*lead, size, 1, 1, dtype=strict_lower.dtype, device=strict_lower.device)
    width = 1
    while width < size:
        lower_left = diagonal_blocks(strict_lower, 2 * width)[..., width:, :width]
        first, second = blocks[..., 0::2, :, :], blocks[..., 1::2, :, :]
        corner = -(second @ lower_left @ first)
        top = torch.cat([first, torch.zeros_like(first)], dim=-1)
        bottom = torch.cat([corner, second], dim=-1)
        blocks = torch.cat([top, bottom], dim=-2)
        width *= 2
    return blocks[..., 0, :, :]


def chunk_gated_delta_rule(query, key, value, g, beta, chunk_size: int = 64, initial_state=None,
                           output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False, **_):
    """Same contract as transformers' ``torch_chunk_gated_delta_rule`` (shapes [B, T, H, D])."""
    out_dtype = query.dtype
    batch, length, k_heads, k_dim = key.shape
    v_heads, v_dim = value.shape[-2:]
    if k_heads != v_heads:  # grouped heads: each key head serves consecutive value heads
        query = query.repeat_interleave(v_heads // k_heads, dim=2)
        key = key.repeat_interleave(v_heads // k_heads, dim=2)
    query, key, value = (x.transpose(1, 2).float() for x in (query, key, value))
    beta, g = beta.transpose(1, 2).float(), g.transpose(1, 2).float()
    if use_qk_l2norm_in_kernel:
        query = query * torch.rsqrt((query * query).sum(-1, keepdim=True) + 1e-6)
        key = key * torch.rsqrt((key * key).sum(-1, keepdim=True) + 1e-6)
    query = query * k_dim**-0.5

    pad = (chunk_size - length % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad)) for x in (query, key, value))
    beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, pad))
    chunks = (length + pad) // chunk_size
    shape = lambda x: x.reshape(batch, v_heads, chunks, chunk_size, -1)  # noqa: E731
    query, key, value = shape(query), shape(key), shape(value)
    beta, g = beta.reshape(batch, v_heads, chunks, chunk_size), g.reshape(batch, v_heads, chunks, chunk_size)

    cum = g.cumsum(-1)  # log of the decay from the chunk start to each position
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device).tril()
    decay = (cum.unsqueeze(-1) - cum.unsqueeze(-2)).masked_fill(~causal, float("-inf")).exp()
    k_beta = key * beta.unsqueeze(-1)
    strict = ((k_beta @ key.transpose(-1, -2)) * decay).tril(-1)
    inverse = unit_lower_inverse(strict)
    corrected_values = inverse @ (value * beta.unsqueeze(-1))
    state_readers = inverse @ (k_beta * cum.exp().unsqueeze(-1))
    intra = (query @ key.transpose(-1, -2)) * decay

    q_decayed = query * cum.exp().unsqueeze(-1)
    k_to_end = key * (cum[..., -1:] - cum).exp().unsqueeze(-1)
    chunk_decay = cum[..., -1].exp()[..., None, None]
    state = (torch.zeros(batch, v_heads, k_dim, v_dim, dtype=torch.float32, device=query.device)
             if initial_state is None else initial_state.float())
    outputs = []
    # Unbind once: indexing chunk i inside the loop would make backward allocate and add a
    # full-size zero gradient per index (quadratic in the number of chunks).
    per_chunk = zip(*(x.unbind(2) for x in (corrected_values, state_readers, q_decayed, intra, chunk_decay, k_to_end)))
    for values_i, readers_i, q_i, intra_i, decay_i, k_end_i in per_chunk:
        delta = values_i - readers_i @ state
        outputs.append(q_i @ state + intra_i @ delta)
        state = state * decay_i + k_end_i.transpose(-1, -2) @ delta
    out = torch.stack(outputs, dim=2).reshape(batch, v_heads, -1, v_dim)[:, :, :length]
    return out.transpose(1, 2).contiguous().to(out_dtype), (state if output_final_state else None)


def causal_depthwise_conv1d(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                            activation: str | None = None, **_) -> torch.Tensor:
    """Same contract as transformers' ``causal_conv1d_fn``: x [B, C, T], weight [C, K] -> [B, C, T]."""
    length, kernel = hidden_states.shape[-1], weight.shape[-1]
    padded = F.pad(hidden_states.to(weight.dtype), (kernel - 1, 0))
    out = sum(weight[:, k, None] * padded[:, :, k : k + length] for k in range(kernel))
    if bias is not None:
        out = out + bias[:, None]
    if activation in ("silu", "swish"):
        out = F.silu(out)
    elif activation is not None:
        raise ValueError(f"unsupported activation {activation!r}")
    return out.to(hidden_states.dtype)


def causal_depthwise_conv1d_update(hidden_states: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor,
                                   bias: torch.Tensor | None = None, activation: str | None = None, **_) -> torch.Tensor:
    """Same contract as transformers' ``causal_conv1d_update`` (the cached decode step).

    x [B, C, T] (T is 1 when decoding), conv_state [B, C, S], weight [C, K] -> [B, C, T]; the
    state is updated in place to the last S inputs (the cache keeps its address). Computed
    in ``weight``'s dtype, returned in ``x``'s.
    """
    length, state_len, kernel = hidden_states.shape[-1], conv_state.shape[-1], weight.shape[-1]
    joined = torch.cat([conv_state, hidden_states], dim=-1).to(weight.dtype)
    conv_state.copy_(joined[:, :, -state_len:])
    window = joined[:, :, -(length + kernel - 1):]  # the inputs the last ``length`` outputs read
    if window.shape[-1] < kernel:
        raise ValueError(f"conv state of width {state_len} is too short for kernel {kernel}")
    # [B, C, steps, K] view times [C, 1, K], summed over the kernel dim (one step: a [B, C, K] product).
    out = (window.unfold(-1, kernel, 1) * weight[:, None, :]).sum(-1)
    if bias is not None:
        out = out + bias[:, None]
    if activation in ("silu", "swish"):
        out = F.silu(out)
    elif activation is not None:
        from transformers.activations import ACT2FN

        out = ACT2FN[activation](out)
    return out.to(hidden_states.dtype)


REPLACEMENTS = {
    "torch_chunk_gated_delta_rule": chunk_gated_delta_rule,
    "causal_conv1d_fn": causal_depthwise_conv1d,
    "causal_conv1d_update": causal_depthwise_conv1d_update,
}


def install() -> None:
    """Use these implementations in transformers' Qwen3.5 layers (idempotent; originals kept).

    botpsy calls this whenever it builds or loads a model; set ``BOTPSY_REFERENCE_KERNELS=1``
    to keep transformers' own fallbacks instead.
    """
    import os

    from transformers.models.qwen3_5 import modeling_qwen3_5

    if os.environ.get("BOTPSY_REFERENCE_KERNELS") == "1":
        return

    originals = modeling_qwen3_5.__dict__.setdefault("_botpsy_originals", {})
    for name, replacement in REPLACEMENTS.items():
        originals.setdefault(name, getattr(modeling_qwen3_5, name))
        setattr(modeling_qwen3_5, name, replacement)


def uninstall() -> None:
    from transformers.models.qwen3_5 import modeling_qwen3_5

    for name, original in modeling_qwen3_5.__dict__.get("_botpsy_originals", {}).items():
        setattr(modeling_qwen3_5, name, original)
