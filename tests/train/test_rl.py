"""RL: the GRPO math by hand, round 1 learning a simple reward on a tiny model, exact resume, round 2 episodes."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import torch

from botpsy.model.checkpoint import load_checkpoint
from botpsy.train import episodes, rl
from botpsy.train.rl import RLConfig, clipped_policy_loss, group_advantages, k3_kl
from botpsy.train.rollout import Sample, score_completions
from tests.chat.conversations import A, S, U, call

CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito"]


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: on a shared 2-core machine a second thread mostly waits (and slows steps many times over)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---- the GRPO math -----------------------------------------------------------------------------


def test_advantages_are_normalised_within_each_group():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5, 3.0, 1.0, 2.0, 2.0])
    advantages, varies = group_advantages(rewards, group_size=4)
    first, second = advantages.view(2, 4)
    for group, values in ((first, rewards[:4]), (second, rewards[4:])):
        assert group.sum().abs() < 1e-5
        expected = (values - values.mean()) / (values.std(unbiased=False) + 1e-4)
        assert torch.allclose(group, expected)
    assert varies.tolist() == [True, True]


def test_a_zero_variance_group_gives_zero_advantage():
    advantages, varies = group_advantages(torch.tensor([0.3, 0.3, 0.3, 1.0, 0.0, 0.5]), group_size=3)
    assert varies.tolist() == [False, True]
    assert advantages[:3].tolist() == [0.0, 0.0, 0.0] and advantages[3:].abs().sum() > 0


def test_clipped_objective_matches_a_hand_computed_example():
    old = torch.zeros(2, 3)
    # ratios: row 0 = [1.5, 0.5, 1.1] with A = +1; row 1 = the same with A = -2
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1], [1.5, 0.5, 1.1]]))
    loss = clipped_policy_loss(logp, old, torch.tensor([1.0, -2.0]), clip_eps=0.2)
    # A > 0: -min(r A, clip(r) A) = -[1.2, 0.5, 1.1]; A < 0: -min(-2r, -2 clip(r)) = [3.0, 1.6, 2.2]
    expected = torch.tensor([[-1.2, -0.5, -1.1], [3.0, 1.6, 2.2]])
    assert torch.allclose(loss, expected, atol=1e-6)


def test_k3_kl_is_zero_when_policy_equals_reference_and_positive_otherwise():
    logp = torch.log_softmax(torch.randn(3, 5), dim=-1)
    assert k3_kl(logp, logp).abs().max() == 0
    other = torch.log_softmax(torch.randn(3, 5), dim=-1)
    assert (k3_kl(logp, other) >= 0).all() and k3_kl(logp, other).sum() > 0


def test_step_indices_are_a_pure_function_of_seed_and_step_and_cover_the_data():
    first_pass = [i for step in range(5) for i in rl.step_indices(10, step, 2, seed=1)]
    assert sorted(first_pass) == list(range(10))
    assert rl.step_indices(10, 7, 3, seed=1) == rl.step_indices(10, 7, 3, seed=1)


# ---- round 1 on a tiny model -------------------------------------------------------------------


def make_examples(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        city = CITIES[i % len(CITIES)]
        # No tools block: short prompts keep the tiny model's steps fast.
        rows.append({"id": f"ex{i}", "kind": "single", "thinking": i % 2 == 0, "tools": [],
                     "messages": [S("Phone."), U(f"weather in {city}?"),
                                  A("", f"Weather for {city}.", [call("get_weather", city=city)])]})
    return rows


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for split, n in (("train", 12), ("dev", 2)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make_examples(n)))
    return folder


def low_half(sample, item, info):
    """A deliberately simple reward: 1 when the first completion token is in the lower half of the vocabulary."""
    hit = float(sample.completion_ids[0] < 256)
    return hit, {"task": hit}


def config_for(tiny_checkpoint, data_dir, out, **overrides) -> RLConfig:
    settings = {"round": 1, "policy": str(tiny_checkpoint), "data": str(data_dir), "tasks": str(data_dir / "none"),
                "out": str(out), "steps": 4, "prompts_per_step": 3, "group_size": 4, "max_new_tokens": 8, "lr": 1e-2,
                "eval_every": 0, "eval_tasks": 2, "save_every": 2, "threads": 1, "kl_coef": 0.02}
    settings.update(overrides)
    return RLConfig(**settings)


def first_token_logprobs(model, samples, pad_id) -> torch.Tensor:
    with torch.no_grad():
        return score_completions(model, samples, pad_id).token_logprobs[:, 0]


def test_round1_makes_rewarded_completions_likelier_changes_weights_keeps_reference_frozen(tiny_checkpoint, data_dir,
                                                                                            tmp_path):
    from accelerate import Accelerator

    config = config_for(tiny_checkpoint, data_dir, tmp_path / "rl1")
    ckpt = load_checkpoint(tiny_checkpoint)
    reference = rl.load_reference(str(tiny_checkpoint))
    frozen = {k: v.clone() for k, v in reference.state_dict().items()}
    start = {k: v.clone() for k, v in ckpt.model.state_dict().items()}
    optimizer = torch.optim.AdamW(ckpt.model.parameters(), lr=config.lr)
    learner = rl.Learner(ckpt.model, reference, ckpt.tokenizer, optimizer, Accelerator(cpu=True), config)
    items = rl.load_items(config, "train")
    stats, first = [], None
    for step in range(4):
        rollouts = rl.collect(learner, items[step * 3 : step * 3 + 3], step, config.group_size, low_half)
        if first is None:
            first = rollouts
            samples = [r.samples[0] for r in rollouts]
            rewarded = torch.tensor([r.reward == 1.0 for r in rollouts])
            before = first_token_logprobs(ckpt.model, samples, ckpt.tokenizer.pad_token_id)
        stats.append(rl.update(learner, rollouts))
    after = first_token_logprobs(ckpt.model, samples, ckpt.tokenizer.pad_token_id)
    assert 0 < int(rewarded.sum()) < len(rewarded)
    change = after - before  # measured: about +0.1 for the rewarded, -0.8 for the others
    assert change[rewarded].mean() > 0 > change[~rewarded].mean(), (change, rewarded)
    assert change[rewarded].mean() - change[~rewarded].mean() > 0.4, (change, rewarded)
    assert all(s["trained_samples"] > 0 and s["loss"] == s["loss"] for s in stats)
    assert any(not torch.equal(start[k], v) for k, v in ckpt.model.state_dict().items())
    assert all(torch.equal(frozen[k], v) for k, v in reference.state_dict().items())
    assert not any(p.requires_grad for p in reference.parameters())


def test_more_ppo_epochs_and_no_kl_still_update(tiny_checkpoint, data_dir, tmp_path):
    from accelerate import Accelerator

    config = config_for(tiny_checkpoint, data_dir, tmp_path / "rl1", ppo_epochs=2, kl_coef=0.0)
    ckpt = load_checkpoint(tiny_checkpoint)
    start = {k: v.clone() for k, v in ckpt.model.state_dict().items()}
    optimizer = torch.optim.AdamW(ckpt.model.parameters(), lr=config.lr)
    learner = rl.Learner(ckpt.model, rl.load_reference(str(tiny_checkpoint)), ckpt.tokenizer, optimizer,
                         Accelerator(cpu=True), config)
    stats = rl.update(learner, rl.collect(learner, rl.load_items(config, "train")[:2], 0, 4, low_half))
    assert stats["kl"] == 0.0 and stats["loss"] == stats["loss"]
    assert any(not torch.equal(start[k], v) for k, v in ckpt.model.state_dict().items())


def test_round1_run_writes_curves_checkpoint_and_resumes_exactly(tiny_checkpoint, data_dir, tmp_path, monkeypatch):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert rl.train(config_for(tiny_checkpoint, data_dir, straight), low_half) is not None
    assert rl.train(config_for(tiny_checkpoint, data_dir, resumed, interrupt_after=3), low_half) is None
    assert not (resumed / "model.safetensors").exists()
    assert rl.train(config_for(tiny_checkpoint, data_dir, resumed), low_half) is not None
    a, b = load_checkpoint(straight), load_checkpoint(resumed)
    for name, tensor in a.model.state_dict().items():
        assert torch.equal(tensor, b.model.state_dict()[name]), name
    meta = json.loads((straight / "meta.json").read_text())
    assert meta["stage"] == "rl1" and meta["steps"] == 4 and meta["dev"]["tasks"] == 2
    curves = [json.loads(line) for line in (straight / "curves.jsonl").read_text().splitlines()]
    steps = [c for c in curves if "reward" in c]
    assert [c["step"] for c in steps] == [1, 2, 3, 4]
    for key in ("reward", "components", "loss", "kl", "loop_rate", "reasoning_tokens", "completion_tokens",
                "success_rate", "zero_variance_groups"):
        assert key in steps[0], key
    resumed_steps = [json.loads(line)["step"] for line in (resumed / "curves.jsonl").read_text().splitlines()]
    assert resumed_steps == [1, 2, 3, 4, 4]  # step 3 was lost with the kill and logged once, on the rerun


def test_dry_run_checks_the_endpoint_and_a_real_run_refuses_it(tiny_checkpoint, data_dir, tmp_path, capsys):
    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "Qwen3.5-0.8B"}]}).encode() if self.path == "/v1/models" else b"{}"
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        config = config_for(tiny_checkpoint, data_dir, tmp_path / "dry", dry_run=True, json=True, rollout_endpoint=url)
        assert rl.main(config) == 0
        plan = json.loads(capsys.readouterr().out)
        assert plan["rollout_endpoint"]["reachable"] and plan["rollout_endpoint"]["models"] == ["Qwen3.5-0.8B"]
        assert plan["train_items"] == 12 and plan["rollouts_per_step"] == 12 and not (tmp_path / "dry").exists()
    finally:
        server.shutdown()
    from botpsy.cli import main as cli

    argv = ["rl", "--round", "1", "--policy", str(tiny_checkpoint), "--data", str(data_dir), "--out", str(tmp_path / "c"),
            "--kinds", "single", "--dry-run", "--json"]
    assert cli(argv) == 0 and json.loads(capsys.readouterr().out)["kinds"] == ["single"]
    with pytest.raises(ValueError, match="not an http"):
        rl.main(config_for(tiny_checkpoint, data_dir, tmp_path / "dry", dry_run=True, rollout_endpoint="localhost:8000"))
    with pytest.raises(ValueError, match="stale policy"):
        rl.main(config_for(tiny_checkpoint, data_dir, tmp_path / "x", rollout_endpoint=url))


# ---- round 2: episodes in the device world -----------------------------------------------------


@pytest.fixture(scope="module")
def multi_step_task():
    from botpsy.world import generate_tasks

    return next(t for t in generate_tasks("train", 40, seed=5) if t.kind == "multi_step")


def test_round2_batched_episodes_run_end_to_end_on_a_tiny_model(tiny_checkpoint, multi_step_task, tmp_path):
    from accelerate import Accelerator

    config = RLConfig(round=2, policy=str(tiny_checkpoint), out=str(tmp_path / "rl2"), group_size=2, max_turns=2,
                      max_new_tokens=8, thinking_share=1.0, threads=1)
    ckpt = load_checkpoint(tiny_checkpoint)
    optimizer = torch.optim.AdamW(ckpt.model.parameters(), lr=1e-3)
    learner = rl.Learner(ckpt.model, rl.load_reference(str(tiny_checkpoint)), ckpt.tokenizer, optimizer,
                         Accelerator(cpu=True), config)
    calls = []
    real_generate = learner.generate
    learner.generate = lambda prompts, seed, temperature=None: calls.append(len(prompts)) or real_generate(prompts, seed, temperature)
    rollouts = rl.collect(learner, [multi_step_task], 0, 2, None)
    assert len(rollouts) == 2 and calls[0] == 2  # both episodes' first turns in one batched call
    assert all(1 <= len(r.samples) <= 2 for r in rollouts)
    assert all({"task", "wasted_calls", "extra_turns", "loop", "length"} <= set(r.parts) for r in rollouts)
    stats = rl.update(learner, rollouts)
    assert stats["groups"] == 1


def gold_episode(task, tokenizer):
    """Play the task's gold turns through ``advance`` (as the policy would), one sample per turn."""
    from botpsy.chat.template import render_completion
    from botpsy.world import GoldAgent

    episode = episodes.start_episode(task, thinking=True)
    gold = GoldAgent(task)
    while not episode.done and len(episode.samples) < 10:
        prompt = episodes.episode_prompt(episode)
        message = gold(list(episode.messages), task.tools)
        text = render_completion("Next step.", message.get("content", ""), message.get("tool_calls"))
        ids = lambda s: tokenizer(s, add_special_tokens=False)["input_ids"]
        episodes.advance(episode, Sample(ids(prompt), ids(text), text, True), tokenizer, max_retries=2)
    return episode


