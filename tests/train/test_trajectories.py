"""`botpsy data`: executed gold trajectories with short reasoning, both thinking modes, corpus and provenance."""

from __future__ import annotations

import json

from botpsy.cli import main as cli_main
from botpsy.world import KINDS


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_assistant_turn_has_short_reasoning(device_data):
    rows = read(device_data / "train.jsonl")
    assert {r["kind"] for r in rows} == set(KINDS)
    for row in rows:
        turns = [m for m in row["messages"] if m["role"] == "assistant"]
        assert turns and all(0 < len(m["reasoning_content"].split()) <= 80 for m in turns), row["id"]


def test_both_thinking_modes_and_special_behaviours(device_data):
    rows = read(device_data / "train.jsonl")
    assert 0.3 < sum(r["thinking"] for r in rows) / len(rows) < 0.7
    irrelevant = next(r for r in rows if r["kind"] == "irrelevant")
    assert not any(m.get("tool_calls") for m in irrelevant["messages"])
    injection = next(r for r in rows if r["kind"] == "injection")
    assert "ignore" in injection["messages"][-1]["reasoning_content"]


def test_call_reasoning_grounds_each_call_before_counting_them(device_data):
    rows = read(device_data / "train.jsonl")
    parallel = [m for r in rows if r["kind"] == "parallel" for m in r["messages"]
                if m["role"] == "assistant" and len(m.get("tool_calls") or []) > 1]
    assert parallel
    for turn in parallel:
        reasoning = turn["reasoning_content"]
        assert reasoning.startswith("I'll use "), reasoning  # a call named first, never a count
        assert reasoning.count("I'll use ") == len(turn["tool_calls"])
        assert reasoning.endswith("so I'll make them at once.")


def test_corpus_meta_and_splits(device_data):
    corpus = (device_data / "corpus.txt").read_text()
    assert "<|im_start|>system\n# Tools" in corpus and "<tool_call>" in corpus
    meta = json.loads((device_data / "meta.json").read_text())
    assert meta["splits"]["train"]["examples"] == 120 and meta["splits"]["test"]["examples"] == 20
    assert {r["split"] for r in read(device_data / "test.jsonl")} == {"test"}


def test_missing_task_file_is_a_clear_error(tmp_path, capsys):
    assert cli_main(["data", "--tasks", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "run `botpsy tasks" in capsys.readouterr().err
