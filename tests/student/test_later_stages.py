"""Teachers, MOPD and RL on the LoRA student: each later stage keeps training the SFT adapter.

The real student is an adapter on a pulled GGUF base. Its later stages must stay one adapter on
that same base (so a release is built the same way at every stage), train only the adapter, and
fit a 0.5B model on a small machine (bfloat16 weights, the prompt encoded without gradient).
"""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.slow


def adapter_weights(folder) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def assert_adapter_on_the_same_base(folder, student_sft, stage: str):
    meta = json.loads((folder / "meta.json").read_text())
    sft_meta = json.loads((student_sft / "meta.json").read_text())
    assert meta["stage"] == stage and meta["adapter"] == "lora" and meta["base"] == sft_meta["base"]
    assert not (folder / "model.safetensors").exists()  # an adapter, not a full model
    before, after = adapter_weights(student_sft), adapter_weights(folder)
    assert before.keys() == after.keys()  # the same adapter, trained further
    assert any(not torch.equal(before[k].float(), after[k].float()) for k in before)


def test_the_detached_prompt_scores_the_same_and_trains_only_the_adapter(student_sft, device_data):
    from botpsy.train.lora import load_for_training
    from botpsy.train.rollout import Sample, score_completions

    ckpt, model, adapter_meta = load_for_training(str(student_sft), rank=4)
    assert adapter_meta == {"base": json.loads((student_sft / "meta.json").read_text())["base"], "adapter": "lora"}
    tok = ckpt.tokenizer
    samples = [Sample(prompt_ids=tok(p, add_special_tokens=False)["input_ids"], completion_ids=tok(c, add_special_tokens=False)["input_ids"],
                      text=c, finished=True)
               for p, c in (("Set an alarm for seven tomorrow", " sure"), ("Call Ana", " calling her now please"))]
    full = score_completions(model, samples, tok.pad_token_id)
    detached = score_completions(model, samples, tok.pad_token_id, detach_prompt=True)
    assert torch.allclose(full.token_logprobs, detached.token_logprobs, atol=1e-4)
    detached.token_logprobs.sum().backward()
    grads = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert grads and all("lora_" in n or "token_adapter" in n for n in grads)


def test_lora_teachers_continue_the_student_adapter_and_record_the_student_beside(student_sft, device_data, tmp_path):
    from botpsy.train.teachers import TeachersConfig, load_teachers, main

    out = tmp_path / "teachers"
    config = TeachersConfig(init=str(student_sft), data=str(device_data), out=str(out), groups="device", steps=2,
                            batch_tokens=8192, max_length=8192, lr=1e-2, warmup_steps=1, eval_examples=2,
                            eval_max_new_tokens=8, lora_rank=4, dtype="bfloat16", detach_context=True, threads=1)
    assert main(config) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    record = manifest["teachers"]["device"]
    assert record["dtype"] == "bfloat16" and record["steps"] == 2
    assert {"first_turn_rate", "call_examples"} <= set(record["dev_call"]) <= set(record["student_dev_call"])
    assert_adapter_on_the_same_base(out / "device", student_sft, "teacher-device")
    from botpsy.model.checkpoint import load_checkpoint

    student = load_checkpoint(student_sft)
    teachers = load_teachers(out / "manifest.json", ["device"], student.tokenizer, student.model.get_output_embeddings().weight.shape[0])
    assert next(teachers["device"].model.parameters()).dtype == torch.bfloat16
    assert main(config) == 0  # finished: skipped, not retrained
    assert json.loads((out / "manifest.json").read_text())["teachers"]["device"] == record