def test_round2_episode_reward_uses_the_checker_and_masks_only_the_models_turns(tiny_tokenizer, tiny_checkpoint,
                                                                                multi_step_task):
    from botpsy.train.rewards import RewardConfig
    from botpsy.world import Transcript, evaluate

    episode = gold_episode(multi_step_task, tiny_tokenizer)
    verdict = evaluate(multi_step_task, Transcript.from_world(episode.messages, episode.world))
    assert verdict.success
    rollout = episodes.score_episode(episode, RewardConfig())
    assert rollout.success and rollout.parts["task"] == verdict.score and rollout.reward == pytest.approx(verdict.score)
    assert len(rollout.samples) == episodes.gold_turn_count(multi_step_task) >= 3
    # Tool results are in the next turn's prompt, never in a completion (the only tokens with loss).
    second_prompt = tiny_tokenizer.decode(rollout.samples[1].prompt_ids)
    assert "<tool_response>" in second_prompt
    for sample in rollout.samples:
        completion = tiny_tokenizer.decode(sample.completion_ids)
        assert "<tool_response>" not in completion and "<|im_start|>user" not in completion
    scored = score_completions(load_checkpoint(tiny_checkpoint).model, rollout.samples, tiny_tokenizer.pad_token_id)
    assert scored.mask.sum(1).tolist() == [len(s.completion_ids) for s in rollout.samples]


