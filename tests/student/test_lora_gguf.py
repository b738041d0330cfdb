"""The adapter GGUF (``botpsy export --formats lora``): the LoRA adapter alone, run by llama.cpp on its base.

The tiny Qwen2 GGUF stands in for the registry base and its LoRA SFT folder for the committed adapter.
Checked against the real parts: llama.cpp loads base + adapter, and ``botpsy parity`` compares what it
computes with the merged transformers model.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from botpsy.export.gguf_writer import ExportError
from botpsy.export.lora_gguf import AdapterFileError, is_adapter_gguf, open_adapter_gguf, write_lora_gguf


@pytest.fixture(scope="module")
def lora_dir(student_sft, tmp_path_factory):
    """An export folder holding only ``model-lora.gguf``, made by the export command."""
    from botpsy.cli import main

    out = tmp_path_factory.mktemp("lora-export")
    assert main(["export", str(student_sft), "--out", str(out), "--formats", "lora", "--json"]) == 0
    return out


def test_the_export_command_writes_the_adapter_alone_with_its_base_recorded(lora_dir, qwen2_gguf):
    from botpsy.export.gguf_file import read_layout

    meta = json.loads((lora_dir / "meta.json").read_text())
    record = meta["files"]["lora"]
    assert sorted(p.name for p in lora_dir.iterdir()) == ["meta.json", "model-lora.gguf"]  # no merged model written
    assert record["base"] == str(qwen2_gguf[0].resolve()) and record["tensor_types"] == {"F32": record["adapted_matrices"] * 2 + 4}
    assert record["adapted_matrices"] == 2 * 7  # every linear layer of both blocks
    assert meta["checkpoint_stage"] == "sft" and meta["architecture"] == "qwen2"
    assert read_layout(lora_dir / "model-lora.gguf").general_type == "adapter"
    assert is_adapter_gguf(lora_dir / "model-lora.gguf") and not is_adapter_gguf(qwen2_gguf[0])


def test_llama_cpp_runs_the_adapter_on_its_base_as_transformers_runs_the_merged_model(lora_dir, student_sft, qwen2_gguf):
    """Parity of base + adapter in llama.cpp with the merged model; the base alone is far off."""
    from botpsy.export.parity import ParityConfig, run_parity

    report = run_parity(ParityConfig(checkpoint=str(student_sft), gguf_dir=str(lora_dir), formats="lora", threads=1,
                                     max_new_tokens=8))
    lora = report["formats"]["lora"]
    assert report["passed"], report["missed"]
    assert lora["mean_kl"] < 1e-4 and lora["greedy_identical"] == 1.0

    base_only = lora_dir.parent / "base-only"
    base_only.mkdir(exist_ok=True)
    shutil.copy(qwen2_gguf[0], base_only / "model-f32.gguf")
    without = run_parity(ParityConfig(checkpoint=str(student_sft), gguf_dir=str(base_only), formats="f32", threads=1,
                                      max_new_tokens=8))["formats"]["f32"]
    assert without["max_abs_logit_diff"] > 20 * lora["max_abs_logit_diff"]  # the adapter is what closes the gap


def test_the_trained_token_rows_reach_llama_cpp(lora_dir, student_sft, qwen2_gguf):
    """The embedding and output rows of the tool-call tokens, trained beside the adapter, are in the file."""
    from gguf import GGUFReader

    reader = GGUFReader(str(lora_dir / "model-lora.gguf"))
    tensors = {t.name: np.asarray(t.data) for t in reader.tensors}
    ids = json.loads((student_sft / "adapter_config.json").read_text())["trainable_token_indices"]["embed_tokens"]
    picks = tensors["token_embd.weight.lora_a"]  # [vocab, k] one-hot columns
    assert picks.shape[1] == len(ids) and picks.sum() == len(ids)
    assert all(picks[token, i] == 1 for i, token in enumerate(ids))
    assert np.abs(tensors["token_embd.weight.lora_b"]).max() > 0 and np.abs(tensors["output.weight.lora_a"]).max() > 0


def test_a_weaker_adapter_scales_the_lora_matrices_and_keeps_the_token_rows(lora_dir, student_sft, tmp_path):
    """``--adapter-strength 0.5``: half of every LoRA change, the tool-call token rows whole, the strength recorded."""
    from gguf import GGUFReader

    from botpsy.cli import main
    from botpsy.runtime.backend import BackendOptions
    from botpsy.runtime.llama_backend import LlamaBackend

    out = tmp_path / "half"
    assert main(["export", str(student_sft), "--out", str(out), "--formats", "lora", "--adapter-strength", "0.5"]) == 0
    assert json.loads((out / "meta.json").read_text())["files"]["lora"]["strength"] == 0.5
    full, half = (GGUFReader(str(d / "model-lora.gguf")) for d in (lora_dir, out))
    assert float(half.fields["botpsy.adapter.strength"].parts[-1][0]) == 0.5
    assert "botpsy.adapter.strength" not in full.fields  # an adapter as trained carries no strength
    full_tensors = {t.name: np.asarray(t.data) for t in full.tensors}
    checked = 0
    for tensor in half.tensors:
        expected = full_tensors[tensor.name]
        if tensor.name.endswith(".lora_b") and not tensor.name.startswith(("token_embd", "output.")):
            expected, checked = expected * 0.5, checked + 1
        np.testing.assert_allclose(np.asarray(tensor.data), expected, rtol=1e-6, atol=0)
    assert checked == 2 * 7
    backend = LlamaBackend(out / "model-lora.gguf", BackendOptions(threads=1, n_ctx=256))
    backend.close()


@pytest.mark.parametrize("strength", ["0", "1.5", "-1"])
def test_an_adapter_strength_outside_zero_to_one_is_refused(student_sft, tmp_path, strength):
    with pytest.raises(ExportError, match=r"give a number in \(0, 1\]"):
        write_lora_gguf(student_sft, tmp_path / "x.gguf", strength=float(strength))
    assert not list(tmp_path.iterdir())


def test_an_adapter_strength_with_merged_formats_is_refused(student_sft, tmp_path):
    from botpsy.export.command import ExportConfig, export_checkpoint

    with pytest.raises(ExportError, match="applies to the lora format alone"):
        export_checkpoint(ExportConfig(checkpoint=str(student_sft), out=str(tmp_path / "o"), formats="lora,q8_0",
                                       adapter_strength=0.5))


def test_a_backend_opens_the_adapter_file_with_its_base(lora_dir, qwen2_gguf):
    from botpsy.runtime.backend import BackendOptions
    from botpsy.runtime.llama_backend import LlamaBackend

    backend = LlamaBackend(lora_dir / "model-lora.gguf", BackendOptions(threads=1, n_ctx=512))
    try:
        assert backend.describe()["base"] == str(qwen2_gguf[0].resolve())
        assert backend.memory.weights_bytes > (lora_dir / "model-lora.gguf").stat().st_size
        assert "tool_call" in backend.chat_template()
    finally:
        backend.close()


def test_a_changed_or_missing_base_is_refused_before_llama_cpp_loads_it(student_sft, qwen2_gguf, tmp_path):
    from botpsy.runtime.backend import BackendOptions, ModelLoadError
    from botpsy.runtime.llama_backend import LlamaBackend

    base = tmp_path / "base.gguf"
    shutil.copy(qwen2_gguf[0], base)
    adapter = tmp_path / "model-lora.gguf"
    write_lora_gguf(student_sft, adapter, base=str(base))
    assert open_adapter_gguf(adapter).base == base.resolve()

    with base.open("r+b") as f:  # one byte of tensor data changed: same size, another file
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    with pytest.raises(ModelLoadError, match="was made for a base of"):
        LlamaBackend(adapter, BackendOptions(threads=1, n_ctx=256))
    base.unlink()
    with pytest.raises(AdapterFileError, match="does not exist"):
        open_adapter_gguf(adapter)


def test_an_adapter_for_another_base_or_a_merged_checkpoint_is_refused(student_sft, tiny_tokenizer, tmp_path):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from botpsy.export.gguf_writer import write_gguf

    torch.manual_seed(0)
    other = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tiny_tokenizer), hidden_size=128, intermediate_size=256,
                                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                         tie_word_embeddings=False)).eval()
    other_base = write_gguf(other, tiny_tokenizer, tmp_path / "other.gguf")
    with pytest.raises(ExportError, match="not this adapter's base"):
        write_lora_gguf(student_sft, tmp_path / "x.gguf", base=str(other_base))
    with pytest.raises(ExportError, match="not a LoRA stage folder"):
        write_lora_gguf(tmp_path, tmp_path / "x.gguf", base=str(other_base))
    assert not (tmp_path / "x.gguf").exists() and not (tmp_path / "x.gguf.partial").exists()


def test_a_lora_release_builds_in_seconds_and_opens_by_name_on_its_base(student_sft, qwen2_gguf, monkeypatch, tmp_path):
    from botpsy.agent.backends import open_backend
    from botpsy.model import releases
    from botpsy.model.releases import Release
    from botpsy.runtime.backend import BackendOptions

    monkeypatch.setenv("BOTPSY_MODELS", str(tmp_path / "models"))
    rel = Release(name="tiny-lora", folder=str(student_sft), base=str(qwen2_gguf[0]), format="lora",
                  sha256="0" * 64, stage="sft")
    monkeypatch.setitem(releases.RELEASES, rel.name, rel)
    record = releases.build(rel.name)
    assert record["file"].endswith("tiny-lora-lora.gguf") and record["bytes"] < qwen2_gguf[0].stat().st_size
    backend = open_backend(rel.name, BackendOptions(threads=1, n_ctx=256))
    try:
        assert backend.describe()["base"] == str(qwen2_gguf[0].resolve())
    finally:
        backend.close()


def test_the_device_card_describes_an_adapter_file_by_its_base(lora_dir, qwen2_gguf):
    from botpsy.bench.measure import model_info
    from botpsy.bench.roofline import bytes_per_token

    adapter, base = lora_dir / "model-lora.gguf", qwen2_gguf[0]
    info = model_info(adapter)
    assert info["format"] == "F32+LoRA" and info["base"] == str(base.resolve())
    assert info["file_bytes"] == base.stat().st_size + adapter.stat().st_size
    both, alone = bytes_per_token(adapter), bytes_per_token(base)
    assert both["bytes_per_token"] == alone["bytes_per_token"] + both["adapter_bytes"] > alone["bytes_per_token"]


def test_exporting_the_adapter_beside_merged_files_keeps_their_records(student_sft, tmp_path):
    """A second export into the same folder adds its format to meta.json; the records of files it left
    alone stay when they came from the same checkpoint, and another checkpoint's are dropped."""
    from botpsy.cli import main

    assert main(["export", str(student_sft), "--out", str(tmp_path), "--formats", "q8_0", "--allow-fallback", "--json"]) == 0
    q8 = json.loads((tmp_path / "meta.json").read_text())["files"]["q8_0"]
    assert main(["export", str(student_sft), "--out", str(tmp_path), "--formats", "lora", "--json"]) == 0
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert sorted(meta["files"]) == ["lora", "q8_0"] and meta["files"]["q8_0"] == q8
    assert meta["vocab_size"] is not None  # kept from the merged export, which knows it

    other = tmp_path / "other-checkpoint"
    shutil.copytree(student_sft, other)
    assert main(["export", str(other), "--out", str(tmp_path), "--formats", "lora", "--json"]) == 0
    assert sorted(json.loads((tmp_path / "meta.json").read_text())["files"]) == ["lora"]

    # The same folder retrained (its weights rewritten) is another checkpoint too.
    assert main(["export", str(other), "--out", str(tmp_path), "--formats", "q8_0", "--allow-fallback", "--json"]) == 0
    weights = other / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes())
    assert main(["export", str(other), "--out", str(tmp_path), "--formats", "lora", "--json"]) == 0
    assert sorted(json.loads((tmp_path / "meta.json").read_text())["files"]) == ["lora"]


