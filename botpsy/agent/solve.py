"""``botpsy solve``: the agent on device-world tasks end to end, scored by the tasks' own checker.

For each task: build its world, play it with ``run_episode`` (the ``SimulatedUser`` answers
questions and decides confirmation requests) and the model as an ``EpisodeAgent``, then
``evaluate`` the transcript. Writes ``OUT/records.jsonl`` (one line per task as it finishes:
success, score, reasons, the model's step records, the conversation) and ``OUT/summary.json``
(success rate overall and by kind, tokens, latency, loop rate), and the resolved config.

Examples::

    botpsy solve --model runs/speedrun/gguf/model-q4_k_m.gguf --split test --n 20
    botpsy solve --model runs/speedrun/sft --tasks runs/speedrun/tasks/test.jsonl --n 5 --show 2 --json
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botpsy.agent.backends import open_backend
from botpsy.agent.loop import AgentConfig, EpisodeAgent
from botpsy.agent.show import Style, format_transcript
from botpsy.agent.steps import summarize
from botpsy.config import save_config
from botpsy.output import emit, table
from botpsy.runtime.backend import Backend, BackendOptions, ModelLoadError, SamplingConfig
from botpsy.runtime.generate import LOOP_POLICIES, GenerateConfig
from botpsy.world import KINDS, Task, build_world, evaluate, generate_tasks, run_episode


@dataclass
class SolveConfig:
    """Run the agent on device-world tasks with the simulated user, score them, report success by kind."""

    model: str = field(default="runs/speedrun/gguf/model-q4_k_m.gguf", metadata={
        "help": "GGUF file (llama.cpp), checkpoint folder (transformers) or http://.../v1 server."})
    tasks: str = field(default="", metadata={
        "help": "Task file written by `botpsy tasks` (JSONL); empty: draw --n tasks of --split with --seed."})
    split: str = field(default="test", metadata={"help": "Split to draw tasks from.", "choices": ["train", "dev", "test"]})
    n: int = field(default=20, metadata={"help": "Number of tasks (the first n of the file)."})
    seed: int = field(default=0, metadata={"help": "Seed for drawing tasks (when --tasks is empty)."})
    kinds: list[str] = field(default_factory=list, metadata={"help": "Only tasks of this kind.", "choices": list(KINDS)})
    out: str = field(default="runs/speedrun/solve", metadata={"help": "Folder for records.jsonl and summary.json."})
    threads: int = field(default=0, metadata={"help": "CPU threads (0 = all physical cores)."})
    n_ctx: int = field(default=8192, metadata={"help": "Context size in tokens."})
    max_tokens: int = field(default=512, metadata={"help": "Most tokens per model turn."})
    thinking_budget: int = field(default=256, metadata={"help": "Close the reasoning after this many tokens (0 = off)."})
    token_budget: int = field(default=4096, metadata={"help": "Most generated tokens per task."})
    max_turns: int = field(default=12, metadata={"help": "Most assistant turns per task."})
    enable_thinking: bool = field(default=True, metadata={"help": "Let the model reason before it answers."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature (0 = greedy, reproducible)."})
    constrain_calls: bool = field(default=True, metadata={"help": "Keep tool calls to the offered tools, their parameters and enum values (local backends; botpsy.chat.constrain)."})
    on_loop: str = field(default="recover", metadata={
        "help": "What the loop guard does when the model repeats itself.", "choices": list(LOOP_POLICIES)})
    show: int = field(default=0, metadata={"help": "Print the transcripts of the first N tasks."})
    json: bool = field(default=False, metadata={"help": "Print the summary as JSON."})


def load_tasks(config: SolveConfig) -> list[Task]:
    """The tasks to run: the first ``n`` of the file (or drawn), of the chosen kinds."""
    if config.n < 1:
        raise ValueError("--n must be at least 1")
    if config.tasks:
        path = Path(config.tasks)
        if not path.is_file():
            raise FileNotFoundError(f"task file {path} does not exist (write one with `botpsy tasks`)")
        tasks = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    tasks.append(Task.from_json(line))
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{path}:{number} is not a task record: {exc}") from None
    else:
        tasks = generate_tasks(config.split, config.n if not config.kinds else config.n * 20, seed=config.seed)
    if config.kinds:
        tasks = [t for t in tasks if t.kind in config.kinds]
    return tasks[:config.n]


def agent_config(config: SolveConfig) -> AgentConfig:
    generation = GenerateConfig(max_tokens=config.max_tokens, sampling=SamplingConfig(temperature=config.temperature),
                                on_loop=config.on_loop, thinking_budget=config.thinking_budget,
                                constrain_calls=config.constrain_calls)
    return AgentConfig(token_budget=config.token_budget, enable_thinking=config.enable_thinking, generation=generation)


def solve_task(backend: Backend, task: Task, config: AgentConfig, max_turns: int) -> dict[str, Any]:
    """One episode, scored: the per-task record written to ``records.jsonl``."""
    started = time.perf_counter()
    agent = EpisodeAgent(backend, config)
    world = build_world(task)
    try:
        transcript = run_episode(task, agent, max_assistant_turns=max_turns, world=world)
    finally:
        world.close()
    check = evaluate(task, transcript)
    return {"task_id": task.id, "kind": task.kind, "domain": task.domain, "success": check.success,
            "score": check.score, "reasons": check.reasons, "milestones": check.milestones,
            "wasted_calls": check.wasted_calls,
            "stop_reason": agent.stop_reason or "episode_end", "detail": agent.detail,
            "stats": summarize(agent.steps), "seconds": round(time.perf_counter() - started, 3),
            "first_call": first_call_verdict(task, agent.steps),
            "steps": [s.to_dict() for s in agent.steps], "messages": transcript.messages}


def first_call_verdict(task: Task, steps: list) -> dict[str, Any] | None:
    """Whether the model's first turn made exactly the gold first calls (names and arguments, any
    order), for tasks whose gold opens with calls; None for the others (asking back, refusing)."""
    first = task.gold_turns[0] if task.gold_turns else {}
    gold = first.get("calls") or []
    if not gold:
        return None
    made = next((s.tool_calls for s in steps if getattr(s, "type", "") == "model"), [])

    def key(call: dict) -> str:
        return json.dumps([call["name"], call.get("arguments") or {}], sort_keys=True, ensure_ascii=False)

    return {"exact": sorted(map(key, made)) == sorted(map(key, gold)), "made": len(made), "gold": len(gold)}


def summarize_records(records: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """Success rate overall and by kind, plus the model's token, latency and reliability figures."""
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in sorted({r["kind"] for r in records}):
        rows = [r for r in records if r["kind"] == kind]
        wins = sum(r["success"] for r in rows)
        by_kind[kind] = {"tasks": len(rows), "solved": wins, "success_rate": round(wins / len(rows), 4),
                         "mean_score": round(sum(r["score"] for r in rows) / len(rows), 4)}
    turns = sum(r["stats"]["model_steps"] for r in records)
    loop_turns = sum(r["stats"]["loop_turns"] for r in records)
    tokens = sum(r["stats"]["completion_tokens"] for r in records)
    seconds = sum(r["seconds"] for r in records)
    solved = sum(r["success"] for r in records)
    return {
        "model": model, "tasks": len(records), "solved": solved,
        "success_rate": round(solved / len(records), 4) if records else 0.0,
        "mean_score": round(sum(r["score"] for r in records) / len(records), 4) if records else 0.0,
        "by_kind": by_kind, "model_turns": turns, "completion_tokens": tokens,
        "tokens_per_task": round(tokens / len(records), 1) if records else 0.0,
        "loop_rate": round(loop_turns / turns, 4) if turns else 0.0,
        "parse_errors": sum(r["stats"]["parse_errors"] for r in records),
        "ttft_ms_mean": round(sum(r["stats"]["ttft_ms_mean"] * r["stats"]["model_steps"] for r in records) / turns, 2)
        if turns else 0.0,
        "seconds": round(seconds, 2),
    }