def test_round2_a_wrong_episode_scores_below_the_gold_one(tiny_tokenizer, multi_step_task):
    from botpsy.train.rewards import RewardConfig

    episode = episodes.start_episode(multi_step_task, thinking=True)
    text = "Hmm.\n</think>\n\nI have done it.<|im_end|>"
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    episodes.advance(episode, Sample([1], ids, text, True), tiny_tokenizer, max_retries=2)
    assert episode.done  # an answer without a question: the simulated user has nothing to add
    rollout = episodes.score_episode(episode, RewardConfig())
    assert not rollout.success and rollout.reward < 0.5


def test_round2_format_errors_are_fed_back_outside_the_transcript_then_end_the_episode(tiny_tokenizer, multi_step_task):
    episode = episodes.start_episode(multi_step_task, thinking=True)
    start = len(episode.messages)
    broken = "Call it.\n</think>\n\n<tool_call>\n<function=list_alarms>\n<parameter=x>\n<|im_end|>"
    ids = tiny_tokenizer(broken, add_special_tokens=False)["input_ids"]
    episodes.advance(episode, Sample([1], ids, broken, True), tiny_tokenizer, max_retries=1)
    assert not episode.done and len(episode.messages) == start and episode.feedback
    prompt = episodes.episode_prompt(episode)
    assert "<function=list_alarms>" in prompt and "tool_call" in episode.feedback[1]["content"]
    episodes.advance(episode, Sample([1], ids, broken, True), tiny_tokenizer, max_retries=1)
    assert episode.done and len(episode.messages) == start + 1 and len(episode.samples) == 2


def test_the_ablation_is_its_own_stage(tmp_path):
    with_penalties = RLConfig(round=1, run=str(tmp_path))
    ablation = RLConfig(round=1, run=str(tmp_path), penalties=False)
    assert (with_penalties.stage_name, ablation.stage_name) == ("rl1", "rl1-nopenalty")
    assert Path(ablation.out) == tmp_path / "rl1-nopenalty" and Path(with_penalties.out) == tmp_path / "rl1"
