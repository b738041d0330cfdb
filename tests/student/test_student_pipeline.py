"""The real student's path at test size: GGUF base -> LoRA SFT -> merge -> qwen2 GGUF export -> parity."""

from __future__ import annotations

import json

import pytest
import torch

from tests.student.conftest import tiny_qwen2

pytestmark = pytest.mark.slow


def test_a_gguf_base_loads_as_the_model_it_was_written_from(qwen2_gguf, tiny_tokenizer):
    from botpsy.model.checkpoint import load_checkpoint, read_model_type

    path, model = qwen2_gguf
    loaded = load_checkpoint(path)
    assert read_model_type(path) == "qwen2" and loaded.meta["family"] == "qwen2"
    text = "Set an alarm <tool_call> for 7"
    ids = torch.tensor([tiny_tokenizer(text)["input_ids"]])
    assert loaded.tokenizer(text)["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, loaded.model(ids).logits, atol=1e-5)


def _batch(tokenizer):
    from botpsy.train.common import collate
    from botpsy.train.encode import IGNORE, Encoded

    rows = []
    for prompt, answer in (("Wake me at seven.", "<tool_call>\n<function=set_alarm>"), ("Text Alice I am late.", "Sure, done.")):
        p, a = tokenizer(prompt)["input_ids"], tokenizer(answer)["input_ids"]
        rows.append(Encoded(input_ids=p + a, labels=[IGNORE] * len(p) + a))
    return collate(rows, tokenizer.pad_token_id)


@pytest.mark.parametrize("family", ["qwen2", "qwen3_5_text"])
def test_a_detached_context_leaves_the_loss_unchanged(family, tiny_tokenizer, tiny_checkpoint):
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.common import causal_lm_loss, first_label_cut

    model = tiny_qwen2(tiny_tokenizer) if family == "qwen2" else load_checkpoint(tiny_checkpoint).model
    ids, labels = _batch(tiny_tokenizer)
    assert first_label_cut(labels) > 0
    with torch.no_grad():
        full = causal_lm_loss(model, ids, labels)
        detached = causal_lm_loss(model, ids, labels, detach_context=True)
    assert torch.allclose(full, detached, atol=1e-5)


def test_lora_trains_the_adapter_and_the_call_token_rows_only(tiny_tokenizer):
    from botpsy.train.common import causal_lm_loss
    from botpsy.train.lora import LoraSettings, add_lora

    model = tiny_qwen2(tiny_tokenizer)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    peft_model = add_lora(model, tiny_tokenizer, LoraSettings(rank=4, alpha=8))
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n or "trainable_tokens" in n for n in trainable)
    assert any("embed_tokens" in n and "trainable_tokens" in n for n in trainable)
    assert any("lm_head" in n and "trainable_tokens" in n for n in trainable)  # the head is untied
    ids, labels = _batch(tiny_tokenizer)
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(8):
        loss = causal_lm_loss(peft_model, ids, labels, detach_context=True)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.8
    base = peft_model.get_base_model()
    for name, param in base.named_parameters():
        if "lora_" in name or "trainable_tokens" in name:
            continue
        original = name.replace(".base_layer", "").replace(".token_adapter", "")
        assert torch.equal(param, before[original]), name


def test_the_loss_in_chunks_gives_the_same_value_and_gradients_through_the_lora_head(tiny_tokenizer, monkeypatch):
    """Labelled-everywhere batches project to the vocabulary a chunk at a time (``head_loss``);
    the peft-wrapped head with its trainable call-token rows must get the same gradients."""
    from botpsy.train import common
    from botpsy.train.lora import LoraSettings, add_lora

    ids, labels = _batch(tiny_tokenizer)
    labelled = int((labels[:, 1:] != -100).sum())
    assert labelled > 4
    grads = []
    for chunk in (10_000, 3):  # the plain path, then chunks with recomputation in backward
        torch.manual_seed(0)
        peft_model = add_lora(tiny_qwen2(tiny_tokenizer), tiny_tokenizer, LoraSettings(rank=4, alpha=8))
        monkeypatch.setattr(common, "LOSS_CHUNK", chunk)
        loss = common.causal_lm_loss(peft_model, ids, labels, detach_context=True)
        loss.backward()
        grads.append((loss.item(), {n: p.grad.clone() for n, p in peft_model.named_parameters() if p.grad is not None}))
    (plain_loss, plain), (chunked_loss, chunked) = grads
    assert chunked_loss == pytest.approx(plain_loss, rel=1e-5)
    assert plain.keys() == chunked.keys() and any("lm_head" in n for n in plain)
    for name in plain:
        assert torch.allclose(plain[name], chunked[name], atol=1e-5), name


