"""Bytes read per decoded token from a GGUF's tensor table, the roofline arithmetic, the bandwidth probe."""

from __future__ import annotations

import numpy as np
import pytest

from botpsy.bench.roofline import bytes_per_token, measure_bandwidth, roofline, speed_probe

VOCAB, HIDDEN, FFN = 100, 32, 64


def write_gguf(path, tied: bool):
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", np.zeros((VOCAB, HIDDEN), dtype=np.float32))
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((FFN, HIDDEN), dtype=np.float32))
    if not tied:
        writer.add_tensor("output.weight", np.zeros((VOCAB, HIDDEN), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_untied_model_reads_one_embedding_row_per_token(tmp_path):
    model = bytes_per_token(write_gguf(tmp_path / "untied.gguf", tied=False))
    embedding, ffn, output = VOCAB * HIDDEN * 4, FFN * HIDDEN * 4, VOCAB * HIDDEN * 2
    assert model["tensor_bytes"] == embedding + ffn + output
    assert model["bytes_per_token"] == HIDDEN * 4 + ffn + output
    assert not model["output_tied"]


def test_tied_model_reads_the_whole_embedding_for_the_output_layer(tmp_path):
    model = bytes_per_token(write_gguf(tmp_path / "tied.gguf", tied=True))
    assert model["output_tied"]
    assert model["bytes_per_token"] == model["tensor_bytes"] == (VOCAB + FFN) * HIDDEN * 4


def test_roofline_fraction_and_cache_note():
    model = {"bytes_per_token": 500_000_000, "model": "m", "output_tied": False}
    dram = roofline(model, bandwidth_gb_per_s=10.0, measured_tokens_per_s=5.0, context_tokens=256,
                    last_level_cache_bytes=32 << 20)
    assert dram["allowed_decode_tokens_per_s"] == pytest.approx(20.0)
    assert dram["fraction_of_roofline"] == pytest.approx(0.25)
    assert not dram["fits_in_last_level_cache"]
    small = roofline({**model, "bytes_per_token": 4 << 20}, 10.0, 5000.0, 256, last_level_cache_bytes=32 << 20)
    assert small["fits_in_last_level_cache"] and "exceed 1" in small["note"]
    unknown = roofline(model, 10.0, 5.0, 256, last_level_cache_bytes=None)
    assert not unknown["fits_in_last_level_cache"]


def test_bandwidth_probe_reports_every_round(tmp_path):
    result = measure_bandwidth(threads=2, buffer_bytes=8 << 20, rounds=3)
    assert result["gb_per_s"]["n"] == 3 and result["threads"] == 2
    assert result["buffer_bytes"] == 8 << 20
    assert result["best_gb_per_s"] == result["gb_per_s"]["max"] > 0


def test_speed_probe_reads_copy_bandwidth_and_matmul_speed():
    reading = speed_probe(threads=1, copy_bytes=4 << 20, size=64, reps=2)
    assert set(reading) == {"copy_gb_per_s", "matmul_gflops"}
    assert reading["copy_gb_per_s"] > 0 and reading["matmul_gflops"] > 0
