"""The speedrun: the whole recipe at tiny scale, one stage after another, in one run folder.

Each step builds a stage's config from the speedrun's own settings and calls that stage's
``main(config)``, exactly as ``botpsy <stage>`` would; its resolved config is saved beside
its output. Steps that finished before (recorded in ``speedrun.json``, output present) are
skipped, so a stopped speedrun picks up where it left off (``--fresh`` starts over). Stage timings go to ``speedrun.json``.

    botpsy speedrun                 # or: bash runs/speedrun.sh (which also sets up .venv)
    botpsy speedrun --run runs/try2 --sft-steps 100
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from botpsy.config import save_config
from botpsy.output import emit, table


@dataclass
class SpeedrunConfig:
    """Run every stage of the recipe at tiny scale on this CPU."""

    run: str = field(default="runs/speedrun", metadata={"help": "Run folder; each stage writes a subfolder."})
    seed: int = field(default=0, metadata={"help": "Seed for tasks, data order and initialisation."})
    train_tasks: int = field(default=3000, metadata={"help": "Device-world tasks drawn for training."})
    dev_tasks: int = field(default=200, metadata={"help": "Dev-split tasks (held-out templates)."})
    test_tasks: int = field(default=300, metadata={"help": "Test-split tasks (held-out templates and seeds)."})
    vocab_size: int = field(default=4096, metadata={"help": "Tokenizer vocabulary size."})
    preset: str = field(default="tiny", metadata={"help": "Student model preset."})
    sft_steps: int = field(default=300, metadata={"help": "SFT optimizer steps."})
    sft_batch_tokens: int = field(default=4096, metadata={"help": "Padded tokens per SFT batch (about four trajectories)."})
    teacher_steps: int = field(default=25, metadata={"help": "SFT steps of each domain teacher (continued from the SFT student on its group)."})
    mopd_steps: int = field(default=20, metadata={"help": "MOPD optimizer steps."})
    mopd_prompts: int = field(default=16, metadata={"help": "Student rollouts per MOPD step (spread over the groups)."})
    rl1_steps: int = field(default=10, metadata={"help": "RL round 1 steps (also the ablation run without penalties)."})
    rl2_steps: int = field(default=6, metadata={"help": "RL round 2 steps (multi-turn episodes)."})
    rl_prompts: int = field(default=8, metadata={"help": "Tasks per RL step."})
    rl2_prompts: int = field(default=4, metadata={"help": "Tasks (episodes groups) per RL round-2 step."})
    rl_group: int = field(default=4, metadata={"help": "Rollouts per task (GRPO group size)."})
    threads: int = field(default=2, metadata={"help": "CPU threads for torch and llama.cpp."})
    agent_tasks: int = field(default=30, metadata={"help": "Test-split tasks the shipped Q4_K_M agent runs end to end."})
    eval_device_tasks: int = field(default=50, metadata={
        "help": "Test-split device tasks each model is evaluated on (round-robin over the kinds)."})
    eval_bfcl_items: int = field(default=1, metadata={"help": "BFCL items per category in the evaluation."})
    eval_bfcl_categories: list[str] = field(default_factory=lambda: [
        "simple_python", "multiple", "parallel", "irrelevance", "live_simple", "multi_turn_base"],
        metadata={"help": "BFCL categories sampled in the evaluation."})
    eval_if_items: int = field(default=2, metadata={"help": "IFEval and IFBench items (each) in the evaluation."})
    eval_max_tokens: int = field(default=160, metadata={
        "help": "Token cap per generation in the evaluation (the untrained base hits it every time)."})
    fresh: bool = field(default=False, metadata={"help": "Delete the run folder first instead of resuming."})
    only: list[str] = field(default_factory=list, metadata={"help": "Run only these steps (by name)."})
    json: bool = field(default=False, metadata={"help": "Print the stage summary as JSON."})


@dataclass
class Step:
    name: str
    output: str  # path relative to the run folder whose existence marks the step done
    run: Callable[[SpeedrunConfig, Path], object]


def step_tasks(cfg: SpeedrunConfig, run: Path):
    from botpsy.world.command import TasksConfig, main

    for split, n, seed in (("train", cfg.train_tasks, cfg.seed), ("dev", cfg.dev_tasks, cfg.seed + 1), ("test", cfg.test_tasks, cfg.seed + 2)):
        stage_cfg = TasksConfig(split=split, n=n, seed=seed, out=str(run / "tasks" / f"{split}.jsonl"))
        save_config(stage_cfg, run / "tasks" / f"config.{split}.json")
        main(stage_cfg)


def step_data(cfg: SpeedrunConfig, run: Path):
    from botpsy.train.trajectories import DataConfig, main

    stage_cfg = DataConfig(tasks=str(run / "tasks"), out=str(run / "data"), seed=cfg.seed,
                           functions=getattr(cfg, "functions", 0))
    save_config(stage_cfg, run / "data" / "config.json")
    main(stage_cfg)


def step_tokenizer(cfg: SpeedrunConfig, run: Path):
    from botpsy.model.tokenizer import TokenizerConfig, main

    stage_cfg = TokenizerConfig(corpus=[str(run / "data" / "corpus.txt")], out=str(run / "tokenizer"), vocab_size=cfg.vocab_size)
    save_config(stage_cfg, run / "tokenizer" / "config.json")
    main(stage_cfg)


def step_init(cfg: SpeedrunConfig, run: Path):
    from botpsy.model.reference import InitConfig, main

    stage_cfg = InitConfig(tokenizer=str(run / "tokenizer"), out=str(run / "base"), preset=cfg.preset, seed=cfg.seed)
    main(stage_cfg)
    save_config(stage_cfg, run / "base" / "config.json.init")


def step_sft(cfg: SpeedrunConfig, run: Path):
    from botpsy.train.sft import SFTConfig, main

    stage_cfg = SFTConfig(init=str(run / "base"), data=str(run / "data"), out=str(run / "sft"), steps=cfg.sft_steps,
                          batch_tokens=cfg.sft_batch_tokens, eval_every=50,
                          seed=cfg.seed, threads=cfg.threads)
    return main(stage_cfg)


def step_teachers(cfg: SpeedrunConfig, run: Path):
    """One teacher per task group: the SFT student trained further on that group's data only."""
    from botpsy.train.teachers import TeachersConfig, main

    stage_cfg = TeachersConfig(init=str(run / "sft"), data=str(run / "data"), out=str(run / "teachers"),
                               steps=cfg.teacher_steps, batch_tokens=cfg.sft_batch_tokens, seed=cfg.seed, threads=cfg.threads)
    save_config(stage_cfg, run / "teachers" / "config.json")
    return main(stage_cfg)


