"""The task generator: ``generate_tasks(split, n, seed)`` (the ``Task`` record lives in ``task.py``).

``generate_tasks(split, n, seed)`` draws ``n`` tasks. Task ``i`` gets its own rng
(``split|seed|i``) and a world seed shared by a run of ``TASKS_PER_WORLD`` tasks; world seeds
are ``3 * k + split_index``, so train, dev and test never share a world, and every
phrasing list is cut by split (``phrasing.split_items``), so they never share a template.

The gold is not written by hand: each generated task is replayed through its world
(``episode.replay_gold``) and the resulting state change becomes ``expected_state``; a gold
call that errors, or a gold transcript that fails ``checker.evaluate``, is a generator bug and
raises, so every task written passes its own checker.

Example::

    tasks = generate_tasks("train", 100, seed=0)
    world = build_world(tasks[0])          # the task's seeded world, its patch applied
    line = tasks[0].to_json(); again = Task.from_json(line)
"""

from __future__ import annotations

import hashlib
import json
import random

from botpsy.world import kinds, special
from botpsy.world.checker import evaluate
from botpsy.world.episode import replay_gold
from botpsy.world.intent import Ctx
from botpsy.world.phrasing import SPLITS, system_prompt
from botpsy.world.registry import REGISTRY
from botpsy.world.store import diff_snapshots
from botpsy.world.task import Task
from botpsy.world.world import World

TASKS_PER_WORLD = 16  # consecutive tasks share a seeded world: seeding (~5 ms) is most of a task's cost
KIND_WEIGHTS = {"single": 14, "parallel": 10, "multi_step": 12, "multi_turn": 10, "sensitive": 12,
                "injection": 8, "irrelevant": 8, "incomplete": 8, "wrong_value": 9, "unavailable": 9}
KINDS = tuple(KIND_WEIGHTS)
GENERATORS = {"single": kinds.gen_single, "parallel": kinds.gen_parallel, "multi_step": kinds.gen_multi_step,
              "multi_turn": kinds.gen_multi_turn, "sensitive": kinds.gen_sensitive,
              "injection": special.gen_injection, "irrelevant": special.gen_irrelevant,
              "incomplete": kinds.gen_incomplete, "wrong_value": kinds.gen_wrong_value,
              "unavailable": kinds.gen_unavailable}


def world_seed_for(split: str, seed: int, index: int) -> int:
    group = index // TASKS_PER_WORLD
    digest = hashlib.sha256(f"{seed}|{group}".encode()).digest()
    return int.from_bytes(digest[:6], "big") * 3 + SPLITS.index(split)


def generate_tasks(split: str, n: int, seed: int = 0) -> list[Task]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    return [generate_task(split, seed, i) for i in range(n)]


def generate_task(split: str, seed: int, index: int) -> Task:
    rng = random.Random(f"{split}|{seed}|{index}")
    world = World(":memory:", seed=world_seed_for(split, seed, index))
    ctx = Ctx(world, rng, split)
    kind = rng.choices(KINDS, weights=[KIND_WEIGHTS[k] for k in KINDS])[0]
    domains = list(kinds.DOMAINS)
    rng.shuffle(domains)
    blueprint = None
    for domain in domains:
        blueprint = GENERATORS[kind](ctx, domain)
        if blueprint is not None:
            break
    if blueprint is None:  # this world hosts nothing of the kind: fall back to a plain single call
        blueprint = kinds.gen_single(ctx, domains[0])
    return _finish(blueprint, rng, split, f"{split}-s{seed}-{index:06d}", world_seed_for(split, seed, index), ctx)


def offer_tools(rng: random.Random, blueprint: kinds.Blueprint) -> list[str]:
    """The needed and forced tools plus distractors (mostly from the same domain), shuffled."""
    chosen = list(dict.fromkeys(blueprint.needed_tools + blueprint.forced_tools))
    banned = set(chosen) | set(blueprint.excluded_tools)
    same = [n for n, t in REGISTRY.items() if t.domain == blueprint.domain and n not in banned]
    other = [n for n, t in REGISTRY.items() if t.domain != blueprint.domain and n not in banned]
    want = max(3, len(chosen) + rng.randint(2, 4)) - len(chosen)
    n_same = min(len(same), round(want * 0.7))
    chosen += rng.sample(same, n_same) + rng.sample(other, min(len(other), want - n_same))
    rng.shuffle(chosen)
    return chosen


def _finish(blueprint: kinds.Blueprint, rng: random.Random, split: str, task_id: str, world_seed: int,
            ctx: Ctx) -> Task:
    names = offer_tools(rng, blueprint)
    world = ctx.world
    messages = [{"role": "system", "content": system_prompt(world.now, world.owner, world.city)},
                {"role": "user", "content": blueprint.request}]
    gold_calls = [c for turn in blueprint.turns for c in turn.get("calls", [])]
    group = "special" if blueprint.kind in kinds.SPECIAL_KINDS else blueprint.domain
    task = Task(task_id, split, blueprint.kind, blueprint.domain, group, world_seed, messages,
                [REGISTRY[n].spec() for n in names], gold_calls, {}, blueprint.turns, blueprint.checks,
                blueprint.script, blueprint.patch, blueprint.intent, blueprint.template)
    # Replay in the world the blueprint was drawn from: the same seed, so no second build is needed.
    world.offered = set(names)
    world.apply_patch(task.patch)
    initial = world.snapshot()
    transcript = replay_gold(task, world)
    world.close()
    failed = [m for m in transcript.messages if m.get("role") == "tool" and _is_real_error(m["content"])]
    if failed:
        raise RuntimeError(f"gold call failed in {task_id} ({task.intent}): {failed[0]['content']}")
    task.expected_state = diff_snapshots(initial, transcript.final_snapshot)
    verdict = evaluate(task, transcript)  # every emitted task passes its own checker, by construction
    if not verdict.success:
        raise RuntimeError(f"gold of {task_id} ({task.intent}) fails its checker: {verdict.reasons}")
    return task


def _is_real_error(content: str) -> bool:
    result = json.loads(content)
    return isinstance(result, dict) and "error" in result and result["error"] != "needs_confirmation"
