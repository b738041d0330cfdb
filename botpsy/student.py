"""The real-student run: the recipe's first stage on a pretrained Qwen2.5-Coder-0.5B, end to end.

The speedrun trains a few-million-parameter model from nothing, which never learned to call tools
well; the report's recipe starts from a pretrained model, and so does this run. Stages, each
resumable and timed into ``RUN/student.json``:

    tasks -> data -> bases (pull + verify the 0.5B student and the 1.5B peer) -> sft (LoRA, peft)
    -> export (merged student as qwen2 GGUF: bf16, Q8_0, Q4_K_M; and the adapter file, ``lora``)
    -> parity -> eval -> bench
    -> teachers -> mopd -> rl1 (and rl1-nopenalty, the ablation) -> rl2 -> stages-eval
    -> report (``botpsy report``: every stage's times, curves, parity, evaluations and device card
       in ``RUN/report/report.md``)

Stages 2-4 keep training the SFT adapter (``botpsy.train.lora.load_for_training``): each writes one
adapter on the pulled base, and ``stages-eval`` puts every stage's adapter file beside SFT's on the
same device draw.

The evaluation puts the base 0.5B and base 1.5B (each in its own chat template, calls read
leniently: ``botpsy.chat.native``) beside the SFT student's adapter file on its base on one fixed
draw of device tasks, BFCL v4 and IFEval; the quantization gate puts the merged bf16, Q8_0 and
Q4_K_M files beside the adapter file on the device draw. On 2 cores the
whole evaluation takes many hours, so ``--eval-*`` sizes can be lowered for a sample (the README
says which sizes produced which figures).

    botpsy student                                   # everything, resuming
    botpsy student --only eval --eval-device-tasks 50
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from botpsy.config import save_config
from botpsy.speedrun import Step, bench_release_files, run_steps, stage_gguf, step_data, step_report, step_tasks

RELEASE_FORMATS = ("bf16", "q8_0", "q4_k_m")  # the merged model, quantized
# The adapter alone on the untouched base file (botpsy.export.lora_gguf): the base stays the grid the
# student trained on, so this is the file the student is judged by on every suite.
ADAPTER_FORMAT = "lora"
GATE_FORMATS = RELEASE_FORMATS + (ADAPTER_FORMAT,)


@dataclass
class StudentConfig:
    """Run SFT on the pretrained 0.5B student and evaluate it beside the base models (resumable)."""

    run: str = field(default="runs/student", metadata={"help": "Run folder; each stage writes a subfolder."})
    base: str = field(default="qwen2.5-coder-0.5b", metadata={"help": "The student's base: a known base name (`botpsy models`), a .gguf file or a transformers folder."})
    peer: str = field(default="qwen2.5-coder-1.5b", metadata={"help": "A larger base evaluated beside it (empty: none)."})
    seed: int = field(default=0, metadata={"help": "Seed for tasks and data order."})
    train_tasks: int = field(default=3000, metadata={"help": "Device-world tasks drawn for training."})
    dev_tasks: int = field(default=200, metadata={"help": "Dev-split tasks (held-out templates)."})
    test_tasks: int = field(default=300, metadata={"help": "Test-split tasks (held-out templates and seeds)."})
    functions: int = field(default=0, metadata={"help": "Varied function-calling examples beyond the device world added to the train split (botpsy data --functions); 0 reproduces the release's data."})
    sft_steps: int = field(default=400, metadata={"help": "SFT optimizer steps (about 4 sequences each)."})
    sft_batch_tokens: int = field(default=4096, metadata={"help": "Padded tokens per SFT step."})
    sft_lr: float = field(default=3e-4, metadata={"help": "Peak learning rate of the LoRA adapter."})
    lora_rank: int = field(default=16, metadata={"help": "LoRA rank on every linear layer."})
    sft_max_length: int = field(default=2048, metadata={"help": "Longer training sequences are skipped (the Qwen tokenizer's longest trajectory is about 1,900 tokens)."})
    curve_every: int = field(default=100, metadata={"help": "Steps between learning-curve points (greedy first calls on dev)."})
    curve_examples: int = field(default=24, metadata={"help": "Dev examples whose first call is generated at each curve point."})
    test_calls: int = field(default=100, metadata={"help": "After SFT, score the first call of up to this many single-call test tasks (torch, greedy, plain and constrained)."})
    threads: int = field(default=2, metadata={"help": "CPU threads for torch and llama.cpp."})
    eval_device_tasks: int = field(default=150, metadata={"help": "Test-split device tasks per model (round-robin over the kinds; the same draw for every row)."})
    eval_bfcl_items: int = field(default=50, metadata={"help": "BFCL items per category."})
    eval_bfcl_categories: list[str] = field(default_factory=lambda: [
        "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple"],
        metadata={"help": "BFCL categories."})
    eval_if_items: int = field(default=200, metadata={"help": "IFEval prompts per model."})
    eval_max_tokens: int = field(default=1024, metadata={"help": "Token cap per generation in the evaluation."})
    teacher_steps: int = field(default=60, metadata={"help": "Steps of each domain teacher: the SFT adapter trained further on its group's data alone."})
    teacher_lr: float = field(default=2e-4, metadata={"help": "Peak learning rate of the teachers."})
    teacher_rehearsal: float = field(default=0.0, metadata={"help": "Share of each teacher's examples drawn from the other groups (botpsy teachers --rehearsal)."})
    mopd_steps: int = field(default=30, metadata={"help": "MOPD optimizer steps."})
    mopd_prompts: int = field(default=8, metadata={"help": "Student rollouts per MOPD step (spread over the four groups)."})
    mopd_new_tokens: int = field(default=96, metadata={"help": "Completion length limit of each MOPD rollout."})
    mopd_lr: float = field(default=1e-4, metadata={"help": "Peak learning rate of MOPD (the adapter continues from SFT)."})
    mopd_anchor: float = field(default=0.0, metadata={"help": "Weight of MOPD's KL to the SFT student (`botpsy mopd --anchor`); 0 as in the measured run."})
    rl1_steps: int = field(default=20, metadata={"help": "RL round 1 steps (also the ablation run without penalties)."})
    rl2_steps: int = field(default=10, metadata={"help": "RL round 2 steps (multi-turn episodes)."})
    rl_prompts: int = field(default=4, metadata={"help": "Tasks per RL round-1 step."})
    rl2_prompts: int = field(default=2, metadata={"help": "Tasks per RL round-2 step."})
    rl_group: int = field(default=4, metadata={"help": "Rollouts per task (GRPO group size)."})
    rl_lr: float = field(default=2e-5, metadata={"help": "Learning rate of both RL rounds."})
    rl_new_tokens: int = field(default=128, metadata={"help": "Token limit per generated turn in RL."})
    stage_dev_examples: int = field(default=24, metadata={"help": "Dev examples per group whose first turn scores each teacher, the student before and after MOPD."})
    fresh: bool = field(default=False, metadata={"help": "Delete the run folder first instead of resuming."})
    only: list[str] = field(default_factory=list, metadata={"help": "Run only these steps (by name)."})
    json: bool = field(default=False, metadata={"help": "Print the stage summary as JSON."})


def step_bases(cfg: StudentConfig, run: Path):
    """Pull and verify the base models (known names; a path is only checked to exist)."""
    from botpsy.model.bases import is_base_name, pull, resolve_base

    paths = {}
    for role, name in (("student", cfg.base), ("peer", cfg.peer)):
        if name:
            paths[role] = {"name": name, "path": str(pull(name) if is_base_name(name) else resolve_base(name))}
    (run / "bases").mkdir(parents=True, exist_ok=True)
    (run / "bases" / "bases.json").write_text(json.dumps(paths, indent=2) + "\n")


def step_sft(cfg: StudentConfig, run: Path):
    from botpsy.train.sft import SFTConfig, main

    stage_cfg = SFTConfig(init=cfg.base, data=str(run / "data"), out=str(run / "sft"), steps=cfg.sft_steps,
                          batch_tokens=cfg.sft_batch_tokens, lr=cfg.sft_lr, warmup_steps=20, lora_rank=cfg.lora_rank,
                          max_length=cfg.sft_max_length, dtype="auto", detach_context=True,
                          eval_every=cfg.curve_every, eval_calls_every=cfg.curve_every, eval_examples=cfg.curve_examples,
                          test_examples=cfg.test_calls, eval_tool_choice=False,
                          dev_loss_sequences=16, save_every=25, seed=cfg.seed, threads=cfg.threads)
    return main(stage_cfg)


def step_export(cfg: StudentConfig, run: Path):
    from botpsy.export.command import ExportConfig, main

    stage_cfg = ExportConfig(checkpoint=str(run / "sft"), out=str(run / "gguf"), formats=",".join(GATE_FORMATS),
                             threads=cfg.threads, name="botpsy-0.5b-sft", allow_fallback=True)
    save_config(stage_cfg, run / "gguf" / "config.json")
    return main(stage_cfg)


def step_parity(cfg: StudentConfig, run: Path):
    from botpsy.export.parity import ParityConfig, main

    return main(ParityConfig(checkpoint=str(run / "sft"), gguf_dir=str(run / "gguf"), threads=cfg.threads))


def eval_models(cfg: StudentConfig, run: Path) -> tuple[list[str], list[str]]:
    """(labels, models) evaluated on every suite: the bases in their own template, then the SFT
    student as its adapter file on the base."""
    labels, models = [], []
    for label, name in (("base-0.5b", cfg.base), ("base-1.5b", cfg.peer)):
        if name:
            labels.append(label)
            models.append(name)
    return labels + [ADAPTER_FORMAT], models + [str(run / "gguf" / f"model-{ADAPTER_FORMAT}.gguf")]


def step_eval(cfg: StudentConfig, run: Path):
    """Device tasks, BFCL and IFEval for the base rows and the SFT adapter file; then the quantization
    gate: the device suite for bf16, Q8_0, Q4_K_M and the adapter file."""
    from botpsy.eval.harness import EvalConfig, main

    labels, models = eval_models(cfg, run)
    common = dict(out=str(run / "eval"), tasks=str(run / "tasks" / "test.jsonl"), device_limit=cfg.eval_device_tasks,
                  bfcl_limit=cfg.eval_bfcl_items, bfcl_category=list(cfg.eval_bfcl_categories),
                  if_limit=cfg.eval_if_items, max_tokens=cfg.eval_max_tokens, threads=cfg.threads)
    status = main(EvalConfig(model=models, label=labels, suite="device,bfcl,ifeval", **common))
    if status:
        return status
    # The adapter file's device records are reused: the same file and settings, so the harness's
    # fingerprint accepts them.
    reuse_records(run / "eval" / ADAPTER_FORMAT, run / "eval-quant" / ADAPTER_FORMAT, ("model.json", "device.jsonl"))
    return main(EvalConfig(model=[str(run / "gguf" / f"model-{q}.gguf") for q in GATE_FORMATS],
                           label=list(GATE_FORMATS), suite="device", **{**common, "out": str(run / "eval-quant")}))


def step_bench(cfg: StudentConfig, run: Path):
    return bench_release_files(run, cfg.threads)


def reuse_records(source: Path, target: Path, names: tuple[str, ...]) -> None:
    import shutil

    if target.exists() or not all((source / n).is_file() for n in names):
        return
    target.mkdir(parents=True)
    for n in names:
        shutil.copy2(source / n, target / n)


# ---- stages 2-4 on the real student: every one keeps training the SFT adapter (bfloat16 base, the
# prompt encoded without gradient), so each stage is again one adapter on the pulled base.


def step_teachers(cfg: StudentConfig, run: Path):
    """One teacher per task group: the SFT adapter trained further on that group's data alone."""
    from botpsy.train.teachers import TeachersConfig, main

    stage_cfg = TeachersConfig(init=str(run / "sft"), data=str(run / "data"), out=str(run / "teachers"),
                               steps=cfg.teacher_steps, batch_tokens=cfg.sft_batch_tokens, lr=cfg.teacher_lr, warmup_steps=5,
                               max_length=cfg.sft_max_length, lora_rank=cfg.lora_rank, dtype="auto", detach_context=True,
                               rehearsal=cfg.teacher_rehearsal, eval_examples=cfg.stage_dev_examples, save_every=10,
                               seed=cfg.seed, threads=cfg.threads)
    return main(stage_cfg)