def step_mopd(cfg: SpeedrunConfig, run: Path):
    """Multi-teacher on-policy distillation: the student's own rollouts, each scored by its group's teacher."""
    from botpsy.train.mopd import MOPDConfig, main

    stage_cfg = MOPDConfig(student=str(run / "sft"), teachers=str(run / "teachers" / "manifest.json"), data=str(run / "data"),
                           out=str(run / "mopd"), steps=cfg.mopd_steps, prompts_per_step=cfg.mopd_prompts,
                           seed=cfg.seed, threads=cfg.threads)
    return main(stage_cfg)


def rl_config(cfg: SpeedrunConfig, run: Path, round_: int, out: str, policy: str, penalties: bool = True):
    from botpsy.train.rl import RLConfig

    steps, prompts = (cfg.rl1_steps, cfg.rl_prompts) if round_ == 1 else (cfg.rl2_steps, cfg.rl2_prompts)
    return RLConfig(round=round_, run=str(run), policy=str(run / policy), out=str(run / out), steps=steps,
                    prompts_per_step=prompts, group_size=cfg.rl_group, penalties=penalties, eval_every=0,
                    seed=cfg.seed, threads=cfg.threads)


def step_rl1(cfg: SpeedrunConfig, run: Path):
    """RL round 1 (GRPO) on single-turn, parallel and special-case tasks, with loop and length penalties."""
    from botpsy.train.rl import main

    return main(rl_config(cfg, run, 1, "rl1", "mopd"))


def step_rl1_ablation(cfg: SpeedrunConfig, run: Path):
    """The same RL round 1 without the loop/length penalties, so the report shows what they change."""
    from botpsy.train.rl import main

    return main(rl_config(cfg, run, 1, "rl1-nopenalty", "mopd", penalties=False))


def step_rl2(cfg: SpeedrunConfig, run: Path):
    """RL round 2: whole multi-turn episodes in the device world with the simulated user."""
    from botpsy.train.rl import main

    return main(rl_config(cfg, run, 2, "rl2", "rl1"))


def step_export(cfg: SpeedrunConfig, run: Path):
    from botpsy.export.command import ExportConfig, main

    stage_cfg = ExportConfig(checkpoint=str(run / FINAL), out=str(run / "gguf"), threads=cfg.threads)
    save_config(stage_cfg, run / "gguf" / "config.json")
    return main(stage_cfg)


