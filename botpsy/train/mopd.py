"""Stage 2b of the recipe: multi-teacher on-policy distillation (MOPD) into the SFT student.

Each step draws prompts of every task group from the training data (the context before an
assistant turn: system, tools, user turns, tool results), samples completions from the
current student (on-policy, no grad, ``rollout.sample_batch``; or in llama.cpp from the learner's
adapter, ``--rollout-backend llama``, ``botpsy.train.llama_rollout``), routes each completion to
its group's teacher (``teachers.load_teachers``), and minimises the per-token divergence
between the student's and the teacher's next-token distributions over the whole vocabulary
at every sampled position:

* ``reverse_kl`` (default): ``sum_v p_s(v) (log p_s(v) - log p_t(v))``, mode-seeking, the
  on-policy distillation objective;
* ``jsd``: the generalized Jensen-Shannon divergence of GKD with ``--jsd-beta``
  (``M = beta p_t + (1 - beta) p_s``; ``beta KL(p_t||M) + (1 - beta) KL(p_s||M)``).

``--anchor W`` adds ``W`` times the reverse KL to a frozen copy of the starting student on the same
tokens. A group's teacher pulls the student only on that group's prompts, but what it teaches can
spread to the others (on the real student, MOPD spread the special-case refusal to offered tools);
the anchor holds the student near where it started wherever no teacher pulls harder.

Only sampled completion tokens carry loss (prompt tokens are masked); the loss is the mean
over completion tokens of the step. AdamW with warm-up + cosine, gradient clipping, exact
resume (``common.save_training_state``), a progress bar, ``OUT/curves.jsonl`` (loss, KL per
group, mean completion length, share of finished completions), and every ``--eval-every``
steps and at the end the student's greedy first-turn accuracy on each group's dev examples
(``rollout.first_turn_accuracy``: exact gold calls, and no call where the gold first turn
makes none, as in most special cases) next to its teacher's. ``OUT/meta.json`` records the
final per-group student vs teacher accuracy and the share of the gap closed (on
``first_turn_rate``).

On one CPU::

    botpsy teachers --init runs/speedrun/sft --out runs/speedrun/teachers
    botpsy mopd --student runs/speedrun/sft --teachers runs/speedrun/teachers/manifest.json --out runs/speedrun/mopd

For the real 0.8B model on GPUs, the same stage runs under ``accelerate launch`` (each process
draws its own prompts; ``configs/accelerate/*.yaml``), teachers are 4B-class models served by
vLLM and registered with ``botpsy teachers --teacher-endpoint GROUP=URL`` (scored through
``/v1/completions`` with ``echo=True, logprobs=K``; the divergence is then the exact divergence
of the top-K-plus-rest distributions, a lower bound of the full-vocabulary one), and student
rollouts can come from a vLLM server (``--rollout-endpoint URL``)::

    botpsy mopd --student /models/sft --teachers runs/big/teachers/manifest.json --out runs/big/mopd \\
        --rollout-endpoint http://127.0.0.1:8001/v1 --dry-run --accelerate-config configs/accelerate/zero2.yaml

``--dry-run`` loads everything, checks the teachers, the accelerate config and the rollout
endpoint, prints the plan and exits. A rollout server must receive the student's weights
after every optimizer step to stay on-policy (as TRL's ``vllm-serve`` does); botpsy does not
implement that weight sync, so training with ``--rollout-endpoint`` stops with an error
saying so and rollouts run in-process.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from botpsy.config import save_config
from botpsy.output import emit, table
from botpsy.train.rollout import check_endpoint
from botpsy.train.teachers import GROUPS, TeacherScores


@dataclass
class MOPDConfig:
    """Distil one teacher per task group into the SFT student on the student's own samples."""

    student: str = field(default="runs/speedrun/sft", metadata={"help": "Student checkpoint to start from (the SFT stage)."})
    teachers: str = field(default="runs/speedrun/teachers/manifest.json", metadata={"help": "Teachers manifest written by `botpsy teachers`."})
    data: str = field(default="runs/speedrun/data", metadata={"help": "Folder with train.jsonl (prompts) and dev.jsonl (evaluation)."})
    out: str = field(default="runs/speedrun/mopd", metadata={"help": "Output checkpoint folder (also train_state/, curves.jsonl)."})
    groups: str = field(default=",".join(GROUPS), metadata={"help": "Comma-separated task groups to draw prompts from; each needs a teacher."})
    steps: int = field(default=50, metadata={"help": "Optimizer steps."})
    prompts_per_step: int = field(default=16, metadata={"help": "Prompts sampled per step, spread evenly over the groups."})
    later_turns: bool = field(default=True, metadata={"help": "Also use the contexts of later assistant turns (after tool results) as prompts, not only the first turn."})
    max_prompt_tokens: int = field(default=2048, metadata={"help": "Longer prompts are left out of the pool."})
    max_new_tokens: int = field(default=96, metadata={"help": "Completion length limit of each rollout."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the rollouts."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling threshold of the rollouts."})
    rollout_batch_size: int = field(default=16, metadata={"help": "Prompts generated together."})
    score_batch: int = field(default=0, metadata={"help": "Rollouts per scoring forward/backward pass, similar lengths together, gradients accumulated (0: all in one pass). With --detach-prompt on a CPU, 1 keeps activation memory to the completions."})
    divergence: str = field(default="reverse_kl", metadata={"help": "Per-token divergence to minimise.", "choices": ["reverse_kl", "jsd"]})
    jsd_beta: float = field(default=0.5, metadata={"help": "With --divergence jsd: the teacher's weight beta in M = beta p_t + (1 - beta) p_s (0 < beta < 1)."})
    lora_rank: int = field(default=0, metadata={"help": "Train a LoRA adapter (botpsy.train.lora): a student that is an adapter folder (the real student's SFT stage) keeps training its own adapter, anything else gets a fresh one of this rank; OUT then holds one adapter on the student's base. 0: every weight trains (the tiny model)."})
    dtype: str = field(default="float32", metadata={"help": "Student weight dtype while training (auto: bfloat16 where the hardware computes it natively, else float32; bfloat16 for the pretrained student; a LoRA adapter itself stays float32).", "choices": ["auto", "float32", "bfloat16"]})
    detach_prompt: bool = field(default=False, metadata={"help": "Encode each rollout's prompt without gradient (rollout.score_completions): much faster for the 0.5B student, whose prompts are mostly system prompt and tools."})
    anchor: float = field(default=0.0, metadata={"help": "Weight of KL(student || the student it started from), on the same completion tokens, added to the teacher divergence: it holds the student near its start where no teacher pulls it (a frozen copy of --student is loaded for it). 0: none."})
    lr: float = field(default=2e-4, metadata={"help": "Peak learning rate."})
    min_lr_ratio: float = field(default=0.1, metadata={"help": "Final learning rate as a fraction of the peak."})
    warmup_steps: int = field(default=5, metadata={"help": "Linear warm-up steps."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    grad_clip: float = field(default=1.0, metadata={"help": "Gradient-norm clip."})
    eval_every: int = field(default=0, metadata={"help": "Steps between dev first-turn checks (0: only before training and at the end)."})
    eval_examples: int = field(default=24, metadata={"help": "Dev examples per group whose first turn is generated greedily and scored (calls against the gold calls; no call where none is due)."})
    eval_max_new_tokens: int = field(default=160, metadata={"help": "Generation limit for the dev first-turn check."})
    save_every: int = field(default=10, metadata={"help": "Steps between resumable checkpoints."})
    resume: bool = field(default=True, metadata={"help": "Continue from OUT/train_state if it exists."})
    seed: int = field(default=0, metadata={"help": "Seed for prompt draws and sampling."})
    threads: int = field(default=0, metadata={"help": "Torch CPU threads (0: torch's default)."})
    rollout_backend: str = field(default="torch", metadata={"help": "Where the student's rollouts are sampled: torch (the learner itself) or llama (llama.cpp with the learner's adapter on its GGUF base, rewritten every --rollout-refresh steps; a LoRA student only; on the 0.5B on 2 CPU cores 16.8 against 2.5-3.9 tokens/s; botpsy.train.llama_rollout).", "choices": ["torch", "llama"]})
    rollout_refresh: int = field(default=1, metadata={"help": "With --rollout-backend llama: optimizer steps between adapter refreshes (the sampler lags the learner by at most this minus one)."})
    rollout_endpoint: str | None = field(default=None, metadata={"help": "OpenAI-compatible server (vLLM) for student rollouts on GPUs; checked by --dry-run (training needs weight sync, not implemented)."})
    interrupt_after: int | None = field(default=None, metadata={"help": "Testing aid: stop after this step as if killed (state saved at the last checkpoint only)."})
    dry_run: bool = field(default=False, metadata={"help": "Load student and teachers, check the plan (accelerate config, rollout endpoint), print it and exit."})
    accelerate_config: str | None = field(default=None, metadata={"help": "With --dry-run: check this accelerate config (configs/accelerate/*.yaml) and show how it would launch."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


# --------------------------------------------------------------------------- divergences


def reverse_kl(student_logprobs: torch.Tensor, teacher_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-position ``KL(p_s || p_t)`` over the last dimension; no gradient reaches the teacher.

    >>> s = torch.log(torch.tensor([[0.5, 0.5]])); t = torch.log(torch.tensor([[0.9, 0.1]]))
    >>> round(float(reverse_kl(s, t)[0]), 4)  # 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1)
    0.5108
    """
    teacher_logprobs = teacher_logprobs.detach()
    return (student_logprobs.exp() * (student_logprobs - teacher_logprobs)).sum(-1)


def generalized_jsd(student_logprobs: torch.Tensor, teacher_logprobs: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """Per-position generalized JSD (GKD): ``beta KL(p_t||M) + (1 - beta) KL(p_s||M)``, ``M = beta p_t + (1 - beta) p_s``.

    Symmetric at ``beta = 0.5``, where it is the ordinary Jensen-Shannon divergence.
    """
    if not 0.0 < beta < 1.0:
        raise ValueError(f"jsd beta must lie strictly between 0 and 1, got {beta}")
    teacher_logprobs = teacher_logprobs.detach()
    mixture = torch.logsumexp(torch.stack([teacher_logprobs + math.log(beta), student_logprobs + math.log(1 - beta)]), dim=0)
    to_teacher = (teacher_logprobs.exp() * (teacher_logprobs - mixture)).sum(-1)
    to_student = (student_logprobs.exp() * (student_logprobs - mixture)).sum(-1)
    return beta * to_teacher + (1 - beta) * to_student


FLOOR = -1e4  # log-prob of an absent sparse entry: exp() is exactly 0 in float32, and no inf - inf


def sparse_buckets(student_logprobs: torch.Tensor, scores: TeacherScores) -> tuple[torch.Tensor, torch.Tensor]:
    """Student and teacher log-probs over the teacher's top-K tokens plus one "rest" bucket.

    An endpoint teacher reports only its top K tokens per position. Both distributions are
    coarsened the same way (K tokens + everything else), so the divergence between them is
    exact for the coarse distributions and a lower bound of the full one.
    """
    valid = scores.valid
    student_top = student_logprobs.gather(-1, scores.ids).masked_fill(~valid, FLOOR)
    teacher_top = scores.logprobs.to(student_logprobs.device).masked_fill(~valid, FLOOR)
    rest = lambda top: torch.log((1 - top.exp().sum(-1, keepdim=True)).clamp(min=1e-8))
    return torch.cat([student_top, rest(student_top)], -1), torch.cat([teacher_top, rest(teacher_top)], -1)


def token_divergence(student_logits: torch.Tensor, scores: TeacherScores, divergence: str = "reverse_kl",
                     beta: float = 0.5) -> torch.Tensor:
    """[B, T] divergence between the student's logits [B, T, V] and a teacher's scores at the same positions."""
    student = torch.log_softmax(student_logits.float(), dim=-1)
    if scores.sparse:
        student, teacher = sparse_buckets(student, scores)
    else:
        teacher = scores.logprobs.to(student.device)
    if divergence == "reverse_kl":
        return reverse_kl(student, teacher)
    if divergence == "jsd":
        return generalized_jsd(student, teacher, beta)
    raise ValueError(f"unknown divergence {divergence!r} (reverse_kl or jsd)")


# --------------------------------------------------------------------------- prompts


def prompt_pools(rows: list[dict], groups: list[str], tokenizer, later_turns: bool, max_tokens: int) -> dict[str, list[str]]:
    """group -> rendered prompts (first turns, plus later turns' contexts when ``later_turns``)."""
    from botpsy.train.rollout import turn_prompts

    pools: dict[str, list[str]] = {g: [] for g in groups}
    for row in rows:
        if row.get("group") in pools:
            prompts = turn_prompts(row)
            pools[row["group"]].extend(prompts if later_turns else prompts[:1])
    for group, prompts in pools.items():
        lengths = [len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]] if prompts else []
        pools[group] = [p for p, n in zip(prompts, lengths) if n <= max_tokens]
        if not pools[group]:
            raise ValueError(f"no training prompts of group {group!r} fit --max-prompt-tokens {max_tokens}")
    return pools


def draw_prompts(pools: dict[str, list[str]], n: int, seed: int, step: int, process: int = 0) -> list[tuple[str, str]]:
    """``n`` (group, prompt) pairs for ``step``: groups in turn, a pure function of its arguments."""
    rng = random.Random(f"{seed}-{step}-{process}")
    groups = list(pools)
    return [(g, rng.choice(pools[g])) for g in (groups[(step + i) % len(groups)] for i in range(n))]


# --------------------------------------------------------------------------- one step


def mopd_loss(model, samples, groups: list[str], teachers: dict, pad_id: int, divergence: str, beta: float,
              detach_prompt: bool = False, anchor=None, anchor_weight: float = 0.0):
    """(mean divergence over completion tokens, reverse KL per group): one student forward, one teacher
    call per group. With ``anchor`` (a frozen copy of the starting student, scored like a teacher),
    ``anchor_weight`` times the reverse KL to it is added at every completion token, and its mean is
    reported under the key ``"anchor"``."""
    from botpsy.train.rollout import score_completions

    student = score_completions(model, samples, pad_id, detach_prompt)
    total, tokens, kl = student.logits.new_zeros(()), student.mask.sum().clamp(min=1), {}
    if anchor is not None and anchor_weight > 0:
        start = anchor.score(samples, pad_id).logprobs.to(student.logits.device)
        steps = start.shape[1]
        to_start = reverse_kl(torch.log_softmax(student.logits[:, :steps].float(), dim=-1), start)
        mask = student.mask[:, :steps]
        total = total + anchor_weight * (to_start * mask).sum()
        kl["anchor"] = float((to_start.detach() * mask).sum() / mask.sum().clamp(min=1))
    for group in sorted(set(groups)):
        rows = [i for i, g in enumerate(groups) if g == group]
        scores = teachers[group].score([samples[i] for i in rows], pad_id)
        steps = scores.logprobs.shape[1]
        logits, mask = student.logits[rows, :steps], student.mask[rows, :steps]
        per_token = token_divergence(logits, scores, divergence, beta)
        total = total + (per_token * mask).sum()
        with torch.no_grad():
            plain_kl = per_token if divergence == "reverse_kl" else token_divergence(logits, scores, "reverse_kl")
            kl[group] = float((plain_kl * mask).sum() / mask.sum().clamp(min=1))
    return total / tokens, kl


def mopd_backward(model, samples, groups: list[str], teachers: dict, pad_id: int, config, backward,
                  anchor=None) -> tuple[float, dict]:
    """``mopd_loss`` over the rollouts in passes of ``config.score_batch``, each pass's loss weighted
    by its share of the completion tokens and handed to ``backward``: the gradient of the batch's
    token mean, without holding every pass's activations at once. Returns (loss, KL per group and
    to the ``anchor``)."""
    from botpsy.train.rollout import length_chunks

    tokens = max(1, sum(len(s.completion_ids) for s in samples))
    loss_sum, kl_sum, kl_tokens = 0.0, {}, {}
    for chunk in length_chunks(samples, config.score_batch):
        part, part_groups = [samples[i] for i in chunk], [groups[i] for i in chunk]
        loss, kl = mopd_loss(model, part, part_groups, teachers, pad_id, config.divergence, config.jsd_beta,
                             config.detach_prompt, anchor, getattr(config, "anchor", 0.0))
        share = sum(len(s.completion_ids) for s in part) / tokens
        backward(loss * share)
        loss_sum += float(loss.detach()) * share
        for group, value in kl.items():
            n = sum(len(s.completion_ids) for s, g in zip(part, part_groups) if g == group or group == "anchor")
            kl_sum[group] = kl_sum.get(group, 0.0) + value * n
            kl_tokens[group] = kl_tokens.get(group, 0) + n
    return loss_sum, {g: kl_sum[g] / max(1, kl_tokens[g]) for g in kl_sum}


def rollout_stats(samples) -> dict:
    return {"completion_tokens_mean": sum(len(s.completion_ids) for s in samples) / max(1, len(samples)),
            "finished_share": sum(s.finished for s in samples) / max(1, len(samples))}


# --------------------------------------------------------------------------- evaluation


def evaluate_groups(model, tokenizer, dev_by_group: dict[str, list[dict]], config) -> dict:
    """group -> greedy first-turn accuracy on that group's dev examples (batched)."""
    from botpsy.train.rollout import first_turn_accuracy

    return {g: first_turn_accuracy(model, tokenizer, rows, config.eval_max_new_tokens, config.rollout_batch_size)
            for g, rows in dev_by_group.items()}


def manifest_scores(manifest: dict, config, key: str, groups) -> dict | None:
    """The dev scores ``key`` (``dev_call``: each teacher's, ``student_dev_call``: the student's)
    that `botpsy teachers` already took on the same examples, or None if any is missing or was
    taken with other settings. Generating them again costs minutes per group on a CPU."""
    settings = manifest.get("dev_eval") or {}
    if settings.get("examples") != config.eval_examples or settings.get("max_new_tokens") != config.eval_max_new_tokens:
        return None
    if key == "student_dev_call" and Path(manifest.get("student", "")).resolve() != Path(config.student).resolve():
        return None
    scores = {g: manifest.get("teachers", {}).get(g, {}).get(key) for g in groups}
    return scores if all(scores.values()) else None


def teacher_accuracy(teachers: dict, tokenizer, dev_by_group, config, out: Path, manifest: dict) -> dict:
    """Each teacher on its own group, on the student's examples: from the manifest when `botpsy
    teachers` scored them the same way, else generated here; cached in OUT/teacher_eval.json."""
    # The teachers were loaded from this manifest, so its scores are of these very checkpoints.
    if manifest_scores(manifest, config, "dev_call", [g for g, t in teachers.items() if t.kind == "local"]) is not None:
        return {g: manifest["teachers"][g].get("dev_call") for g in teachers}  # endpoints: what was recorded, as below
    cache = out / "teacher_eval.json"
    key = {"eval_examples": config.eval_examples, "eval_max_new_tokens": config.eval_max_new_tokens,
           "teachers": {g: getattr(t, "path", None) or getattr(t, "url", None) for g, t in teachers.items()}}
    if cache.is_file() and (saved := json.loads(cache.read_text())).get("settings") == key and set(saved["groups"]) >= set(teachers):
        return saved["groups"]
    result = {}
    for group, teacher in teachers.items():
        if teacher.kind == "local":
            result[group] = evaluate_groups(teacher.model, tokenizer, {group: dev_by_group[group]}, config)[group]
        else:  # an endpoint teacher is not generated from here; use what the manifest recorded
            result[group] = manifest.get("teachers", {}).get(group, {}).get("dev_call")
    cache.write_text(json.dumps({"settings": key, "groups": result}, indent=2) + "\n")
    return result


def gap_closed(initial: dict, final: dict, teacher: dict | None, metric: str = "first_turn_rate") -> float | None:
    """Share of the student-teacher gap closed by MOPD on ``metric`` (None when there was no gap).

    >>> gap_closed({"first_turn_rate": 0.2}, {"first_turn_rate": 0.5}, {"first_turn_rate": 0.8})
    0.5
    """
    if not teacher or teacher.get(metric) is None or teacher[metric] <= initial[metric]:
        return None
    return round((final[metric] - initial[metric]) / (teacher[metric] - initial[metric]), 4)


# --------------------------------------------------------------------------- the stage


def dry_run_plan(config: MOPDConfig, plan: dict) -> dict:
    """The plan plus the rollout endpoint check and the accelerate launch plan, when given."""
    if config.rollout_endpoint:
        plan["rollout_endpoint"] = check_endpoint(config.rollout_endpoint, timeout_s=3)
    if config.accelerate_config:
        from botpsy.train.launch import accelerate_plan

        argv = ["mopd", "--student", config.student, "--teachers", config.teachers, "--data", config.data, "--out", config.out]
        launch = accelerate_plan(config.accelerate_config, config.prompts_per_step * config.max_new_tokens, 1, argv)
        launch["completion_tokens_per_optimizer_step_max"] = launch.pop("tokens_per_optimizer_step")
        plan["launch_plan"] = launch
    return plan


def main(config: MOPDConfig) -> int:
    from accelerate import Accelerator

    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.train.common import resolve_dtype
    from botpsy.train.lora import load_for_training, trainable_parameters
    from botpsy.train.rollout import call_examples
    from botpsy.train.sft import read_jsonl
    from botpsy.train.teachers import load_teachers

    config.dtype = resolve_dtype(config.dtype)  # auto: bfloat16 only where the hardware has it
    if config.threads:
        torch.set_num_threads(config.threads)
    if config.divergence == "jsd" and not 0.0 < config.jsd_beta < 1.0:
        raise ValueError(f"--jsd-beta must lie strictly between 0 and 1, got {config.jsd_beta}")
    if config.rollout_refresh < 1:
        raise ValueError(f"--rollout-refresh must be at least 1 step, got {config.rollout_refresh}")
    groups = [g.strip() for g in config.groups.split(",") if g.strip()]
    if config.anchor > 0 and "anchor" in groups:
        raise ValueError("a task group cannot be called 'anchor' while --anchor is on (its KL is logged under that name)")
    out = Path(config.out)
    ckpt, model, adapter_meta = load_for_training(config.student, config.lora_rank, dtype=config.dtype)
    tokenizer = ckpt.tokenizer
    rollouts = None
    if config.rollout_backend == "llama":
        from botpsy.train.llama_rollout import LlamaRollouts

        rollouts = LlamaRollouts(out / "rollout_policy", adapter_meta.get("base"), config.rollout_refresh, config.threads)
    teachers = load_teachers(config.teachers, groups, tokenizer, model.get_output_embeddings().weight.shape[0])
    manifest = json.loads(Path(config.teachers).read_text())
    pools = prompt_pools(read_jsonl(Path(config.data) / "train.jsonl"), groups, tokenizer, config.later_turns, config.max_prompt_tokens)
    dev_rows = read_jsonl(Path(config.data) / "dev.jsonl")
    dev_by_group = {g: call_examples([r for r in dev_rows if r.get("group") == g], config.eval_examples) for g in groups}
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    plan = {
        "student": config.student, "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in trainable_parameters(model)),
        "teachers": {g: {"kind": t.kind, "source": getattr(t, "path", None) or getattr(t, "url", None)} for g, t in teachers.items()},
        "prompt_pool": {g: len(p) for g, p in pools.items()}, "dev_call_examples": {g: len(r) for g, r in dev_by_group.items()},
        "divergence": config.divergence, "prompts_per_step": config.prompts_per_step,
        "rollouts": config.rollout_endpoint or ("llama.cpp, the adapter refreshed every "
                                                f"{config.rollout_refresh} step(s)" if rollouts else "in-process (rollout.sample_batch)"),
        "distributed_type": str(accelerator.distributed_type), "num_processes": accelerator.num_processes,
        "accelerate_config": os.environ.get("ACCELERATE_CONFIG_FILE"),
    }
    if config.dry_run:
        emit(dry_run_plan(config, plan), config.json, lambda p: "\n".join(f"{k}: {v}" for k, v in p.items()))
        return 0
    if config.rollout_endpoint:
        raise ValueError("--rollout-endpoint needs the server to load the student's weights after every optimizer step "
                         "(TRL's vllm-serve weight sync), which botpsy does not implement yet; check a GPU plan with "
                         "--dry-run and train with in-process rollouts")
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, out / "config.json.mopd")
    for teacher in teachers.values():
        teacher.to(accelerator.device)
    teacher_eval = teacher_accuracy(teachers, tokenizer, dev_by_group, config, out, manifest)
    anchor = None
    if config.anchor > 0:
        import copy

        from botpsy.train.teachers import LocalTeacher

        # The student as it starts (a resumed run restores its trained weights only in train_loop), frozen.
        # A copy rather than a fresh load: merging a LoRA adapter into a bfloat16 base rounds away
        # about as much as the adapter changes.
        anchor = LocalTeacher("anchor", config.student, copy.deepcopy(model), tokenizer)
        anchor.to(accelerator.device)
    try:
        result = train_loop(config, model, tokenizer, teachers, pools, dev_by_group, teacher_eval, accelerator, out, manifest,
                            anchor, rollouts)
    finally:
        if rollouts is not None:
            rollouts.close()
    if result is None:  # interrupted on purpose (tests)
        return 0
    if rollouts is not None:
        plan["rollouts"] = rollouts.describe()
    model = accelerator.unwrap_model(model)
    meta = {"student": config.student, "student_stage": ckpt.meta.get("stage"), "teachers_manifest": config.teachers,
            "data": config.data, **adapter_meta,
            "config": vars(config), **plan, **result}
    if accelerator.is_main_process:
        save_checkpoint(model, tokenizer, out, stage="mopd", meta=meta)
    emit(result, config.json, lambda r: f"mopd: {r['steps']} steps, final loss {r['final_loss']}\n"
         + table(summary_rows(r["groups"])) + f"\n(dev first turns right: exact gold calls, or no call where none is due) -> {out}")
    return 0


def summary_rows(groups: dict) -> list[dict]:
    percent = lambda entry: "-" if not entry else f"{entry['first_turn_rate']:.0%}"
    return [{"group": g, "student before": percent(v["student_initial"]), "student after": percent(v["student"]),
             "teacher": percent(v["teacher"]), "gap closed": "-" if v["gap_closed"] is None else f"{v['gap_closed']:.0%}"}
            for g, v in groups.items()]


def last_logged(curves: Path, key: str):
    """The last value of ``key`` in a curves file (a resumed run may not have logged it itself)."""
    values = [r[key] for r in map(json.loads, curves.read_text().splitlines()) if key in r] if curves.is_file() else []
    return values[-1] if values else None


def train_loop(config, model, tokenizer, teachers, pools, dev_by_group, teacher_eval, accelerator, out, manifest: dict,
               anchor=None, rollouts=None):
    """The distillation loop; returns the final metrics, or None when interrupted on purpose.
    ``rollouts`` (a ``LlamaRollouts``) samples instead of the learner when given."""
    from tqdm import tqdm

    from botpsy.train import common
    from botpsy.train.lora import trainable_parameters
    from botpsy.train.rollout import sample_batch

    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, common.cosine_with_warmup(config.warmup_steps, config.steps, config.min_lr_ratio))
    model, optimizer, schedule = accelerator.prepare(model, optimizer, schedule)
    progress = common.Progress()
    accelerator.register_for_checkpointing(progress)
    if config.resume and common.load_training_state(accelerator, out):
        print(f"[mopd] resuming at step {progress.step}")
    curves = common.CurveWriter(out / "curves.jsonl", progress.step)
    initial_file = out / "eval_initial.json"
    if initial_file.is_file():
        initial = json.loads(initial_file.read_text())
    else:
        initial = manifest_scores(manifest, config, "student_dev_call", dev_by_group) or \
            evaluate_groups(accelerator.unwrap_model(model), tokenizer, dev_by_group, config)
        initial_file.write_text(json.dumps(initial, indent=2) + "\n")
        curves.write({"step": 0, "eval": {"student": initial, "teacher": teacher_eval}})
    pad_id, speed = tokenizer.pad_token_id, common.Throughput()
    bar = tqdm(total=config.steps, initial=progress.step, desc="mopd", unit="step", disable=not accelerator.is_main_process)
    while progress.step < config.steps:
        step = progress.step
        drawn = draw_prompts(pools, config.prompts_per_step, config.seed, step, accelerator.process_index)
        started = time.perf_counter()
        prompts, seed = [p for _, p in drawn], config.seed * 1_000_003 + step
        if rollouts is not None:
            rollouts.sync(accelerator.unwrap_model(model), tokenizer, step)
            samples = rollouts.sample(tokenizer, prompts, max_new_tokens=config.max_new_tokens,
                                      temperature=config.temperature, top_p=config.top_p, seed=seed)
        else:
            samples = sample_batch(accelerator.unwrap_model(model), tokenizer, prompts, max_new_tokens=config.max_new_tokens,
                                   temperature=config.temperature, top_p=config.top_p, seed=seed,
                                   batch_size=config.rollout_batch_size)
        rollout_s = time.perf_counter() - started
        model.train()
        loss, kl = mopd_backward(model, samples, [g for g, _ in drawn], teachers, pad_id, config, accelerator.backward, anchor)
        accelerator.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        progress.step += 1
        completion_tokens = sum(len(s.completion_ids) for s in samples)
        progress.tokens_seen += completion_tokens
        record = {"step": progress.step, "loss": loss, "lr": schedule.get_last_lr()[0], "kl": kl, **rollout_stats(samples),
                  "rollout_s": round(rollout_s, 2), "step_s": round(time.perf_counter() - started, 2),
                  "completion_tokens_per_s": speed.add(completion_tokens)}
        if rollouts is not None:  # the step whose adapter sampled this step's rollouts (the lag is the difference)
            record["rollout_policy_step"] = rollouts.loaded_step
        if config.eval_every and progress.step % config.eval_every == 0 and progress.step < config.steps:
            record["eval"] = {"student": evaluate_groups(accelerator.unwrap_model(model), tokenizer, dev_by_group, config)}
        curves.write(record)
        bar.update(1)
        bar.set_postfix(loss=f"{record['loss']:.4f}", len=f"{record['completion_tokens_mean']:.0f}")
        if progress.step % config.save_every == 0:
            common.save_training_state(accelerator, out)
        if config.interrupt_after is not None and progress.step >= config.interrupt_after:
            bar.close()
            return None
    bar.close()
    common.save_training_state(accelerator, out)
    final = evaluate_groups(accelerator.unwrap_model(model), tokenizer, dev_by_group, config)
    curves.write({"step": progress.step, "eval": {"student": final, "teacher": teacher_eval}})
    groups = {g: {"student_initial": initial[g], "student": final[g], "teacher": teacher_eval.get(g),
                  "gap_closed": gap_closed(initial[g], final[g], teacher_eval.get(g))} for g in final}
    return {"steps": progress.step, "completion_tokens_seen": progress.tokens_seen, "final_loss": last_logged(out / "curves.jsonl", "loss"), "groups": groups}