def step_mopd(cfg: StudentConfig, run: Path):
    """Multi-teacher on-policy distillation: the student's own rollouts, each scored by its group's teacher."""
    from botpsy.train.mopd import MOPDConfig, main

    stage_cfg = MOPDConfig(student=str(run / "sft"), teachers=str(run / "teachers" / "manifest.json"), data=str(run / "data"),
                           out=str(run / "mopd"), steps=cfg.mopd_steps, prompts_per_step=cfg.mopd_prompts,
                           max_new_tokens=cfg.mopd_new_tokens, rollout_batch_size=cfg.mopd_prompts, score_batch=1, lr=cfg.mopd_lr, anchor=cfg.mopd_anchor,
                           max_prompt_tokens=cfg.sft_max_length, lora_rank=cfg.lora_rank, dtype="auto", detach_prompt=True,
                           eval_examples=cfg.stage_dev_examples, save_every=5, seed=cfg.seed, threads=cfg.threads)
    return main(stage_cfg)


def rl_step(round_: int, out: str, policy: str, penalties: bool = True):
    def step(cfg: StudentConfig, run: Path):
        from botpsy.train.rl import RLConfig, main

        steps, prompts = (cfg.rl1_steps, cfg.rl_prompts) if round_ == 1 else (cfg.rl2_steps, cfg.rl2_prompts)
        return main(RLConfig(round=round_, run=str(run), policy=str(run / policy), out=str(run / out), steps=steps,
                             prompts_per_step=prompts, group_size=cfg.rl_group, penalties=penalties, lr=cfg.rl_lr,
                             max_new_tokens=cfg.rl_new_tokens, batch_size=prompts * cfg.rl_group, lora_rank=cfg.lora_rank,
                             dtype="auto", detach_prompt=True, eval_every=0, eval_tasks=cfg.stage_dev_examples,
                             save_every=5, seed=cfg.seed, threads=cfg.threads))
    step.__doc__ = f"RL round {round_} ({'with' if penalties else 'without'} the loop and length penalties) from {policy}."
    return step