def test_token_rows_must_be_single_tokens(tiny_tokenizer):
    from botpsy.train.lora import trainable_token_ids

    assert len(trainable_token_ids(tiny_tokenizer, ("<tool_call>", "</tool_call>"))) == 2
    with pytest.raises(ValueError, match="not a single token"):
        trainable_token_ids(tiny_tokenizer, ("set_alarm_now",))


def test_lora_sft_writes_a_small_adapter_folder_that_names_its_base(student_sft, qwen2_gguf):
    files = {p.name for p in student_sft.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "meta.json", "curves.jsonl"} <= files
    assert "tokenizer.json" not in files and "model.safetensors" not in files  # the base is not copied
    assert "README.md" not in files  # no placeholder model card from peft
    meta = json.loads((student_sft / "meta.json").read_text())
    assert meta["base"] == str(qwen2_gguf[0]) and meta["adapter"] == "lora" and meta["steps"] == 3
    assert meta["trainable_parameters"] < meta["parameters"] / 5
    from safetensors.torch import load_file

    assert {t.dtype for t in load_file(str(student_sft / "adapter_model.safetensors")).values()} == {torch.bfloat16}


def test_the_adapter_folder_loads_merged_or_for_further_training(student_sft, qwen2_gguf, tiny_tokenizer):
    from botpsy.model.checkpoint import load_checkpoint, read_model_type

    assert read_model_type(student_sft) == "qwen2"
    merged = load_checkpoint(student_sft)
    assert type(merged.model).__name__ == "Qwen2ForCausalLM"
    trainable = load_checkpoint(student_sft, merge=False)
    assert any(p.requires_grad for p in trainable.model.parameters())
    ids = torch.tensor([tiny_tokenizer("Set an alarm for 7")["input_ids"]])
    with torch.no_grad():
        moved = (merged.model(ids).logits - qwen2_gguf[1](ids).logits).abs().max()
    assert moved > 1e-3  # the adapter changed what the model computes


def test_the_merged_student_exports_to_qwen2_gguf_and_passes_parity(student_sft, tmp_path):
    from botpsy.export.command import ExportConfig, export_checkpoint
    from botpsy.export.parity import ParityConfig, run_parity

    record = export_checkpoint(ExportConfig(checkpoint=str(student_sft), out=str(tmp_path), threads=1))
    assert record["architecture"] == "qwen2" and set(record["files"]) == {"bf16", "q8_0", "q4_k_m"}
    # The quantized thresholds are meant for a trained model; this one has had three steps, so its
    # near-flat logits flip top-1 under any rounding. bf16 must pass outright, Q8_0 stay close.
    report = run_parity(ParityConfig(checkpoint=str(student_sft), gguf_dir=str(tmp_path), threads=1))
    assert not [m for m in report["missed"] if m.startswith("bf16")], report["missed"]
    assert report["formats"]["bf16"]["greedy_identical"] == 1.0 and report["formats"]["q8_0"]["mean_kl"] <= 1e-3
    assert all(f["tokenizer_agreement"] == 1.0 for f in report["formats"].values())


def test_a_base_in_its_own_template_is_evaluated_natively(qwen2_gguf, tiny_tokenizer, tmp_path):
    """`botpsy eval` through llama.cpp on a GGUF whose template is not botpsy's: the native format is
    chosen, recorded in the summary, and device tasks and IFEval run end to end in it."""
    from botpsy.cli import main as cli_main
    from botpsy.export.gguf_writer import write_gguf
    from tests.chat.test_native import HERMES

    path = write_gguf(qwen2_gguf[1], tiny_tokenizer, tmp_path / "hermes.gguf", name="tiny-hermes", chat_template=HERMES)
    out = tmp_path / "eval"
    assert cli_main(["eval", "--model", str(path), "--label", "base", "--suite", "device,ifeval", "--limit", "2",
                     "--max-tokens", "16", "--threads", "1", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chat_format"] == {"base": "native"} and summary["constrained_calls"] == {"base": False}
    records = [json.loads(line) for line in (out / "base" / "device.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all("backend_error" not in r for r in records)
