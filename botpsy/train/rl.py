"""Stages 3-4 of the recipe: two rounds of RL with group-relative advantages (GRPO-style).

Each step draws ``prompts_per_step`` tasks, samples ``group_size`` rollouts of each from the
current policy, rewards them (``botpsy/train/rewards.py``), and normalises each reward within
its group: ``advantage = (r - mean) / (std + eps)``. Groups whose rollouts all scored the same
carry no signal; they are dropped from the update and counted. The loss is the clipped-ratio
policy gradient on the policy's own tokens (a token-level mean over the whole batch) plus
``kl_coef`` times the k3 estimate of the KL to a frozen reference, minimised with AdamW. With one
optimisation pass per batch (``ppo_epochs=1``) the ratio is 1 and the clip never binds; the
clipped form is kept so more passes are correct.

* **Round 1** (``--round 1``): the first assistant turn of single-turn, parallel and
  special-case tasks (kinds single, parallel, irrelevant, incomplete, wrong_value,
  unavailable, sensitive, injection). A rollout is one completion; its reward compares the
  parsed turn with the gold calls or, where no tool fits, with the task's own checks.
* **Round 2** (``--round 2``): multi-turn agentic episodes (kinds multi_step, multi_turn;
  add ``--kinds sensitive`` for the confirmation dialogue). Every rollout plays its task in its
  own device world: calls run in the world, tool results go back in, and the scripted
  simulated user answers questions and confirmation requests. The group's episodes advance
  together, one batched ``sample_batch`` call per round of turns, up to ``max_turns``. The whole
  episode is one trajectory: each assistant turn is a (prompt, completion) sample and all its
  turns share the episode's advantage; tool results and user turns sit in the prompts only,
  so they never carry loss. The reward is the world checker's score minus the episode costs.

The rollouts themselves (first turns, episodes, their rewards) live in ``botpsy/train/episodes.py``;
this module holds the update and the run. Both rounds subtract the loop and length penalties unless ``--no-penalties`` (the ablation).
Every step appends to ``OUT/curves.jsonl``; the full training state is checkpointed so a
killed run resumes to the same weights; the final policy is saved as stage ``rl1`` / ``rl2`` (``rl1-nopenalty`` for the ablation).

On one CPU::

    botpsy rl --round 1 --run runs/speedrun                  # runs/speedrun/mopd -> rl1
    botpsy rl --round 2 --run runs/speedrun                  # runs/speedrun/rl1  -> rl2
    botpsy rl --round 1 --run runs/speedrun --no-penalties --out runs/speedrun/rl1_nopen

For the real 0.8B model on GPUs, two things change. Rollouts should come from an inference
server (vLLM or any OpenAI-compatible ``/v1/completions`` endpoint, ``--rollout-endpoint URL``)
while the learner runs under ``accelerate launch`` with a config from ``configs/accelerate/``;
``--dry-run`` checks the checkpoint, the data, the endpoint (``GET /models``) and the accelerate
config, prints the plan and exits. This module does not push updated weights to the server,
so a training run with ``--rollout-endpoint`` is refused rather than silently sampling from a
stale policy; here rollouts come from the learner itself, on the CPU.

Why compact PyTorch rather than TRL's ``GRPOTrainer``: round 2's rollouts are multi-turn
episodes in botpsy's own world with its scripted user and checker, which a trainer built around
one completion per prompt does not hold without an environment layer of its own; and the
rollouts use ``botpsy/train/rollout.py``'s batched CPU generation for the hybrid
Gated-DeltaNet model. The update itself is the standard GRPO loss, small enough to read here.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from botpsy.config import save_config
from botpsy.output import emit
from botpsy.train.episodes import (
    Rollout,
    TurnReward,
    default_turn_reward,
    episode_rollouts,
    first_turn_items,
    first_turn_rollouts,
)
from botpsy.train.rewards import ROUND1_KINDS, ROUND2_KINDS, RewardConfig
from botpsy.train.rollout import Sample, check_endpoint

STAGE = {1: "rl1", 2: "rl2"}


@dataclass
class RLConfig:
    """Reinforcement learning, round 1 (first turns of tool-calling and special-case tasks) or 2 (agentic episodes)."""

    round: int = field(default=1, metadata={"help": "1: single-turn and special-case tasks; 2: multi-turn episodes in the device world.", "choices": [1, 2]})
    run: str = field(default="runs/speedrun", metadata={"help": "Run folder; the defaults below are read from and written to it."})
    policy: str | None = field(default=None, metadata={"help": "Checkpoint to start from (default: RUN/mopd for round 1, RUN/rl1 for round 2)."})
    reference: str | None = field(default=None, metadata={"help": "Frozen reference for the KL term (default: the policy's starting checkpoint)."})
    data: str | None = field(default=None, metadata={"help": "Round 1: folder with {train,dev}.jsonl chat examples (default: RUN/data)."})
    tasks: str | None = field(default=None, metadata={"help": "Folder with {train,dev}.jsonl device-world tasks (default: RUN/tasks)."})
    out: str | None = field(default=None, metadata={"help": "Output checkpoint folder (default: RUN/rl1 or RUN/rl2); also holds curves.jsonl and train_state/."})
    kinds: list[str] = field(default_factory=list, metadata={"help": "Task kinds to train on (default: round 1 single, parallel, irrelevant, incomplete, wrong_value, unavailable, sensitive, injection; round 2 multi_step, multi_turn).", "choices": list(ROUND1_KINDS + ROUND2_KINDS)})
    steps: int = field(default=50, metadata={"help": "Optimizer steps (one batch of rollouts each)."})
    prompts_per_step: int = field(default=8, metadata={"help": "Tasks per step."})
    group_size: int = field(default=4, metadata={"help": "Rollouts per task; advantages are normalised within each group."})
    max_new_tokens: int = field(default=128, metadata={"help": "Token limit per generated turn."})
    max_turns: int = field(default=6, metadata={"help": "Round 2: most assistant turns per episode."})
    max_retries: int = field(default=2, metadata={"help": "Round 2: unusable turns in a row (format errors) fed back before the episode ends."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature for rollouts."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling for rollouts."})
    thinking_share: float = field(default=0.5, metadata={"help": "Round 2: share of tasks played with thinking on (round 1 follows each example)."})
    lora_rank: int = field(default=0, metadata={"help": "Train a LoRA adapter (botpsy.train.lora): a policy that is an adapter folder (the real student's stages) keeps training its own adapter, anything else gets a fresh one of this rank. 0: every weight trains (the tiny model)."})
    dtype: str = field(default="float32", metadata={"help": "Policy and reference weight dtype (auto: bfloat16 where the hardware computes it natively, else float32; bfloat16 for the pretrained student; a LoRA adapter itself stays float32).", "choices": ["auto", "float32", "bfloat16"]})
    detach_prompt: bool = field(default=False, metadata={"help": "Encode each rollout's prompt without gradient (rollout.score_completions): much faster for the 0.5B student."})
    lr: float = field(default=1e-4, metadata={"help": "AdamW learning rate (constant)."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    grad_clip: float = field(default=1.0, metadata={"help": "Gradient-norm clip."})
    clip_eps: float = field(default=0.2, metadata={"help": "PPO ratio clip: the ratio is kept within [1 - eps, 1 + eps]."})
    kl_coef: float = field(default=0.02, metadata={"help": "Weight of the k3 KL estimate to the reference."})
    ppo_epochs: int = field(default=1, metadata={"help": "Optimisation passes over each batch of rollouts (1: ratio stays 1)."})
    batch_size: int = field(default=16, metadata={"help": "Prompts generated together."})
    score_batch: int = field(default=4, metadata={"help": "Sequences per scoring forward/backward pass (on a CPU, small passes are several times faster per token)."})
    penalties: bool = field(default=True, metadata={"help": "Loop, length, wasted-call and extra-turn penalties (--no-penalties: the ablation)."})
    reasoning_budget: int = field(default=96, metadata={"help": "Reasoning tokens per turn before the length penalty starts."})
    eval_every: int = field(default=25, metadata={"help": "Steps between dev evaluations (0: only at the end)."})
    eval_tasks: int = field(default=16, metadata={"help": "Dev-split tasks scored greedily at each evaluation."})
    save_every: int = field(default=10, metadata={"help": "Steps between resumable checkpoints."})
    resume: bool = field(default=True, metadata={"help": "Continue from OUT/train_state if it exists."})
    seed: int = field(default=0, metadata={"help": "Seed for task order and sampling."})
    threads: int = field(default=0, metadata={"help": "Torch CPU threads (0: torch's default)."})
    interrupt_after: int | None = field(default=None, metadata={"help": "Testing aid: stop after this step as if killed (state saved at the last checkpoint only)."})
    rollout_backend: str = field(default="torch", metadata={"help": "Where rollouts and dev episodes are sampled: torch (the learner itself) or llama (llama.cpp with the learner's adapter on its GGUF base, rewritten every --rollout-refresh steps and before each dev evaluation; a LoRA policy only; botpsy.train.llama_rollout).", "choices": ["torch", "llama"]})
    rollout_refresh: int = field(default=1, metadata={"help": "With --rollout-backend llama: optimizer steps between adapter refreshes (the sampler lags the learner by at most this minus one)."})
    rollout_endpoint: str | None = field(default=None, metadata={"help": "OpenAI-compatible server (e.g. vLLM, http://HOST:8000/v1) for rollouts of a large model; checked by --dry-run."})
    dry_run: bool = field(default=False, metadata={"help": "Check the inputs (and any endpoint or accelerate config), print the plan and exit."})
    accelerate_config: str | None = field(default=None, metadata={"help": "With --dry-run: check this accelerate config (configs/accelerate/*.yaml) and show how it would launch."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})

    def __post_init__(self) -> None:
        if self.round not in STAGE:
            raise ValueError(f"round must be 1 or 2, got {self.round}")
        run = Path(self.run)
        self.policy = self.policy or str(run / ("mopd" if self.round == 1 else "rl1"))
        self.reference = self.reference or self.policy
        self.data = self.data or str(run / "data")
        self.tasks = self.tasks or str(run / "tasks")
        self.out = self.out or str(run / self.stage_name)
        self.kinds = list(self.kinds or (ROUND1_KINDS if self.round == 1 else ROUND2_KINDS))
        if self.group_size < 2:
            raise ValueError("group_size must be at least 2 (advantages compare rollouts of the same task)")

    @property
    def stage_name(self) -> str:
        """``rl1`` / ``rl2``, or ``rl1-nopenalty`` for the ablation without loop and length penalties."""
        return STAGE[self.round] + ("" if self.penalties else "-nopenalty")

    def rewards(self) -> RewardConfig:
        return RewardConfig(penalties=self.penalties, reasoning_budget=self.reasoning_budget)


# ---- the GRPO update -------------------------------------------------------------------------


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantage per rollout, which groups vary): ``(r - group mean) / (group std + eps)``.

    A group whose rewards are all equal gets advantage 0 everywhere.
    """
    groups = rewards.view(-1, group_size).float()
    std = groups.std(dim=1, keepdim=True, unbiased=False)
    varies = std[:, 0] > 1e-8
    advantages = (groups - groups.mean(dim=1, keepdim=True)) / (std + eps)
    return (advantages * varies[:, None]).flatten(), varies


