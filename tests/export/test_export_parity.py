"""End to end: ``botpsy export`` writes checked release files, llama.cpp loads them, parity holds."""

from __future__ import annotations

import hashlib
import json

import pytest

from botpsy.export.gguf_file import GGUFFileError, tensor_table
from botpsy.export.gguf_writer import ExportError, write_gguf
from botpsy.export.parity import ParityConfig, load_llama, run_parity
from botpsy.export.quantize import FORMATS, is_quantized_matrix, quantize_gguf, resolve_format

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def parity_report(exported, hybrid_checkpoint):
    _, out = exported
    return run_parity(ParityConfig(checkpoint=str(hybrid_checkpoint), gguf_dir=str(out), threads=1))


def test_export_writes_the_three_formats_with_meta(exported):
    record, out = exported
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "model-bf16.gguf", "model-q4_k_m.gguf", "model-q8_0.gguf"]
    assert json.loads((out / "meta.json").read_text()) == record
    assert record["architecture"] == "qwen35" and record["notices"] == []
    for fmt, info in record["files"].items():
        path = out / info["file"]
        assert info["bytes"] == path.stat().st_size
        assert info["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    sizes = {fmt: info["bytes"] for fmt, info in record["files"].items()}
    assert sizes["bf16"] > sizes["q8_0"] > sizes["q4_k_m"]


@pytest.mark.parametrize(("fmt", "allowed"), [("bf16", {"BF16"}), ("q8_0", {"Q8_0"}), ("q4_k_m", {"Q4_K", "Q6_K"})])
def test_every_matrix_got_the_format(exported, fmt, allowed):
    _, out = exported
    tensors = tensor_table(out / f"model-{fmt}.gguf")
    matrices = [t for t in tensors if is_quantized_matrix(t)]
    assert len(matrices) == 32  # 3 linear-attention layers x (5 + 3 MLP) + attention layer (4 + 3) + embedding
    assert {t.type for t in matrices} <= allowed
    assert {t.type for t in tensors if not is_quantized_matrix(t)} == {"F32"}  # norms, A, conv kernels


def test_parity_passes_for_all_formats(parity_report, exported):
    _, out = exported
    assert parity_report["passed"], parity_report["missed"]
    assert json.loads((out / "parity.json").read_text()) == parity_report
    formats = parity_report["formats"]
    assert set(formats) == {"bf16", "q8_0", "q4_k_m"}
    for fmt, result in formats.items():
        assert result["tokenizer_agreement"] == 1.0, (fmt, result["tokenizer_mismatches"])
    assert formats["bf16"]["greedy_identical"] == 1.0
    assert formats["bf16"]["top1_agreement"] == 1.0
    assert formats["q8_0"]["mean_kl"] <= 1e-3 and formats["q8_0"]["top1_agreement_raw"] >= 0.99
    assert formats["q4_k_m"]["mean_kl"] <= 3e-2 and formats["q4_k_m"]["top1_agreement_raw"] >= 0.90
    # The trained model continues the chat prompt with real text, not one repeated token.
    greedy = formats["bf16"]["greedy"]["chat_prompt_thinking"]["transformers"]
    assert len(set(greedy)) > 5, greedy


def test_parity_fails_loudly_on_a_missed_threshold(exported, hybrid_checkpoint, capsys):
    from botpsy.export.parity import main

    _, out = exported
    config = ParityConfig(checkpoint=str(hybrid_checkpoint), gguf_dir=str(out), formats="q4_k_m",
                          max_kl_q4_k_m=1e-9, threads=1, max_new_tokens=4)
    assert main(config) == 1
    printed = capsys.readouterr().out
    assert "missed: q4_k_m: mean KL" in printed and "> 1e-09" in printed


def test_parity_refuses_a_corrupt_file_before_loading(exported, hybrid_checkpoint, tmp_path):
    _, out = exported
    broken = tmp_path / "gguf"
    broken.mkdir()
    data = (out / "model-q8_0.gguf").read_bytes()
    (broken / "model-q8_0.gguf").write_bytes(data[: len(data) // 2])
    with pytest.raises(GGUFFileError, match=r"model-q8_0\.gguf is truncated: it has .* bytes but its tensors need"):
        run_parity(ParityConfig(checkpoint=str(hybrid_checkpoint), gguf_dir=str(broken)))


def test_llama_cpp_load_failure_becomes_a_clear_error(tmp_path):
    import gguf
    import numpy as np

    path = tmp_path / "unknown-arch.gguf"  # well-formed GGUF, but no architecture llama.cpp knows
    writer = gguf.GGUFWriter(str(path), "no_such_arch")
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GGUFFileError, match="llama.cpp could not load .*unknown-arch.gguf"):
        load_llama(path, n_ctx=64, threads=1)


def test_cli_refuses_unsupported_architecture(tmp_path, capsys):
    from transformers import LlamaConfig, LlamaForCausalLM

    from botpsy.cli import main

    checkpoint = tmp_path / "llama"
    LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                 vocab_size=64)).save_pretrained(str(checkpoint))
    assert main(["export", str(checkpoint), "--out", str(tmp_path / "gguf")]) == 2
    err = capsys.readouterr().err
    assert "holds a 'llama' model" in err and str(checkpoint) in err
    assert not (tmp_path / "gguf").exists()


