"""The reference Qwen3.5 model: built from a spec, saved, loaded by path and stage, run."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from botpsy.cli import main as cli_main
from botpsy.model.checkpoint import CheckpointError, load_checkpoint, load_stage
from botpsy.model.reference import PRESETS, ModelSpec, mrope_sections


def test_presets_quantize_cleanly():
    for name, spec in PRESETS.items():
        assert spec.quantization_problems() == [], name
    bad = ModelSpec(hidden_size=320)
    assert any("hidden_size = 320" in p for p in bad.quantization_problems())


def test_layer_types_mix_linear_and_full_attention():
    assert ModelSpec().layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert mrope_sections(8) == [3, 3, 2] and mrope_sections(32) == [11, 11, 10]


def test_checkpoint_loads_runs_forward_and_generate(tiny_checkpoint):
    ckpt = load_checkpoint(tiny_checkpoint)
    assert ckpt.meta["stage"] == "base" and ckpt.model.config.model_type == "qwen3_5_text"
    tok = ckpt.tokenizer
    ids = tok.apply_chat_template([{"role": "user", "content": "set an alarm"}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        logits = ckpt.model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok)) and torch.isfinite(logits).all()
    out = ckpt.model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out.shape[1] > ids.shape[1]


def test_save_and_reload_is_exact(tiny_checkpoint, tmp_path):
    a = load_checkpoint(tiny_checkpoint).model
    copy = tmp_path / "copy"
    shutil.copytree(tiny_checkpoint, copy)
    b = load_checkpoint(copy).model
    for (name, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(p, q), name


def test_load_stage_by_name(tiny_checkpoint):
    assert load_stage(tiny_checkpoint.parent, "base").meta["stage"] == "base"
    with pytest.raises(CheckpointError, match="has no 'sft' checkpoint; it has: \\['base'\\]"):
        load_stage(tiny_checkpoint.parent, "sft")


def test_clear_errors_for_missing_or_foreign_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "Qwen3.5-0.8B")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        load_checkpoint(tmp_path / "empty")
    llama = tmp_path / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(CheckpointError, match="'llama' model; botpsy supports qwen3_5_text"):
        load_checkpoint(llama)
    noweights = tmp_path / "noweights"
    noweights.mkdir()
    (noweights / "config.json").write_text(json.dumps({"model_type": "qwen3_5_text"}))
    with pytest.raises(CheckpointError, match="no weights"):
        load_checkpoint(noweights)


def test_multimodal_release_layout_loads_its_language_model(tiny_checkpoint, tmp_path):
    """Real Qwen3.5 releases nest the text model under model.language_model.* in a qwen3_5 config."""
    from safetensors.torch import load_file, save_file

    src = load_checkpoint(tiny_checkpoint)
    dst = tmp_path / "Qwen3.5-mini"
    shutil.copytree(tiny_checkpoint, dst)
    (dst / "meta.json").unlink()
    text_config = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({"model_type": "qwen3_5", "text_config": text_config}))
    weights = load_file(str(dst / "model.safetensors"))
    renamed = {("model.language_model." + k[len("model."):]) if k.startswith("model.") else k: v for k, v in weights.items()}
    renamed["model.visual.patch_embed.weight"] = torch.zeros(2, 2)
    save_file(renamed, str(dst / "model.safetensors"))
    loaded = load_checkpoint(dst)
    assert loaded.meta["stage"] == "external"
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.allclose(loaded.model(ids).logits, src.model(ids).logits, atol=1e-5)


def test_init_cli(tiny_tokenizer, tmp_path, capsys):
    out = tmp_path / "base"
    assert cli_main(["init", "--tokenizer", str(tiny_tokenizer.path), "--out", str(out), "--num-hidden-layers", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["parameters"] > 0 and len(result["layer_types"]) == 2
    meta = json.loads((out / "meta.json").read_text())
    assert meta["stage"] == "base" and meta["spec"]["num_hidden_layers"] == 2


def test_log_uniform_decay_init_gives_heads_long_and_short_memories(tiny_tokenizer):
    import torch
    import torch.nn.functional as F

    from botpsy.model.reference import ModelSpec, build_model

    spec = ModelSpec(num_hidden_layers=4, full_attention_interval=4)
    fresh = build_model(spec, tiny_tokenizer, seed=0)
    library = build_model(spec, tiny_tokenizer, seed=0, decay_init="transformers")
    steps = torch.cat([F.softplus(m.dt_bias) for m in fresh.modules() if hasattr(m, "dt_bias")])
    assert steps.numel() == 3 * spec.linear_num_value_heads
    assert bool(((steps > 0.999e-3) & (steps < 0.1001)).all()) and steps.max() / steps.min() > 10
    assert all(bool((m.dt_bias == 1).all()) for m in library.modules() if hasattr(m, "dt_bias"))
    with pytest.raises(ValueError, match="decay_init"):
        build_model(spec, tiny_tokenizer, decay_init="zeros")
