"""``botpsy solve`` on the scripted backend: records, summary by kind, transcripts."""

from __future__ import annotations

import json

import pytest

from botpsy.agent.show import Style, format_transcript
from botpsy.agent.solve import SolveConfig, load_tasks, main, show_record
from botpsy.world import generate_tasks
from tests.agent.conftest import gold_scripts
from tests.agent.test_chat import write_replies


def write_tasks(path, tasks):
    path.write_text("".join(t.to_json() + "\n" for t in tasks))
    return str(path)


def test_solve_scores_every_task_and_writes_records_and_summary(tmp_path, capsys):
    tasks = generate_tasks("test", 12, seed=0)[:6]
    # every task's gold turns, then one task answered badly: the agent says nothing useful
    scripts = [s for t in tasks[:5] for s in gold_scripts(t)] + ["Done.\n</think>\n\nI cannot help.<|im_end|>"] * 4
    model = write_replies(tmp_path / "r.json", scripts)
    out = tmp_path / "solve"
    code = main(SolveConfig(model=model, tasks=write_tasks(tmp_path / "t.jsonl", tasks), n=6, out=str(out),
                            json=True))
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["tasks"] == 6
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in records] == [t.id for t in tasks]
    assert [r["success"] for r in records] == [True] * 5 + [False]
    assert records[-1]["reasons"] and records[0]["steps"][0]["type"] == "model"
    assert summary["solved"] == 5 and summary["success_rate"] == round(5 / 6, 4)
    assert sum(v["tasks"] for v in summary["by_kind"].values()) == 6
    assert json.loads((out / "summary.json").read_text()) == summary
    assert json.loads((out / "config.json").read_text())["n"] == 6


def test_load_tasks_filters_kinds_and_reports_bad_files(tmp_path):
    tasks = load_tasks(SolveConfig(split="test", n=3, kinds=["sensitive"]))
    assert len(tasks) == 3 and {t.kind for t in tasks} == {"sensitive"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1 is not a task record"):
        load_tasks(SolveConfig(tasks=str(bad), n=1))


def test_transcripts_read_as_a_conversation(tmp_path):
    task = next(t for t in generate_tasks("test", 40, seed=0) if t.kind == "sensitive")
    from botpsy.agent import EpisodeAgent
    from botpsy.runtime.scripted import ScriptedBackend
    from botpsy.world import run_episode

    transcript = run_episode(task, EpisodeAgent(ScriptedBackend(gold_scripts(task))))
    text = format_transcript(transcript.messages)
    lines = text.splitlines()
    assert lines[0] == "user: " + task.messages[-1]["content"]
    assert any(line.startswith("    -> " + task.gold_calls[-1]["name"] + "(") for line in lines)
    assert any('needs_confirmation' in line for line in lines) and "(thinking) Thinking." in text
    colored = format_transcript(transcript.messages, Style(color=True))
    assert "\x1b[2m" in colored
    record = {"task_id": task.id, "kind": task.kind, "success": True, "reasons": [], "messages": transcript.messages}
    assert show_record(record, Style()).startswith(f"== {task.id} (sensitive): solved")


def test_the_first_call_verdict_compares_the_first_turn_with_the_gold():
    from types import SimpleNamespace

    from botpsy.agent.solve import first_call_verdict

    task = SimpleNamespace(gold_turns=[{"calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]}])
    step = lambda calls: SimpleNamespace(type="model", tool_calls=calls)  # noqa: E731
    both = [{"id": "1", "name": "b", "arguments": {}}, {"id": "2", "name": "a", "arguments": {"x": 1}}]
    assert first_call_verdict(task, [step(both)]) == {"exact": True, "made": 2, "gold": 2}
    assert first_call_verdict(task, [step(both[:1]), step(both)])["exact"] is False  # only the first turn counts
    assert first_call_verdict(task, [])["exact"] is False
    assert first_call_verdict(SimpleNamespace(gold_turns=[{"say": "Which one?"}]), []) is None