def human(summary: dict[str, Any]) -> str:
    rows = [{"kind": kind, **values} for kind, values in summary["by_kind"].items()]
    rows.append({"kind": "all", "tasks": summary["tasks"], "solved": summary["solved"],
                 "success_rate": summary["success_rate"], "mean_score": summary["mean_score"]})
    return (table(rows, ["kind", "tasks", "solved", "success_rate", "mean_score"])
            + f"\n\n{summary['tasks']} tasks with {summary['model']}: success rate {summary['success_rate']:.1%}, "
              f"{summary['tokens_per_task']} tokens per task, loop rate {summary['loop_rate']:.1%}, "
              f"{summary['parse_errors']} parse errors, {summary['seconds']} s")


def show_record(record: dict[str, Any], style: Style) -> str:
    verdict = style.ok("solved") if record["success"] else style.error("failed")
    head = style.bold(f"== {record['task_id']} ({record['kind']}): ") + verdict
    reasons = "".join(f"\n   - {reason}" for reason in record["reasons"])
    stats = record.get("stats") or {}
    turns = (f"\n   {stats['model_steps']} model turns, {stats['completion_tokens']} tokens, "
             f"{stats['parse_errors']} format errors (retried out of view), {stats['loop_events']} loop events"
             if stats else "")
    return f"{head}{reasons}{style.dim(turns)}\n{format_transcript(record['messages'], style)}\n"


def main(config: SolveConfig) -> int:
    tasks = load_tasks(config)
    try:
        backend = open_backend(config.model, BackendOptions(threads=config.threads, n_ctx=config.n_ctx))
    except ModelLoadError as exc:
        print(f"botpsy solve: {exc}", file=sys.stderr)
        return 2
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, out / "config.json")
    records = []
    style = Style(color=False)
    try:
        with (out / "records.jsonl").open("w") as handle:
            for task in tasks:
                record = solve_task(backend, task, agent_config(config), config.max_turns)
                records.append(record)
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                handle.flush()  # a stopped run keeps every finished task
                if len(records) <= config.show and not config.json:
                    print(show_record(record, style))
    finally:
        backend.close()
    summary = summarize_records(records, config.model)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    emit(summary, config.json, human)
    return 0
