"""How much memory a GGUF model needs at a given context size, and a clear refusal when it cannot fit.

llama.cpp asked to load a model larger than the free memory either fails late with a cryptic
allocation error or, worse, pages the weights in and out until the phone or laptop grinds to
a halt. Before loading, ``check_model_fits`` checks the file's header (a missing or corrupt
file gets the export check's plain message), adds up

* **weights**: every tensor's bytes, from the GGUF tensor table;
* **context**: the KV cache of the full-attention layers for ``n_ctx`` tokens (f16 K and V),
  plus, for Qwen3.5's Gated DeltaNet layers, their fixed-size recurrent state (convolution
  window and the per-head state matrix, f32);
* **compute**: llama.cpp's scratch buffer for one batch, dominated by the attention score
  matrix (batch x n_ctx x heads, f32) and the logits (batch x vocab), plus a fixed margin,

and compares the total with the memory available now (``psutil``).

Example::

    estimate = check_model_fits("runs/speedrun/gguf/model-q4_k_m.gguf", n_ctx=8192)
    print(estimate.describe())   # "needs 120.9 MiB (weights 3.6 MiB, context 4.4 MiB for n_ctx=8192, ...
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from botpsy.runtime.backend import ModelLoadError

GIB = 1 << 30
FIXED_OVERHEAD_BYTES = 32 << 20  # the loaded llama.cpp library, thread pools, tokenizer tables
KV_BYTES_PER_VALUE = 2  # llama.cpp's default cache type is f16
STATE_BYTES_PER_VALUE = 4  # recurrent states are f32
ACTIVATION_ROWS = 16  # rough count of hidden-size activation rows alive per batch token


def human_bytes(n: int) -> str:
    """Bytes as GiB or MiB for messages.

    >>> human_bytes(3 << 29), human_bytes(5 << 20)
    ('1.50 GiB', '5.0 MiB')
    """
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


@dataclass(frozen=True)
class MemoryEstimate:
    path: str
    n_ctx: int
    weights_bytes: int
    context_bytes: int
    compute_bytes: int
    available_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.context_bytes + self.compute_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.available_bytes

    def describe(self) -> str:
        parts = (f"weights {human_bytes(self.weights_bytes)}, context {human_bytes(self.context_bytes)} "
                 f"for n_ctx={self.n_ctx}, compute {human_bytes(self.compute_bytes)}")
        return f"needs {human_bytes(self.total_bytes)} ({parts}) with {human_bytes(self.available_bytes)} available"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_bytes": self.total_bytes, "fits": self.fits}


def _metadata(reader, arch: str) -> dict[str, Any]:
    """The ``{arch}.*`` scalar metadata of a GGUF file, keys without the architecture prefix."""
    out: dict[str, Any] = {}
    prefix = arch + "."
    for key, fld in reader.fields.items():
        if key.startswith(prefix) and len(fld.types) == 1:  # scalars only; arrays are not needed
            out[key[len(prefix):]] = fld.contents()
    return out


def full_attention_layers(meta: dict[str, Any]) -> int:
    """Layers with a KV cache: every ``full_attention_interval``-th one in Qwen3.5, else all."""
    layers = int(meta.get("block_count", 0))
    interval = int(meta.get("full_attention_interval", 1) or 1)
    return layers // interval


def kv_cache_bytes(meta: dict[str, Any], n_ctx: int) -> int:
    heads_kv = int(meta.get("attention.head_count_kv", meta.get("attention.head_count", 0)))
    head_dim = int(meta.get("embedding_length", 0)) // max(1, int(meta.get("attention.head_count", 1)))
    key_len = int(meta.get("attention.key_length", head_dim))
    value_len = int(meta.get("attention.value_length", head_dim))
    return full_attention_layers(meta) * n_ctx * heads_kv * (key_len + value_len) * KV_BYTES_PER_VALUE


def recurrent_state_bytes(meta: dict[str, Any]) -> int:
    """Gated DeltaNet state per linear layer: the conv window over q, k, v and one d_k x d_v matrix per head."""
    if "ssm.inner_size" not in meta:
        return 0
    inner = int(meta["ssm.inner_size"])  # value heads x value head dim
    key_dim = int(meta["ssm.state_size"])  # key head dim
    key_heads = int(meta["ssm.group_count"])
    value_heads = int(meta["ssm.time_step_rank"])
    conv = (int(meta["ssm.conv_kernel"]) - 1) * (inner + 2 * key_heads * key_dim)
    state = value_heads * key_dim * (inner // max(1, value_heads))
    linear_layers = int(meta.get("block_count", 0)) - full_attention_layers(meta)
    return linear_layers * (conv + state) * STATE_BYTES_PER_VALUE


def compute_buffer_bytes(meta: dict[str, Any], n_ctx: int, n_batch: int, n_vocab: int) -> int:
    """llama.cpp's per-batch scratch: attention scores, logits and a few activation rows."""
    heads = int(meta.get("attention.head_count", 0))
    width = max(int(meta.get("embedding_length", 0)), int(meta.get("feed_forward_length", 0)),
                int(meta.get("ssm.inner_size", 0)))
    per_token = n_ctx * heads + n_vocab + ACTIVATION_ROWS * width
    return n_batch * per_token * 4 + FIXED_OVERHEAD_BYTES


def estimate_memory(path: str | Path, n_ctx: int, n_batch: int = 512,
                    available_bytes: int | None = None, extra_weight_bytes: int = 0) -> MemoryEstimate:
    """Read ``path``'s header and estimate what loading it with ``n_ctx`` needs (no weights are read).

    ``extra_weight_bytes``: weights loaded beside the file (a LoRA adapter on this base)."""
    from gguf import GGUFReader

    from botpsy.export.gguf_file import GGUFFileError, check_gguf_file

    try:
        layout = check_gguf_file(path)
        reader = GGUFReader(str(path))
    except GGUFFileError as exc:
        raise ModelLoadError(f"cannot load the model: {exc}") from None
    except (ValueError, OSError) as exc:  # what gguf's reader raises on damage the check did not see
        raise ModelLoadError(f"cannot load the model: {path} could not be read as GGUF ({exc})") from None
    meta = _metadata(reader, layout.architecture or "")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    n_vocab = int(meta.get("vocab_size") or (len(tokens.data) if tokens is not None else 0))
    weights = sum(int(t.n_bytes) for t in reader.tensors) + extra_weight_bytes
    context = kv_cache_bytes(meta, n_ctx) + recurrent_state_bytes(meta)
    compute = compute_buffer_bytes(meta, n_ctx, min(n_batch, n_ctx), n_vocab)
    if available_bytes is None:
        import psutil

        available_bytes = int(psutil.virtual_memory().available)
    return MemoryEstimate(str(path), n_ctx, weights, context, compute, available_bytes)


def check_model_fits(path: str | Path, n_ctx: int, n_batch: int = 512,
                     available_bytes: int | None = None, extra_weight_bytes: int = 0) -> MemoryEstimate:
    """``estimate_memory``, raising ``ModelLoadError`` with the numbers when the model cannot fit."""
    estimate = estimate_memory(path, n_ctx, n_batch, available_bytes, extra_weight_bytes)
    if not estimate.fits:
        raise ModelLoadError(
            f"refusing to load {path}: it {estimate.describe()}. Use a smaller quantization "
            f"(e.g. q4_k_m), a smaller context (n_ctx), or free some memory.")
    return estimate