def step_parity(cfg: SpeedrunConfig, run: Path):
    from botpsy.export.parity import ParityConfig, main

    return main(ParityConfig(checkpoint=str(run / FINAL), gguf_dir=str(run / "gguf"), threads=cfg.threads))


def step_agent(cfg: SpeedrunConfig, run: Path):
    """The shipped Q4_K_M model as an agent, end to end, on test-split tasks (transcripts shown)."""
    from botpsy.agent.solve import SolveConfig, main

    # One llama.cpp thread: the tiny model decodes at >1k tokens/s on it, and a second thread
    # competing with anything else on a 2-core machine made decode orders of magnitude slower.
    stage_cfg = SolveConfig(model=str(run / "gguf" / "model-q4_k_m.gguf"), tasks=str(run / "tasks" / "test.jsonl"),
                            n=cfg.agent_tasks, out=str(run / "agent"), threads=1, show=3)
    return main(stage_cfg)


# The model every later step ships: the last stage of the recipe.
FINAL = "rl2"
# Stage checkpoints evaluated side by side (teachers are added from their manifest).
EVAL_STAGES = ["base", "sft", "mopd", "rl1", "rl1-nopenalty"]


def stage_models(run: Path) -> list[tuple[str, Path]]:
    """(label, checkpoint) of every stage to evaluate, in recipe order; missing stages are left out."""
    stages = [(name, run / name) for name in EVAL_STAGES[:2]]
    manifest = run / "teachers" / "manifest.json"
    if manifest.is_file():
        teachers = json.loads(manifest.read_text()).get("teachers", {})
        stages += [(f"teacher-{group}", Path(t["path"])) for group, t in teachers.items() if t.get("kind") == "local"]
    stages += [(name, run / name) for name in EVAL_STAGES[2:]]
    return [(label, path) for label, path in stages if (path / "meta.json").is_file()]


def stage_gguf(checkpoint: Path, out: Path, threads: int, fmt: str = "bf16", **export_options) -> Path:
    """A GGUF of one stage's checkpoint in ``fmt`` (made once), so every stage is evaluated through llama.cpp."""
    from botpsy.export.command import ExportConfig, main

    target = out / f"model-{fmt}.gguf"
    if not target.is_file():
        main(ExportConfig(checkpoint=str(checkpoint), out=str(out), formats=fmt, threads=threads, **export_options))
    return target


def step_eval(cfg: SpeedrunConfig, run: Path):
    """Every stage (base, SFT, teachers, MOPD, RL1 and its ablation, RL2) and each release format side by side."""
    from botpsy.eval.harness import EvalConfig, main

    labels, models = [], []
    for label, checkpoint in stage_models(run):
        labels.append(label)
        models.append(str(stage_gguf(checkpoint, run / "stages" / label, cfg.threads)))
    # The release files are the final stage (RL2): its bf16 file stands for the stage, and the labels
    # bf16 / q8_0 / q4_k_m let the harness report the quantization deltas against bf16.
    labels += ["bf16", "q8_0", "q4_k_m"]
    models += [str(run / "gguf" / f"model-{q}.gguf") for q in ("bf16", "q8_0", "q4_k_m")]
    # One llama.cpp thread: on a busy 2-core machine two threads made decoding far slower. The per-task
    # budget of two capped turns keeps the untrained base, which never stops by itself, from spending
    # the step's time on format retries.
    stage_cfg = EvalConfig(model=models, label=labels, suite="device,bfcl,ifeval,ifbench",
                           out=str(run / "eval"), tasks=str(run / "tasks" / "test.jsonl"),
                           device_limit=cfg.eval_device_tasks, bfcl_limit=cfg.eval_bfcl_items,
                           bfcl_category=list(cfg.eval_bfcl_categories), if_limit=cfg.eval_if_items,
                           max_tokens=cfg.eval_max_tokens, token_budget=2 * cfg.eval_max_tokens, threads=1)
    return main(stage_cfg)


def step_bench(cfg: SpeedrunConfig, run: Path):
    """The device report card of the three release files: TTFT cold vs warm up to 25 tools, speed, roofline."""
    # One thread, as in the agent and eval steps.
    return bench_release_files(run, threads=1)


