"""Device-world benchmark: how fast tasks are generated, and how fast episodes are checked.

    .venv/bin/python bench/world_tasks.py                 # 10,000 tasks -> bench_out/world_tasks.json
    .venv/bin/python bench/world_tasks.py --n 2000 --json

* generation: ``generate_tasks(split, n, seed)`` end to end, the gold replay that produces each
  task's expected state included. Target: 10,000 tasks in under 60 s on the 2-core dev machine.
* checking: ``replay_gold`` + ``evaluate`` on the first ``--check`` tasks, i.e. the cost of one
  episode's world plus its reward, as the RL stage pays it. Every gold replay must pass.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from botpsy.config import parse_config
from botpsy.output import table, write_benchmark
from botpsy.world import evaluate, generate_tasks, replay_gold

TARGET_SECONDS_PER_10K = 60.0


@dataclass
class WorldBenchConfig:
    """Time task generation and gold checking in the device world."""

    n: int = field(default=10000, metadata={"help": "Tasks to generate."})
    split: str = field(default="train", metadata={"help": "Split to draw from.", "choices": ["train", "dev", "test"]})
    seed: int = field(default=0, metadata={"help": "Generator seed."})
    check: int = field(default=1000, metadata={"help": "Tasks to replay and check (0: skip)."})
    out: str = field(default="bench_out/world_tasks.json", metadata={"help": "Where to write the JSON results."})
    json: bool = field(default=False, metadata={"help": "Print the JSON results instead of the table."})


def run(cfg: WorldBenchConfig) -> dict:
    began, cpu_began = time.perf_counter(), time.process_time()
    tasks = generate_tasks(cfg.split, cfg.n, cfg.seed)
    generation_s, generation_cpu_s = time.perf_counter() - began, time.process_time() - cpu_began
    checked, failures = tasks[:cfg.check], []
    began = time.perf_counter()
    for task in checked:
        if not evaluate(task, replay_gold(task)).success:
            failures.append(task.id)
    check_s = time.perf_counter() - began
    per_10k = generation_s * 10000 / max(cfg.n, 1)
    return {
        "bench": asdict(cfg), "python": sys.version.split()[0], "cpus": os.cpu_count(),
        # Wall time is the target; CPU time shows how much of it other processes on the machine took.
        "generation": {"tasks": len(tasks), "seconds": round(generation_s, 3), "cpu_seconds": round(generation_cpu_s, 3),
                       "tasks_per_second": round(len(tasks) / generation_s, 1),
                       "seconds_per_10k": round(per_10k, 2)},
        "checking": {"episodes": len(checked), "seconds": round(check_s, 3),
                     "ms_per_episode": round(1000 * check_s / max(len(checked), 1), 3),
                     "gold_failures": failures},
        "kinds": dict(Counter(t.kind for t in tasks)), "groups": dict(Counter(t.group for t in tasks)),
        "target_seconds_per_10k": TARGET_SECONDS_PER_10K,
        "meets_target": per_10k < TARGET_SECONDS_PER_10K and not failures,
    }


def human(result: dict) -> str:
    g, c = result["generation"], result["checking"]
    rows = [{"stage": "generate", "items": g["tasks"], "seconds": g["seconds"],
             "rate": f"{g['tasks_per_second']} tasks/s",
             "note": f"{g['seconds_per_10k']} s per 10k (target < 60); CPU {g['cpu_seconds']} s"},
            {"stage": "replay+check", "items": c["episodes"], "seconds": c["seconds"],
             "rate": f"{c['ms_per_episode']} ms/episode", "note": f"{len(c['gold_failures'])} gold failures"}]
    return table(rows) + f"\n\nmeets target: {result['meets_target']}"


def main(cfg: WorldBenchConfig) -> int:
    result = run(cfg)
    write_benchmark(result, cfg.out, cfg.json, human)
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main(parse_config(WorldBenchConfig, sys.argv[1:], prog="bench/world_tasks.py")))
