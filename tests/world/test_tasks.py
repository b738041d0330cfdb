"""The task generator: gold replays pass their own checker, splits are disjoint, output is deterministic."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import botpsy
from botpsy.world import KINDS, Task, evaluate, generate_tasks, replay_gold
from botpsy.world.kinds import DOMAINS, INTENTS, JOINERS, SPECIAL_KINDS
from botpsy.world.phrasing import SPLITS, split_items
from botpsy.world.special import QUESTIONS
from botpsy.world.tasks import world_seed_for


@pytest.mark.parametrize("split,seed,n", [("train", 0, 800), ("dev", 1, 600), ("test", 2, 600)])
def test_every_gold_replay_passes_its_own_checker(split, seed, n):
    tasks = generate_tasks(split, n, seed)
    kinds = Counter(t.kind for t in tasks)
    assert set(kinds) == set(KINDS), kinds
    for task in tasks:
        result = evaluate(task, replay_gold(task))
        assert result.success and result.score == 1.0, (task.id, task.kind, task.intent, result.reasons)
        assert result.wasted_calls == 0
        assert all(result.milestones.values())


def test_every_kind_appears_in_every_domain():
    tasks = generate_tasks("train", 900, seed=3)
    pairs = Counter((t.kind, t.domain) for t in tasks)
    missing = [(k, d) for k in KINDS for d in DOMAINS if pairs[(k, d)] == 0]
    assert not missing


def test_tasks_carry_the_fields_later_stages_read():
    for task in generate_tasks("dev", 60, seed=4):
        record = task.to_dict()
        for key in ["id", "kind", "domain", "split", "messages", "tools", "gold_calls", "expected_state", "group"]:
            assert key in record
        assert task.messages[0]["role"] == "system" and task.messages[-1]["role"] == "user"
        assert task.group == ("special" if task.kind in SPECIAL_KINDS else task.domain)
        assert task.domain in DOMAINS
        offered = set(task.tool_names)
        assert {c["name"] for c in task.gold_calls} <= offered
        assert len(offered) == len(task.tool_names) >= 3
        if task.kind == "unavailable":
            assert not task.gold_calls
        if task.kind == "injection":
            assert set(task.checks["forbidden_calls"]) <= offered


def test_the_same_seed_gives_the_same_tasks_and_json_round_trips():
    first = [t.to_json() for t in generate_tasks("train", 80, seed=7)]
    again = [t.to_json() for t in generate_tasks("train", 80, seed=7)]
    other = [t.to_json() for t in generate_tasks("train", 80, seed=8)]
    assert first == again
    assert first != other
    for line in first:
        assert Task.from_json(line).to_json() == line


def test_a_task_record_without_required_fields_is_rejected():
    record = generate_tasks("train", 1, seed=0)[0].to_dict()
    del record["expected_state"]
    with pytest.raises(ValueError, match="expected_state"):
        Task.from_dict(record)


def _phrasing_lists():
    for intent in INTENTS:
        yield intent.name, intent.templates
        if intent.ask:
            yield intent.name + "/ask", intent.ask.templates
            yield intent.name + "/replies", intent.ask.replies
    for index, (_, templates) in enumerate(QUESTIONS):
        yield f"qa{index}", templates


def test_every_phrasing_list_gives_each_split_its_own_templates():
    for name, items in _phrasing_lists():
        parts = {split: split_items(items, split) for split in SPLITS}
        assert all(parts.values()), name
        texts = [set(p) for p in parts.values()]
        assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2]), name
    assert all(split_items(JOINERS, s) for s in SPLITS)


def test_generated_tasks_use_disjoint_templates_and_worlds_across_splits():
    seen_templates, seen_worlds = {}, {}
    for split in SPLITS:
        tasks = generate_tasks(split, 250, seed=0)
        seen_templates[split] = {part for t in tasks for part in t.template.split("|")}
        seen_worlds[split] = {t.world_seed for t in tasks}
    for a, b in [("train", "dev"), ("train", "test"), ("dev", "test")]:
        assert not seen_templates[a] & seen_templates[b], (a, b)
        assert not seen_worlds[a] & seen_worlds[b], (a, b)
    assert world_seed_for("train", 0, 0) % 3 == 0 and world_seed_for("test", 0, 0) % 3 == 2


def test_generation_does_not_depend_on_the_process_hash_seed():
    code = ("import hashlib; from botpsy.world import generate_tasks; "
            "print(hashlib.sha256(''.join(t.to_json() for t in generate_tasks('test', 40, 9)).encode()).hexdigest())")
    here = hashlib.sha256("".join(t.to_json() for t in generate_tasks("test", 40, 9)).encode()).hexdigest()
    root = str(Path(botpsy.__file__).resolve().parents[1])
    for hash_seed in ["4242"]:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": root}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == here
