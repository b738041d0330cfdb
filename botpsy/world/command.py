"""``botpsy tasks``: draw device-world tasks to JSONL and summarise them by kind and domain.

Examples::

    botpsy tasks --split train --n 2000 --seed 0 --out runs/demo/tasks/train.jsonl
    botpsy tasks --split test --n 20 --seed 1 --show 2          # print 2 gold conversations as prompt text
    botpsy tasks --split dev --n 500 --json                      # machine-readable summary

Each line of the output is one ``Task.to_json()``: ``id, split, kind, domain, group, world_seed,
messages, tools, gold_calls, expected_state, gold_turns, checks, script, patch, intent,
template``. ``--show`` replays the gold of the first K tasks and renders each conversation
with the Qwen3.5 chat template.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botpsy.chat.template import render
from botpsy.output import emit, table
from botpsy.world.episode import replay_gold
from botpsy.world.kinds import DOMAINS
from botpsy.world.phrasing import SPLITS
from botpsy.world.task import Task
from botpsy.world.tasks import KINDS, generate_tasks


@dataclass
class TasksConfig:
    """Draw device-world tasks (request, offered tools, gold calls, expected state) to JSONL."""

    split: str = field(default="train", metadata={"help": "Which split's templates and world seeds to use.",
                                                  "choices": list(SPLITS)})
    n: int = field(default=100, metadata={"help": "How many tasks to draw."})
    seed: int = field(default=0, metadata={"help": "Generator seed; the same seed and split give the same tasks."})
    out: str | None = field(default=None, metadata={"help": "JSONL file to write, one task per line (omit: none)."})
    show: int = field(default=0, metadata={"help": "Render this many tasks' gold conversations in the chat format."})
    json: bool = field(default=False, metadata={"help": "Print the summary as JSON."})


def summarise(tasks: list[Task]) -> dict[str, Any]:
    """Counts of kind x domain, and of the groups later stages route by."""
    counts = Counter((t.kind, t.domain) for t in tasks)
    return {"n": len(tasks),
            "kinds": {k: {d: counts[(k, d)] for d in DOMAINS} for k in KINDS},
            "groups": dict(sorted(Counter(t.group for t in tasks).items())),
            "gold_calls": sum(len(t.gold_calls) for t in tasks)}


def summary_table(summary: dict[str, Any]) -> str:
    rows = []
    for kind, by_domain in summary["kinds"].items():
        rows.append({"kind": kind, **by_domain, "total": sum(by_domain.values())})
    totals = {d: sum(r[d] for r in rows) for d in DOMAINS}
    rows.append({"kind": "total", **totals, "total": summary["n"]})
    groups = ", ".join(f"{g} {n}" for g, n in summary["groups"].items())
    return table(rows, ["kind", *DOMAINS, "total"]) + f"\n\ngroups: {groups}"


def render_task(task: Task) -> str:
    transcript = replay_gold(task)
    head = f"### {task.id}  kind={task.kind}  domain={task.domain}  intent={task.intent}\n"
    return head + render(transcript.messages, task.tools, add_generation_prompt=False)


def write_jsonl(tasks: list[Task], path: str) -> None:
    """Write to a temporary file and rename, so a reader never sees half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for task in tasks:
            handle.write(task.to_json() + "\n")
    os.replace(partial, target)


def main(config: TasksConfig) -> int:
    if config.n < 0 or config.show < 0:
        raise ValueError("--n and --show must not be negative")
    start = time.perf_counter()
    tasks = generate_tasks(config.split, config.n, config.seed)
    elapsed = time.perf_counter() - start
    if config.out:
        write_jsonl(tasks, config.out)
    summary = {"split": config.split, "seed": config.seed, "out": config.out, "elapsed_s": round(elapsed, 3),
               **summarise(tasks)}
    shown = [render_task(t) for t in tasks[:config.show]]
    if config.json:
        emit({**summary, "shown": shown} if shown else summary, as_json=True)
        return 0
    for text in shown:
        print(text)
    where = f" -> {config.out}" if config.out else ""
    emit(summary, as_json=False, human=lambda s: f"{s['n']} {s['split']} tasks (seed {s['seed']}) in "
                                                 f"{s['elapsed_s']} s{where}\n\n" + summary_table(s))
    return 0