def test_cli_refuses_widths_that_would_fall_back(tmp_path, tiny_tokenizer, capsys):
    from botpsy.cli import main
    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.model.reference import ModelSpec, build_model

    spec = ModelSpec(num_hidden_layers=2, full_attention_interval=2, intermediate_size=384)
    checkpoint = save_checkpoint(build_model(spec, tiny_tokenizer), tiny_tokenizer, tmp_path / "odd", stage="base")
    assert main(["export", str(checkpoint), "--out", str(tmp_path / "gguf"), "--formats", "q8_0,q4_k_m"]) == 2
    err = capsys.readouterr().err
    assert "q4_k_m needs matrix input dimensions that are multiples of 256: intermediate_size = 384" in err
    assert "blk.0.ffn_down.weight" in err
    assert not (tmp_path / "gguf").exists()  # refused before anything was written


def test_quantizer_fallback_is_caught_by_the_type_check(tmp_path, tiny_tokenizer):
    """Past the pre-check, llama.cpp would silently use another type; reading the file back catches it."""
    from botpsy.model.reference import ModelSpec, build_model

    spec = ModelSpec(num_hidden_layers=2, full_attention_interval=2, intermediate_size=384)
    source = write_gguf(build_model(spec, tiny_tokenizer), tiny_tokenizer, tmp_path / "model-f32.gguf")
    with pytest.raises(ExportError, match=r"did not give every matrix a q4_k_m type: blk\.\d\.ffn_down\.weight \[384, 256\] is"):
        quantize_gguf(source, tmp_path / "model-q4_k_m.gguf", FORMATS["q4_k_m"], threads=1)


def test_bf16_falls_back_to_f16_with_a_notice(monkeypatch):
    import llama_cpp

    assert resolve_format("bf16") == (FORMATS["bf16"], None)
    monkeypatch.delattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_BF16")
    fmt, notice = resolve_format("bf16")
    assert fmt.name == "f16" and "cannot write bf16; wrote f16" in notice


def test_dense_qwen3_exports_and_matches(tmp_path, tiny_tokenizer):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from botpsy.export.command import ExportConfig, export_checkpoint
    from botpsy.model.checkpoint import save_checkpoint

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tiny_tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=True,
                         eos_token_id=tiny_tokenizer.convert_tokens_to_ids("<|im_end|>"), pad_token_id=0, bos_token_id=None)
    checkpoint = save_checkpoint(Qwen3ForCausalLM(config), tiny_tokenizer, tmp_path / "qwen3", stage="base")
    record = export_checkpoint(ExportConfig(checkpoint=str(checkpoint), out=str(tmp_path / "gguf"), formats="bf16,q8_0", threads=1))
    assert record["architecture"] == "qwen3"
    report = run_parity(ParityConfig(checkpoint=str(checkpoint), gguf_dir=str(tmp_path / "gguf"), threads=1, max_new_tokens=8))
    assert report["passed"], report["missed"]
    assert report["formats"]["bf16"]["max_abs_logit_diff"] < 0.1