def clipped_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip_eps: float) -> torch.Tensor:
    """Per-token PPO loss ``-min(ratio * A, clip(ratio, 1-eps, 1+eps) * A)``, A broadcast over tokens."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages[:, None]
    return -torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): ``exp(d) - d - 1`` with ``d = ref - policy`` (>= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


# ---- one update ------------------------------------------------------------------------------


@dataclass
class Learner:
    """The trained policy (prepared by accelerate), the frozen reference, and what updates them."""

    policy: Any
    reference: Any
    tokenizer: Any
    optimizer: Any
    accelerator: Any
    config: RLConfig
    rollouts: Any = None  # a LlamaRollouts: samples in llama.cpp instead of the learner
    step: int = 0  # the optimizer step the next samples belong to (for the rollouts' refresh)

    def generate(self, prompts: list[str], seed: int, temperature: float | None = None) -> list[Sample]:
        from botpsy.train.rollout import sample_batch

        c = self.config
        if self.rollouts is not None:
            self.rollouts.sync(self.accelerator.unwrap_model(self.policy), self.tokenizer, self.step)
            return self.rollouts.sample(self.tokenizer, prompts, max_new_tokens=c.max_new_tokens,
                                        temperature=c.temperature if temperature is None else temperature,
                                        top_p=c.top_p, seed=seed)
        return sample_batch(self.accelerator.unwrap_model(self.policy), self.tokenizer, prompts,
                            max_new_tokens=c.max_new_tokens, temperature=c.temperature if temperature is None else temperature,
                            top_p=c.top_p, seed=seed, batch_size=c.batch_size)


def load_reference(path: str, dtype: str = "float32"):
    """The KL anchor: loaded once, in eval mode, with gradients off (it never changes)."""
    from botpsy.model.checkpoint import load_checkpoint

    reference = load_checkpoint(path, dtype=dtype).model
    reference.eval()
    reference.requires_grad_(False)
    return reference


def update(learner: Learner, rollouts: list[Rollout]) -> dict[str, float]:
    """One GRPO update from a batch of rollouts (groups of ``group_size`` in order); returns its statistics."""
    from botpsy.train.rollout import length_chunks, score_completions

    c, pad_id = learner.config, learner.tokenizer.pad_token_id
    rewards = torch.tensor([r.reward for r in rollouts])
    advantages, varies = group_advantages(rewards, c.group_size)
    # Groups without variance carry no signal: their samples are left out of the update altogether.
    samples, sample_adv = [], []
    for i, rollout in enumerate(rollouts):
        if varies[i // c.group_size]:
            samples += rollout.samples
            sample_adv += [float(advantages[i])] * len(rollout.samples)
    stats = {"zero_variance_groups": int((~varies).sum()), "groups": int(varies.numel()), "loss": 0.0, "kl": 0.0,
             "trained_samples": len(samples)}
    if not samples:
        return stats
    chunks = length_chunks(samples, c.score_batch)
    adv = torch.tensor(sample_adv)
    score = lambda model, chunk: score_completions(model, [samples[i] for i in chunk], pad_id, keep_logits=False).token_logprobs
    with torch.no_grad():
        ref = [score(learner.reference, ch) for ch in chunks] if c.kl_coef else None
        # The sampling policy is the current one: on the first pass its log-probs are the ones being
        # trained (detached), so a separate pass is needed only for later epochs.
        old = [score(learner.policy, ch) for ch in chunks] if c.ppo_epochs > 1 else None
    tokens = sum(len(s.completion_ids) for s in samples)
    learner.policy.train()
    for _ in range(c.ppo_epochs):
        loss_sum = kl_sum = 0.0
        for k, ch in enumerate(chunks):
            scored = score_completions(learner.policy, [samples[i] for i in ch], pad_id, c.detach_prompt, keep_logits=False)
            logp = scored.token_logprobs
            kl = k3_kl(logp, ref[k]) if ref is not None else torch.zeros_like(logp)
            per_token = clipped_policy_loss(logp, logp.detach() if old is None else old[k], adv[ch], c.clip_eps)
            loss = ((per_token + c.kl_coef * kl) * scored.mask).sum() / tokens  # token-level mean over the batch
            learner.accelerator.backward(loss)
            loss_sum += float(loss.detach())
            kl_sum += float((kl.detach() * scored.mask).sum()) / tokens
        learner.accelerator.clip_grad_norm_(learner.policy.parameters(), c.grad_clip)
        learner.optimizer.step()
        learner.optimizer.zero_grad(set_to_none=True)
    stats.update(loss=loss_sum, kl=kl_sum)
    return stats


def summarize(rollouts: list[Rollout]) -> dict[str, Any]:
    """Mean reward and components, success, loop rate, reasoning tokens and completion length."""
    n = max(1, len(rollouts))
    samples = [s for r in rollouts for s in r.samples]
    keys = sorted({k for r in rollouts for k in r.parts})
    return {
        "reward": sum(r.reward for r in rollouts) / n,
        "components": {k: round(sum(r.parts.get(k, 0.0) for r in rollouts) / n, 4) for k in keys},
        "success_rate": sum(r.success for r in rollouts) / n,
        "loop_rate": sum(r.looped for r in rollouts) / n,
        "reasoning_tokens": sum(r.reasoning_tokens for r in rollouts) / n,
        "completion_tokens": sum(len(s.completion_ids) for s in samples) / max(1, len(samples)),
        "turns": len(samples) / n,
    }


# ---- the run -----------------------------------------------------------------------------------


def load_items(config: RLConfig, split: str) -> list:
    """Round 1: first-turn prompts from the chat examples; round 2: the tasks themselves."""
    if config.round == 1:
        return first_turn_items(config, split)
    from botpsy.train.sft import read_jsonl
    from botpsy.world import Task

    return [Task.from_dict(t) for t in read_jsonl(Path(config.tasks) / f"{split}.jsonl") if t["kind"] in config.kinds]


@lru_cache(maxsize=64)
def _permutation(n: int, seed: int, epoch: int) -> tuple[int, ...]:
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return tuple(order)


def step_indices(n_items: int, step: int, per_step: int, seed: int) -> list[int]:
    """Items for ``step``: consecutive slices of a fresh shuffle per pass, a pure function of (seed, step)."""
    out = []
    for k in range(step * per_step, (step + 1) * per_step):
        epoch, position = divmod(k, n_items)
        out.append(_permutation(n_items, seed, epoch)[position])
    return out


def collect(learner: Learner, items: list, seed: int, group_size: int, turn_reward: TurnReward | None,
            temperature: float | None = None) -> list[Rollout]:
    generate = lambda prompts, s: learner.generate(prompts, s, temperature)
    if learner.config.round == 1:
        reward = turn_reward or default_turn_reward(learner.config)
        return first_turn_rollouts(generate, learner.tokenizer, items, group_size, reward, seed)
    return episode_rollouts(generate, learner.tokenizer, items, learner.config, group_size, seed)


def evaluate_dev(learner: Learner, items: list, turn_reward: TurnReward | None = None) -> dict[str, Any]:
    """Greedy rollouts of held dev tasks: mean reward, success, loop rate."""
    if not items:
        return {"tasks": 0}
    rollouts = collect(learner, items, 0, 1, turn_reward, temperature=0.0)
    metrics = summarize(rollouts)
    return {"tasks": len(items), **{k: metrics[k] for k in ("reward", "success_rate", "loop_rate", "reasoning_tokens")}}


def train(config: RLConfig, turn_reward: TurnReward | None = None) -> dict | None:
    """The RL loop; returns the final metrics, or None when interrupted on purpose (tests)."""
    from accelerate import Accelerator

    from botpsy.train import common
    from botpsy.train.lora import load_for_training, trainable_parameters

    config.dtype = common.resolve_dtype(config.dtype)  # auto: bfloat16 only where the hardware has it
    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.out)
    ckpt, model, adapter_meta = load_for_training(config.policy, config.lora_rank, dtype=config.dtype)
    items = load_items(config, "train")
    if not items:
        raise ValueError(f"no training items of kinds {config.kinds} for round {config.round}")
    dev_items = load_items(config, "dev")[: config.eval_tasks] if config.eval_tasks else []
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=config.lr, weight_decay=config.weight_decay)
    policy, optimizer = accelerator.prepare(model, optimizer)
    learner = Learner(policy, load_reference(config.reference, config.dtype), ckpt.tokenizer, optimizer, accelerator, config)
    if config.rollout_backend == "llama":
        from botpsy.train.llama_rollout import LlamaRollouts

        learner.rollouts = LlamaRollouts(out / "rollout_policy", adapter_meta.get("base"), config.rollout_refresh, config.threads)
    try:
        return train_steps(config, learner, ckpt, adapter_meta, items, dev_items, out, turn_reward)
    finally:
        if learner.rollouts is not None:
            learner.rollouts.close()


def train_steps(config: RLConfig, learner: Learner, ckpt, adapter_meta: dict, items: list, dev_items: list, out: Path,
                turn_reward: TurnReward | None) -> dict | None:
    """The steps of ``train`` after loading: resume, update, log, save; the final dev evaluation."""
    from tqdm import tqdm

    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.train import common

    accelerator, policy = learner.accelerator, learner.policy
    progress = common.Progress()
    accelerator.register_for_checkpointing(progress)
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, out / f"config.json.{config.stage_name}")
    if config.resume and common.load_training_state(accelerator, out):
        print(f"[{config.stage_name}] resuming at step {progress.step}")
    curves = common.CurveWriter(out / "curves.jsonl", progress.step)
    bar = tqdm(total=config.steps, initial=progress.step, desc=config.stage_name, unit="step",
               disable=not accelerator.is_main_process)
    while progress.step < config.steps:
        started = time.perf_counter()
        chosen = step_indices(len(items), progress.step, config.prompts_per_step, config.seed)
        mine = chosen[accelerator.process_index :: accelerator.num_processes]
        learner.step = progress.step
        rollouts = collect(learner, [items[i] for i in mine], config.seed * 100_003 + progress.step,
                           config.group_size, turn_reward)
        stats = update(learner, rollouts)
        progress.step += 1
        record = {"step": progress.step, **summarize(rollouts), **stats, "seconds": round(time.perf_counter() - started, 2)}
        if learner.rollouts is not None:  # the step whose adapter sampled this step's rollouts
            record["rollout_policy_step"] = learner.rollouts.loaded_step
        if config.eval_every and progress.step % config.eval_every == 0 and progress.step < config.steps:
            learner.step = progress.step
            if learner.rollouts is not None:
                learner.rollouts.expire()  # the dev episodes come from the updated weights
            record["dev"] = evaluate_dev(learner, dev_items, turn_reward)
        if accelerator.is_main_process:
            curves.write(record)
        bar.update(1)
        bar.set_postfix(reward=f"{record['reward']:.3f}", kl=f"{record['kl']:.4f}", loop=f"{record['loop_rate']:.2f}")
        if progress.step % config.save_every == 0:
            common.save_training_state(accelerator, out)
        if config.interrupt_after is not None and progress.step >= config.interrupt_after:
            bar.close()
            return None
    bar.close()
    common.save_training_state(accelerator, out)
    learner.step = progress.step
    if learner.rollouts is not None:
        learner.rollouts.expire()  # the final dev episodes come from the final weights
    dev = evaluate_dev(learner, dev_items, turn_reward)
    curves.write({"step": progress.step, "dev": dev})
    result = {"steps": progress.step, "dev": dev}
    meta = {"init": config.policy, "init_stage": ckpt.meta.get("stage"), "reference": config.reference,
            "round": config.round, **adapter_meta,
            "config": vars(config), "train_items": len(items), **result}
    if learner.rollouts is not None:
        meta["rollouts"] = learner.rollouts.describe()
    if accelerator.is_main_process:
        save_checkpoint(accelerator.unwrap_model(policy), ckpt.tokenizer, out, stage=config.stage_name, meta=meta)
    return result


# ---- dry run -------------------------------------------------------------------------------------


def dry_run(config: RLConfig) -> int:
    from botpsy.model.checkpoint import read_model_type

    plan: dict[str, Any] = {
        "round": config.round, "stage": config.stage_name, "policy": config.policy,
        "policy_model_type": read_model_type(config.policy), "reference": config.reference,
        "reference_model_type": read_model_type(config.reference), "out": config.out, "kinds": config.kinds,
        "train_items": len(load_items(config, "train")), "steps": config.steps,
        "rollouts_per_step": config.prompts_per_step * config.group_size,
        "completion_tokens_per_step_max": config.prompts_per_step * config.group_size * config.max_new_tokens
        * (config.max_turns if config.round == 2 else 1),
        "penalties": config.penalties,
    }
    ok = True
    if config.rollout_endpoint:
        plan["rollout_endpoint"] = check_endpoint(config.rollout_endpoint)
        ok = plan["rollout_endpoint"]["reachable"]
        if not ok:
            print(f"botpsy rl: rollout endpoint {config.rollout_endpoint} is not reachable: "
                  f"{plan['rollout_endpoint']['error']}", file=sys.stderr)
    if config.accelerate_config:
        from botpsy.train.launch import accelerate_plan

        argv = ["rl", "--round", str(config.round), "--policy", config.policy, "--out", config.out]
        launch = accelerate_plan(config.accelerate_config, config.max_new_tokens, 1, argv)
        launch.pop("tokens_per_optimizer_step")
        plan["launch_plan"] = launch
    emit(plan, config.json, lambda p: "\n".join(f"{k}: {v}" for k, v in p.items()))
    return 0 if ok else 1


def main(config: RLConfig) -> int:
    if config.dry_run:
        return dry_run(config)
    if config.rollout_endpoint:
        raise ValueError("--rollout-endpoint is checked by --dry-run only: botpsy does not push the learner's "
                         "weights to the server, so its rollouts would come from a stale policy")
    result = train(config)
    if result is None:
        return 0
    emit(result, config.json, lambda r: f"{config.stage_name}: {r['steps']} steps, dev reward "
         f"{r['dev'].get('reward', 0):.3f}, dev success {r['dev'].get('success_rate', 0):.0%} -> {config.out}")
    return 0