def test_mopd_and_rl_keep_training_the_same_adapter(student_sft, device_data, tmp_path):
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.mopd import MOPDConfig
    from botpsy.train.mopd import main as mopd_main
    from botpsy.train.rl import RLConfig
    from botpsy.train.rl import main as rl_main

    # The SFT student as its own teacher (a real run trains one per group): the loss still has gradient.
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"teachers": {"device": {"kind": "local", "path": str(student_sft), "dtype": "bfloat16"}}}))
    mopd_out = tmp_path / "mopd"
    assert mopd_main(MOPDConfig(student=str(student_sft), teachers=str(manifest), data=str(device_data), out=str(mopd_out),
                                groups="device", steps=2, prompts_per_step=2, max_new_tokens=6, lr=1e-2, warmup_steps=1,
                                eval_examples=2, eval_max_new_tokens=6, save_every=1, lora_rank=4, dtype="bfloat16",
                                detach_prompt=True, temperature=1.5, threads=1)) == 0
    assert_adapter_on_the_same_base(mopd_out, student_sft, "mopd")
    curves = [json.loads(line) for line in (mopd_out / "curves.jsonl").read_text().splitlines()]
    assert [c["step"] for c in curves if "loss" in c] == [1, 2]

    rl_out = tmp_path / "rl1"
    assert rl_main(RLConfig(round=1, policy=str(mopd_out), data=str(device_data), tasks=str(device_data / "none"), out=str(rl_out),
                            steps=2, prompts_per_step=2, group_size=2, max_new_tokens=6, lr=1e-2, eval_every=0, eval_tasks=2,
                            save_every=1, lora_rank=4, dtype="bfloat16", detach_prompt=True, threads=1)) == 0
    meta = json.loads((rl_out / "meta.json").read_text())
    assert meta["stage"] == "rl1" and meta["base"] == json.loads((student_sft / "meta.json").read_text())["base"]
    assert adapter_weights(rl_out).keys() == adapter_weights(student_sft).keys()
    merged = load_checkpoint(rl_out)  # one adapter on the pulled base: merges and exports like the SFT stage
    assert type(merged.model).__name__ == "Qwen2ForCausalLM"


def test_a_wider_peer_base_can_teach_the_student_through_its_own_adapter(student_sft, device_data, tiny_tokenizer, tmp_path):
    """#26's larger-teacher option: a teacher trained as a fresh adapter on a wider base of the same
    vocabulary (the 1.5B beside the 0.5B; here 384 wide beside 256), then distilled token by token."""
    from botpsy.export.gguf_writer import write_gguf
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.mopd import MOPDConfig
    from botpsy.train.mopd import main as mopd_main
    from botpsy.train.teachers import TeachersConfig, load_teachers
    from botpsy.train.teachers import main as teachers_main
    from tests.student.conftest import tiny_qwen2

    peer = tmp_path / "peer.gguf"
    write_gguf(tiny_qwen2(tiny_tokenizer, seed=1, hidden_size=384), tiny_tokenizer, peer, name="tiny-peer")
    out = tmp_path / "teachers"
    assert teachers_main(TeachersConfig(init=str(student_sft), data=str(device_data), out=str(out), groups="device",
                                        teacher_init=[f"device={peer}"], steps=1, batch_tokens=8192, max_length=8192,
                                        lr=1e-2, warmup_steps=1, eval_examples=2, eval_max_new_tokens=4, lora_rank=4,
                                        dtype="bfloat16", detach_context=True, threads=1)) == 0
    record = json.loads((out / "manifest.json").read_text())["teachers"]["device"]
    assert record["init"] == str(peer) and json.loads((out / "device" / "meta.json").read_text())["base"] == str(peer)
    student = load_checkpoint(student_sft)
    teachers = load_teachers(out / "manifest.json", ["device"], student.tokenizer,
                             student.model.get_output_embeddings().weight.shape[0])
    assert teachers["device"].model.config.hidden_size == 384
    mopd_out = tmp_path / "mopd"
    assert mopd_main(MOPDConfig(student=str(student_sft), teachers=str(out / "manifest.json"), data=str(device_data),
                                out=str(mopd_out), groups="device", steps=1, prompts_per_step=2, max_new_tokens=4, lr=1e-2,
                                warmup_steps=1, eval_examples=1, eval_max_new_tokens=4, save_every=1, lora_rank=4,
                                dtype="bfloat16", detach_prompt=True, temperature=1.5, threads=1)) == 0
    assert_adapter_on_the_same_base(mopd_out, student_sft, "mopd")
