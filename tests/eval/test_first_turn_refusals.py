"""bench/first_turn_refusals.py: first turns that refuse for want of a tool, per model, on shared tasks."""

from __future__ import annotations

import importlib.util
import json


def load():
    spec = importlib.util.spec_from_file_location("first_turn_refusals", "bench/first_turn_refusals.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(task_id, kind, correct, reasoning="", content="", calls=()):
    first = {"type": "model", "reasoning": reasoning, "content": content, "tool_calls": list(calls)}
    return {"id": task_id, "kind": kind, "correct": correct, "steps": [first, {"type": "tool"}]}


REFUSE = dict(reasoning="None of the offered tools can do this, so I'll say so.", content="Sorry, I can't.")


def test_refuses_reads_the_first_model_turn_only():
    refusals = load()
    assert refusals.refuses(record("a", "single", False, **REFUSE))
    assert refusals.refuses(record("a", "single", False, content="Sorry: none of the tools I have right now can do that."))
    assert refusals.refuses(record("a", "single", False, content="That isn't something my available tools can do."))
    assert not refusals.refuses(record("a", "single", True, reasoning="I'll use set_alarm.", calls=[{"name": "set_alarm"}]))
    assert not refusals.refuses(record("a", "single", False, **REFUSE, calls=[{"name": "x"}]))  # it called anyway
    assert not refusals.refuses({"id": "a", "kind": "single", "correct": False, "steps": []})


def test_compare_splits_the_unavailable_kind_from_offered_tools_on_shared_tasks(tmp_path):
    refusals = load()
    sft = [record("t1", "sensitive", True, reasoning="I'll use uninstall_app.", calls=[{"name": "uninstall_app"}]),
           record("t2", "unavailable", True, **REFUSE), record("t3", "single", True, reasoning="I'll use f.", calls=[{}])]
    mopd = [record("t1", "sensitive", False, **REFUSE), record("t2", "unavailable", True, **REFUSE)]  # no t3
    paths = {}
    for label, rows in (("sft", sft), ("mopd", mopd)):
        paths[label] = tmp_path / f"{label}.jsonl"
        paths[label].write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = refusals.compare(paths)
    assert result["tasks"] == 2  # only the tasks both files have
    assert result["models"]["sft"]["tool offered"] == {"tasks": 1, "refuses_first": 0, "solved": 1, "refusing_ids": []}
    assert result["models"]["mopd"]["tool offered"] == {"tasks": 1, "refuses_first": 1, "solved": 0, "refusing_ids": ["t1"]}
    assert result["models"]["mopd"]["unavailable"]["refuses_first"] == 1
