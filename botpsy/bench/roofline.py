"""The decode roofline: how fast the machine's memory lets a model decode, and how close it gets.

Decoding one token reads (nearly) every weight once, and on a CPU the weights do not fit in
cache, so decode speed is bounded by memory bandwidth / bytes read per token. Three pieces:

* ``measure_bandwidth``: a streaming copy with numpy (``np.copyto``, which releases the GIL)
  over buffers much larger than the caches, one slice per thread, best of several rounds.
  Bandwidth is counted the STREAM way: bytes read + bytes written per second. A write that
  first loads its cache line makes the true traffic higher, so this is a slight underestimate
  of what the hardware moves, and an honest ceiling for a read-mostly workload.
* ``bytes_per_token``: the tensor bytes in the GGUF (from its tensor table), minus the token
  embedding rows a decode step does not read. The embedding matrix is a lookup: one row per
  token, except when the model ties its output projection to it (no ``output.weight``), in
  which case the whole matrix is read by the output layer and everything counts. The KV cache
  and recurrent states read per token are not counted: at the short context where the roofline
  is taken they are a small fraction of the weights (the card names the context used).
* ``roofline``: the decode speed that bandwidth allows, and the measured speed as a fraction.
  A model small enough to sit in the CPU caches is not bound by DRAM bandwidth: its decode is
  limited by fixed per-token costs (graph setup, sampling over the vocabulary, thread
  hand-offs), its fraction says little and can even exceed 1 (the card notes when weights fit
  in the last-level cache).

Example::

    bandwidth = measure_bandwidth(threads=2)          # {"gb_per_s": {...}, "buffer_bytes": ...}
    model = bytes_per_token("runs/speedrun/gguf/model-q4_k_m.gguf")
    roofline(model, bandwidth["gb_per_s"]["max"], measured_tokens_per_s=42.0)
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from botpsy.bench.card import summarize

EMBEDDING_TENSOR = "token_embd.weight"
OUTPUT_TENSOR = "output.weight"
BYTES_READ_MODEL = ("GGUF tensor bytes, minus the token-embedding rows a decode step does not read (one row is "
                    "read, unless the output layer is tied to the embedding); KV cache and recurrent state excluded")


def measure_bandwidth(threads: int = 1, buffer_bytes: int = 256 << 20, rounds: int = 5) -> dict[str, Any]:
    """Copy bandwidth in GB/s (10^9 bytes, read + written) over ``buffer_bytes`` per side, best of ``rounds``."""
    import numpy as np

    threads = max(1, threads)
    per_thread = max(1, buffer_bytes // threads // 8)
    sources = [np.ones(per_thread, dtype=np.float64) for _ in range(threads)]
    targets = [np.zeros(per_thread, dtype=np.float64) for _ in range(threads)]
    moved = 2 * 8 * per_thread * threads
    speeds = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(np.copyto, targets, sources))  # warm-up: fault every page in before timing
        for _ in range(rounds):
            start = time.perf_counter()
            list(pool.map(np.copyto, targets, sources))
            speeds.append(moved / (time.perf_counter() - start) / 1e9)
    return {"gb_per_s": summarize(speeds), "best_gb_per_s": round(max(speeds), 3), "buffer_bytes": 8 * per_thread * threads,
            "threads": threads, "method": "numpy copyto, one slice per thread; bytes read + written (STREAM copy)"}


def speed_probe(threads: int = 1, copy_bytes: int = 64 << 20, size: int = 384, reps: int = 3) -> dict[str, float]:
    """One reading of how fast the machine is right now: ``{"copy_gb_per_s", "matmul_gflops"}``.

    A short streaming copy (memory-bound work, like decoding a model larger than the caches)
    and a float32 matrix product (compute-bound work, like prefill), each the best of
    ``reps`` back-to-back runs so that one interrupted run does not count. The bench takes a
    reading before every model in every round; their spread over a card, and between cards,
    is the machine's own drift, which ``compare.agreement`` allows for.
    """
    import numpy as np

    copy = measure_bandwidth(threads, copy_bytes, rounds=reps)["best_gb_per_s"]
    rng = np.random.default_rng(0)
    left, right = rng.standard_normal((size, size), dtype=np.float32), rng.standard_normal((size, size), dtype=np.float32)
    left @ right  # warm-up
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(8):
            left @ right
        best = min(best, time.perf_counter() - start)
    return {"copy_gb_per_s": copy, "matmul_gflops": round(8 * 2 * size**3 / best / 1e9, 3)}


def bytes_per_token(path: str | Path) -> dict[str, Any]:
    """The bytes one decode step reads from the model's weights (see the module docstring).

    For a LoRA adapter GGUF: its base's bytes plus every adapter tensor (the adapter is small, and
    its one-hot embedding picks, read one row per token, are under 2 MB)."""
    from gguf import GGUFReader

    from botpsy.export.lora_gguf import find_adapter

    pair = find_adapter(path)
    if pair is not None:
        base = bytes_per_token(pair.base)
        adapter = sum(int(t.n_bytes) for t in GGUFReader(str(path)).tensors)
        return {**base, "tensor_bytes": base["tensor_bytes"] + adapter, "adapter_bytes": adapter,
                "bytes_per_token": base["bytes_per_token"] + adapter}
    reader = GGUFReader(str(path))
    sizes = {t.name: int(t.n_bytes) for t in reader.tensors}
    total = sum(sizes.values())
    tied = OUTPUT_TENSOR not in sizes
    skipped = 0
    embedding = next((t for t in reader.tensors if t.name == EMBEDDING_TENSOR), None)
    if embedding is not None and not tied:
        rows = int(embedding.shape[-1])  # GGML order: the row length first, the vocabulary last
        skipped = sizes[EMBEDDING_TENSOR] - sizes[EMBEDDING_TENSOR] // max(1, rows)
    return {"tensor_bytes": total, "embedding_bytes": sizes.get(EMBEDDING_TENSOR, 0), "output_tied": tied,
            "bytes_per_token": total - skipped, "model": BYTES_READ_MODEL}


def roofline(model_bytes: dict[str, Any], bandwidth_gb_per_s: float, measured_tokens_per_s: float,
             context_tokens: int, last_level_cache_bytes: int | None = None) -> dict[str, Any]:
    """The decode speed bandwidth allows for ``model_bytes`` and the measured speed as a fraction of it."""
    per_token = model_bytes["bytes_per_token"]
    allowed = bandwidth_gb_per_s * 1e9 / per_token if per_token else 0.0
    fits = last_level_cache_bytes is not None and per_token <= last_level_cache_bytes
    return {
        "bytes_per_token": per_token, "bytes_model": model_bytes["model"], "output_tied": model_bytes["output_tied"],
        "bandwidth_gb_per_s": round(bandwidth_gb_per_s, 3), "allowed_decode_tokens_per_s": round(allowed, 2),
        "measured_decode_tokens_per_s": round(measured_tokens_per_s, 2),
        "fraction_of_roofline": round(measured_tokens_per_s / allowed, 4) if allowed else None,
        "context_tokens": context_tokens, "fits_in_last_level_cache": fits,
        "note": ("the weights fit in the last-level cache: decode is bound by per-token overheads (graph setup, "
                 "sampling, thread hand-offs) and cache bandwidth, not DRAM, so the fraction says little and can "
                 "even exceed 1" if fits else "weights larger than the last-level cache: DRAM-bound decode"),
    }
