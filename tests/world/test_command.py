"""``botpsy tasks``: JSONL output, the kind x domain summary, --json and --show."""

from __future__ import annotations

import json

from botpsy.cli import main as cli_main
from botpsy.world.command import TasksConfig, main
from botpsy.world.task import Task


def test_tasks_command_writes_one_task_per_line_and_a_summary(tmp_path, capsys):
    out = tmp_path / "tasks" / "dev.jsonl"
    assert cli_main(["tasks", "--split", "dev", "--n", "40", "--seed", "3", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 40
    first = json.loads(lines[0])
    for key in ["id", "kind", "domain", "split", "messages", "tools", "gold_calls", "expected_state"]:
        assert key in first
    assert first["split"] == "dev"
    assert Task.from_json(lines[0]).id == first["id"]
    printed = capsys.readouterr().out
    assert "kind" in printed and "multi_step" in printed and "total" in printed and "special" in printed


def test_json_summary_counts_add_up_and_show_renders_the_chat_format(capsys):
    assert main(TasksConfig(split="test", n=30, seed=1, show=2, json=True)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 30
    assert sum(sum(by_domain.values()) for by_domain in summary["kinds"].values()) == 30
    assert sum(summary["groups"].values()) == 30
    assert len(summary["shown"]) == 2
    assert all("<|im_start|>user" in text and "<tools>" in text for text in summary["shown"])


def test_bad_arguments_exit_with_a_clear_error(capsys):
    assert cli_main(["tasks", "--n", "-1"]) == 2
    assert "must not be negative" in capsys.readouterr().err