def bench_release_files(run: Path, threads: int):
    """``botpsy bench`` on RUN/gguf's bf16, Q8_0 and Q4_K_M files into RUN/bench."""
    from botpsy.bench.command import BenchConfig, main

    # Small settings (two recorded repetitions, contexts up to 1k tokens, a short agent task) keep this
    # step to a minute or two for the tiny model.
    stage_cfg = BenchConfig(models=[str(run / "gguf" / f"model-{q}.gguf") for q in ("bf16", "q8_0", "q4_k_m")],
                            out=str(run / "bench"), threads=threads, reps=2, warmup=1, contexts=[256, 1024],
                            tool_counts=[10, 25], decode_tokens=32, turn_tokens=64, task_turns=3)
    save_config(stage_cfg, run / "bench" / "config.json")
    return main(stage_cfg)


def step_report(cfg: SpeedrunConfig, run: Path):
    """Every stage's output stitched into report/report.md with its plots."""
    from botpsy.report.command import ReportConfig, main

    return main(ReportConfig(run=str(run)))


STEPS = [
    Step("tasks", "tasks/test.jsonl", step_tasks),
    Step("data", "data/meta.json", step_data),
    Step("tokenizer", "tokenizer/meta.json", step_tokenizer),
    Step("init", "base/meta.json", step_init),
    Step("sft", "sft/meta.json", step_sft),
    Step("teachers", "teachers/manifest.json", step_teachers),
    Step("mopd", "mopd/meta.json", step_mopd),
    Step("rl1", "rl1/meta.json", step_rl1),
    Step("rl1-nopenalty", "rl1-nopenalty/meta.json", step_rl1_ablation),
    Step("rl2", "rl2/meta.json", step_rl2),
    Step("export", "gguf/meta.json", step_export),
    Step("parity", "gguf/parity.json", step_parity),
    Step("agent", "agent/summary.json", step_agent),
    Step("eval", "eval/summary.json", step_eval),
    Step("bench", "bench/card.json", step_bench),
    Step("report", "report/report.md", step_report),
]


def main(config: SpeedrunConfig) -> int:
    return run_steps(STEPS, config, "speedrun")


def preflight() -> None:
    """Inputs later steps need, checked before the first step starts (not twenty minutes in)."""
    import importlib.util

    from botpsy.eval.instructions.agreement import BENCHMARKS, default_data_dir

    data = default_data_dir()
    missing = [f"{name} data {data / files[0]}" for name, files in BENCHMARKS.items() if not (data / files[0]).is_file()]
    if importlib.util.find_spec("bfcl_eval") is None:
        missing.append("the bfcl-eval package (BFCL v4 data and checkers; runs/setup.sh installs it)")
    if missing:
        raise FileNotFoundError("the run needs these before its first step: " + "; ".join(missing))


def run_steps(steps: list[Step], config, name: str) -> int:
    """Run ``steps`` in order in ``config.run``, skipping those done before; stage times to ``<name>.json``.

    ``config`` needs ``run``, ``fresh``, ``only`` and ``json`` (the speedrun's and the student run's do).
    """
    preflight()
    run = Path(config.run)
    if config.fresh and run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True, exist_ok=True)
    save_config(config, run / f"{name}_config.json")
    timings_file = run / f"{name}.json"
    timings = json.loads(timings_file.read_text()) if timings_file.is_file() else {}
    unknown = set(config.only) - {s.name for s in steps}
    if unknown:
        raise ValueError(f"unknown {name} steps {sorted(unknown)}; steps are {[s.name for s in steps]}")
    for step in steps:
        if config.only and step.name not in config.only:
            continue
        if step.name in timings and (run / step.output).exists() and not config.only:
            print(f"[{name}] {step.name}: done already ({run / step.output})")
            continue
        print(f"[{name}] {step.name} ...", flush=True)
        start = time.perf_counter()
        status = step.run(config, run)
        if isinstance(status, int) and status != 0:
            raise RuntimeError(f"{name} step {step.name} failed with exit code {status}")
        timings[step.name] = {"seconds": round(time.perf_counter() - start, 1), "output": str(run / step.output)}
        timings_file.write_text(json.dumps(timings, indent=2) + "\n")
        print(f"[{name}] {step.name}: {timings[step.name]['seconds']:.0f} s", flush=True)
    rows = [{"step": step, "seconds": t["seconds"], "output": t["output"]} for step, t in timings.items()]
    rows.append({"step": "total", "seconds": round(sum(t["seconds"] for t in timings.values()), 1), "output": str(run)})
    emit(rows, config.json, lambda r: f"{name} finished; outputs:\n" + table(r))
    return 0
