"""Rollouts from llama.cpp with the learner's adapter: the same completions the learner would
sample greedily, refreshed on schedule as the adapter trains, and used by MOPD end to end."""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.slow

PROMPTS = ["<|im_start|>user\nSet an alarm for seven.<|im_end|>\n<|im_start|>assistant\n",
           "<|im_start|>user\nweather in Oslo?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"]


@pytest.fixture
def learner(student_sft):
    from botpsy.train.lora import load_for_training

    ckpt, model, meta = load_for_training(str(student_sft), rank=4, dtype="float32")
    return ckpt.tokenizer, model, meta


def greedy_in_torch(model, tokenizer, n: int):
    from botpsy.train.rollout import sample_batch

    return [s.completion_ids for s in sample_batch(model, tokenizer, PROMPTS, max_new_tokens=n, temperature=0.0)]


def test_llama_rollouts_sample_what_the_learner_would_and_follow_its_updates(learner, tmp_path):
    from botpsy.train.llama_rollout import LlamaRollouts

    tokenizer, model, meta = learner
    rollouts = LlamaRollouts(tmp_path / "policy", meta["base"], refresh=2, threads=1, n_ctx=512)
    with pytest.raises(RuntimeError, match="sync"):
        rollouts.sample(tokenizer, PROMPTS, max_new_tokens=4)
    assert rollouts.sync(model, tokenizer, step=0) and (tmp_path / "policy" / "policy-lora.gguf").is_file()
    before = rollouts.sample(tokenizer, PROMPTS, max_new_tokens=6, temperature=0.0)
    assert [s.completion_ids for s in before] == greedy_in_torch(model, tokenizer, 6)
    assert all(s.prompt_ids == tokenizer(p, add_special_tokens=False)["input_ids"] for s, p in zip(before, PROMPTS))
    assert all(s.text == tokenizer.decode(s.completion_ids, skip_special_tokens=False) for s in before)
    # The learner moves; the sampler follows at the next refresh only (here every second step).
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.add_(torch.randn_like(weight) * 0.5, alpha=1.0)
    moved = greedy_in_torch(model, tokenizer, 6)
    assert moved != [s.completion_ids for s in before]
    assert not rollouts.sync(model, tokenizer, step=1)
    assert [s.completion_ids for s in rollouts.sample(tokenizer, PROMPTS, max_new_tokens=6, temperature=0.0)] == \
        [s.completion_ids for s in before]
    assert rollouts.sync(model, tokenizer, step=2)
    assert [s.completion_ids for s in rollouts.sample(tokenizer, PROMPTS, max_new_tokens=6, temperature=0.0)] == moved
    assert rollouts.describe()["refreshes"] == 2 and rollouts.describe()["policy_step"] == 2
    rollouts.close()


def test_sampled_llama_rollouts_are_seeded_per_prompt_and_end_at_a_stop_token(learner, tmp_path):
    from botpsy.train.llama_rollout import LlamaRollouts

    tokenizer, model, meta = learner
    rollouts = LlamaRollouts(tmp_path / "policy", meta["base"], threads=1, n_ctx=512)
    rollouts.sync(model, tokenizer, step=0)
    first = rollouts.sample(tokenizer, PROMPTS, max_new_tokens=12, temperature=1.5, seed=3)
    again = rollouts.sample(tokenizer, PROMPTS, max_new_tokens=12, temperature=1.5, seed=3)
    other = rollouts.sample(tokenizer, PROMPTS, max_new_tokens=12, temperature=1.5, seed=4)
    assert [s.completion_ids for s in first] == [s.completion_ids for s in again] != [s.completion_ids for s in other]
    stops = {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    for s in first + other:
        assert s.finished == (s.completion_ids[-1] in stops) and (s.finished or len(s.completion_ids) == 12)
    rollouts.close()


def test_llama_rollouts_need_a_lora_student_on_a_gguf_base(tmp_path):
    from botpsy.train.llama_rollout import LlamaRollouts

    with pytest.raises(ValueError, match="not a LoRA adapter"):
        LlamaRollouts(tmp_path, base=None)
    with pytest.raises(ValueError, match="at least 1"):
        LlamaRollouts(tmp_path, base="x.gguf", refresh=0)


def test_mopd_trains_on_llama_rollouts(student_sft, device_data, tmp_path):
    from botpsy.train.mopd import MOPDConfig
    from botpsy.train.mopd import main as mopd_main

    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"teachers": {"device": {"kind": "local", "path": str(student_sft), "dtype": "float32"}}}))
    out = tmp_path / "mopd"
    assert mopd_main(MOPDConfig(student=str(student_sft), teachers=str(manifest), data=str(device_data), out=str(out),
                                groups="device", steps=3, prompts_per_step=2, max_new_tokens=6, lr=1e-2, warmup_steps=1,
                                eval_examples=1, eval_max_new_tokens=4, save_every=1, lora_rank=4, dtype="float32",
                                detach_prompt=True, temperature=1.5, threads=1, rollout_backend="llama",
                                rollout_refresh=2)) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["rollouts"]["backend"] == "llama.cpp" and meta["rollouts"]["refreshes"] == 2  # steps 0 and 2
    assert json.loads((out / "rollout_policy" / "adapter" / "meta.json").read_text())["step"] == 2
    curves = [json.loads(line) for line in (out / "curves.jsonl").read_text().splitlines() if '"loss"' in line]
    assert [c["step"] for c in curves] == [1, 2, 3] and all(c["completion_tokens_mean"] > 0 for c in curves)
    assert [c["rollout_policy_step"] for c in curves] == [0, 0, 2]  # step 2 (the second) sampled one step behind


def test_rl_samples_episodes_in_llama_cpp_and_refreshes_before_its_dev_episodes(student_sft, device_data, tmp_path):
    from botpsy.train.rl import RLConfig
    from botpsy.train.rl import main as rl_main

    out = tmp_path / "rl1"
    assert rl_main(RLConfig(round=1, policy=str(student_sft), data=str(device_data), tasks=str(device_data / "none"), out=str(out),
                            steps=2, prompts_per_step=2, group_size=2, max_new_tokens=6, lr=1e-2, eval_every=1, eval_tasks=2,
                            save_every=1, lora_rank=4, dtype="float32", detach_prompt=True, threads=1,
                            rollout_backend="llama", rollout_refresh=5)) == 0
    meta = json.loads((out / "meta.json").read_text())
    # Step 0's rollouts load the policy; the dev episodes after step 1 refresh it (a refresh is due
    # every 5 steps only, but an evaluation plays the current weights), step 2's rollouts reuse that,
    # and the final dev episodes refresh again: 3 refreshes, the last at step 2.
    assert meta["rollouts"]["refreshes"] == 3 and meta["rollouts"]["policy_step"] == 2
    assert meta["dev"]["tasks"] == 2
    curves = [json.loads(line) for line in (out / "curves.jsonl").read_text().splitlines() if '"loss"' in line]
    assert [c["rollout_policy_step"] for c in curves] == [0, 1] and "dev" in curves[0]