def _greedy(backend, prompt: str, prefix: str = "", hits: list | None = None) -> list[int]:
    """Greedy ids after ``prefix + prompt``; whether the prefix's state came from the cache goes to ``hits``."""
    from botpsy.runtime.backend import SamplingConfig

    ids = backend.tokenize(prefix) + backend.tokenize(prompt)
    with backend.stream(ids, SamplingConfig(temperature=0.0), 8, prefix_tokens=len(backend.tokenize(prefix))) as out:
        generated = [token.id for token in out]
    if hits is not None:
        hits.append(out.info.cache_hit)
    return generated


def test_the_adapter_switches_off_to_its_base_and_back_without_mixing_states(lora_dir, qwen2_gguf):
    """Off, the adapter file computes what the base file computes; on again, what it did before. The
    context and the prefix cache never carry a state computed with the other weights."""
    from botpsy.runtime.backend import BackendError, BackendOptions
    from botpsy.runtime.llama_backend import LlamaBackend

    options = BackendOptions(threads=1, n_ctx=512)
    prefix = "<|im_start|>system\nYou are a phone assistant.<|im_end|>\n"
    prompt = "<|im_start|>user\nSet an alarm for 7.<|im_end|>\n<|im_start|>assistant\n"
    with LlamaBackend(qwen2_gguf[0], options) as base:
        alone = _greedy(base, prompt, prefix)
        assert base.adapter_switchable is False
        base.use_adapter(True)  # a plain file is its base: nothing to do
        with pytest.raises(BackendError, match="no adapter it can switch off"):
            base.use_adapter(False)
    with LlamaBackend(lora_dir / "model-lora.gguf", options) as backend:
        assert backend.adapter_switchable and backend.adapter_on
        hits: list[bool] = []
        adapted = _greedy(backend, prompt, prefix, hits)  # the prefix's state is now cached, computed with the adapter
        assert adapted != alone
        backend.use_adapter(False)
        assert not backend.adapter_on and backend.describe()["adapter"] == "off"
        assert _greedy(backend, prompt, prefix, hits) == alone
        backend.reset()  # from the cache now: the base's own saved prefix
        later = prompt + "I will"
        assert _greedy(backend, later, prefix, hits) == _greedy_plain(qwen2_gguf[0], options, later, prefix)
        backend.use_adapter(False)  # unchanged: no-op
        backend.use_adapter(True)
        assert _greedy(backend, prompt, prefix, hits) == adapted
        assert hits == [False, False, True, True]  # each state found only its own saved prefix


def _greedy_plain(path, options, prompt: str, prefix: str) -> list[int]:
    from botpsy.runtime.llama_backend import LlamaBackend

    with LlamaBackend(path, options) as backend:
        return _greedy(backend, prompt, prefix)