LATER_STAGES = ("mopd", "rl1", "rl1-nopenalty", "rl2")


def step_stages_eval(cfg: StudentConfig, run: Path):
    """Every stage as its adapter file on the untouched base, on the same device draw as the SFT rows.

    The adapter file, not a merged Q4_K_M: re-quantizing a merged stage cost the SFT student 8.7
    points, more than any stage moved. SFT's adapter-file records are reused."""
    from botpsy.eval.harness import EvalConfig, main

    labels, models = ["sft"], [str(run / "gguf" / f"model-{ADAPTER_FORMAT}.gguf")]
    for stage in LATER_STAGES:
        if (run / stage / "meta.json").is_file():
            labels.append(stage)
            models.append(str(stage_gguf(run / stage, run / "stages" / stage, cfg.threads, ADAPTER_FORMAT,
                                         name=f"botpsy-0.5b-{stage}")))
    reuse_records(run / "eval-quant" / ADAPTER_FORMAT, run / "eval-stages" / "sft", ("model.json", "device.jsonl"))
    return main(EvalConfig(model=models, label=labels, suite="device", out=str(run / "eval-stages"),
                           tasks=str(run / "tasks" / "test.jsonl"), device_limit=cfg.eval_device_tasks,
                           max_tokens=cfg.eval_max_tokens, threads=cfg.threads))


STEPS = [
    Step("tasks", "tasks/test.jsonl", step_tasks),
    Step("data", "data/meta.json", step_data),
    Step("bases", "bases/bases.json", step_bases),
    Step("sft", "sft/meta.json", step_sft),
    Step("export", "gguf/meta.json", step_export),
    Step("parity", "gguf/parity.json", step_parity),
    Step("eval", "eval-quant/summary.json", step_eval),
    Step("bench", "bench/card.json", step_bench),
    Step("teachers", "teachers/manifest.json", step_teachers),
    Step("mopd", "mopd/meta.json", step_mopd),
    Step("rl1", "rl1/meta.json", rl_step(1, "rl1", "mopd")),
    Step("rl1-nopenalty", "rl1-nopenalty/meta.json", rl_step(1, "rl1-nopenalty", "mopd", penalties=False)),
    Step("rl2", "rl2/meta.json", rl_step(2, "rl2", "rl1")),
    Step("stages-eval", "eval-stages/summary.json", step_stages_eval),
    # Last, so it shows every stage above; `botpsy student --only report` redraws it at any time.
    Step("report", "report/report.md", step_report),
]


def main(config: StudentConfig) -> int:
    return run_steps(STEPS, config, "student")
