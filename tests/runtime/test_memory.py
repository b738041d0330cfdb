"""Model memory estimates from the GGUF header, and clear refusals for files that cannot be loaded."""

from __future__ import annotations

import numpy as np
import pytest

from botpsy.runtime.backend import ModelLoadError
from botpsy.runtime.memory import check_model_fits, estimate_memory, human_bytes

# A Qwen3.5-shaped header: 8 layers, every 4th full attention (2 of them), 2 KV heads of 64.
QWEN35_META = {"block_count": 8, "full_attention_interval": 4, "embedding_length": 256, "feed_forward_length": 512,
               "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 64,
               "attention.value_length": 64, "ssm.conv_kernel": 4, "ssm.state_size": 64, "ssm.group_count": 4,
               "ssm.time_step_rank": 8, "ssm.inner_size": 512, "vocab_size": 300}


def write_header_model(path, meta=QWEN35_META):
    """A GGUF with the given ``qwen35.*`` metadata and two small f32 tensors (enough for the estimate)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "qwen35")
    for key, value in meta.items():
        writer.add_uint32(f"qwen35.{key}", value)
    writer.add_tensor("token_embd.weight", np.zeros((300, 256), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(256, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_estimate_adds_weights_kv_cache_and_recurrent_state(tmp_path):
    path = write_header_model(tmp_path / "m.gguf")
    estimate = estimate_memory(path, n_ctx=1024, n_batch=64, available_bytes=1 << 40)
    assert estimate.weights_bytes == (300 * 256 + 256) * 4
    kv = 2 * 1024 * 2 * (64 + 64) * 2  # 2 attention layers x n_ctx x KV heads x (K + V dims) x f16
    conv = 3 * (512 + 2 * 4 * 64)  # (kernel - 1) x (value dims + query and key dims)
    state = 8 * 64 * 64  # value heads x key dim x value dim
    assert estimate.context_bytes == kv + 6 * (conv + state) * 4
    assert estimate.compute_bytes > 64 * 1024 * 4 * 4  # at least the attention scores of one batch
    assert estimate.fits and estimate.to_dict()["total_bytes"] == estimate.total_bytes
    longer = estimate_memory(path, n_ctx=4096, n_batch=64, available_bytes=1 << 40)
    assert longer.context_bytes - estimate.context_bytes == 3 * kv


def test_refuses_when_the_model_cannot_fit(tmp_path):
    path = write_header_model(tmp_path / "m.gguf")
    with pytest.raises(ModelLoadError, match=r"refusing to load .*m\.gguf.*needs .* MiB.*with 1\.0 MiB available"):
        check_model_fits(path, n_ctx=8192, available_bytes=1 << 20)
    assert check_model_fits(path, n_ctx=256, available_bytes=1 << 40).fits


def test_missing_truncated_and_foreign_files_are_refused_clearly(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        check_model_fits(tmp_path / "absent.gguf", n_ctx=512)
    data = write_header_model(tmp_path / "m.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) - 1000])
    with pytest.raises(ModelLoadError, match="truncated"):
        check_model_fits(tmp_path / "cut.gguf", n_ctx=512)
    (tmp_path / "notes.gguf").write_bytes(b"just some text, not a model at all")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        check_model_fits(tmp_path / "notes.gguf", n_ctx=512)


def test_llama_backend_refuses_before_loading(tmp_path):
    from botpsy.runtime.llama_backend import LlamaBackend

    path = write_header_model(tmp_path / "m.gguf")
    with pytest.raises(ModelLoadError, match="refusing to load"):
        LlamaBackend(path, available_bytes=1024)
    with pytest.raises(ModelLoadError, match="does not exist"):
        LlamaBackend(tmp_path / "absent.gguf")


def test_human_bytes():
    assert human_bytes(5 << 30) == "5.00 GiB" and human_bytes(3 << 20) == "3.0 MiB"
