"""``botpsy eval`` plumbing with the scripted backend: models side by side, resume, suites' records,
backend failures, the quantization gate; and one slow run on a tiny GGUF."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from botpsy.chat.template import render_completion
from botpsy.cli import main as cli_main
from botpsy.config import ConfigError
from botpsy.eval import harness
from botpsy.eval.harness import EvalConfig, read_records, resolve_models, run_suite
from botpsy.eval.suites import BFCLSuite, DeviceSuite, InstructionSuite, RunSettings, SuiteOptions
from botpsy.runtime.scripted import ScriptedBackend
from botpsy.world import Task, replay_gold
from tests.conftest import needs_shared_data

REFUSAL = "No tool fits.\n</think>\n\nSorry, I cannot help with that.<|im_end|>"
KINDS = ("single", "multi_step", "irrelevant", "unavailable")


def gold_scripts(task: Task) -> list[str]:
    """The task's gold assistant turns as generated text (after ``<think>\\n``)."""
    return [render_completion("Thinking.", m.get("content") or "", m.get("tool_calls"))
            for m in replay_gold(task).messages if m["role"] == "assistant"]


@pytest.fixture(scope="module")
def device_tasks(tmp_path_factory) -> Path:
    """A task file with one test-split task of each of KINDS."""
    from botpsy.world import generate_tasks

    picked = {}
    for task in generate_tasks("test", 60, seed=0):
        picked.setdefault(task.kind, task)
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    path.write_text("".join(picked[k].to_json() + "\n" for k in KINDS))
    return path


def scripted_model(path: Path, scripts: list[str]) -> str:
    path.write_text(json.dumps(scripts))
    return f"scripted:{path}"


def run_cli(*args: str) -> int:
    return cli_main(["eval", *args])


def test_bad_generation_settings_fail_before_anything_runs(tmp_path, capsys):
    model = scripted_model(tmp_path / "m.json", ["Hi.<|im_end|>"])
    assert run_cli("--suite", "device", "--model", model, "--out", str(tmp_path / "out"), "--call-threshold", "-1") == 2
    assert "call_threshold must be in [0, 1]" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_two_models_side_by_side(tmp_path, device_tasks, capsys):
    tasks = [Task.from_json(line) for line in device_tasks.read_text().splitlines()]
    gold = scripted_model(tmp_path / "gold.json", [s for t in tasks for s in gold_scripts(t)])
    refuse = scripted_model(tmp_path / "refuse.json", [REFUSAL] * 40)
    out = tmp_path / "out"
    status = run_cli("--suite", "device", "--model", gold, "--model", refuse, "--label", "gold",
                     "--tasks", str(device_tasks), "--out", str(out), "--max-tokens", "256", "--json")
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert json.loads(capsys.readouterr().out) == summary
    assert summary["constrained_calls"] == {"gold": False, "refuse": False}  # scripted models cannot be masked
    gold_device = summary["models"]["gold"]["suites"]["device"]
    refuse_device = summary["models"]["refuse"]["suites"]["device"]
    assert gold_device["success_rate"] == 1.0 and set(gold_device["by_kind"]) == set(KINDS)
    assert refuse_device["by_kind"]["unavailable"]["success_rate"] == 1.0  # declining is right there
    assert refuse_device["by_kind"]["single"]["success_rate"] == 0.0
    assert summary["models"]["refuse"]["metrics"]["refusal_accuracy"]["device"] == 0.0  # it had to answer
    assert summary["models"]["refuse"]["metrics"]["special_case_accuracy"]["unavailable"] == 1.0
    assert summary["models"]["gold"]["metrics"]["refusal_accuracy"]["device"] == 1.0
    assert summary["models"]["gold"]["metrics"]["multi_turn_solved"]["solved"] == 1
    assert summary["models"]["gold"]["metrics"]["multi_turn_solved"]["tool_calls"] >= 1  # the calls the model made
    assert gold_device["generated_tokens_per_solved"] > 0 and gold_device["ttft_ms_median"] is not None
    # the gold model solves all; the comparison of reasoning tokens uses only what both solved
    assert summary["reasoning_tokens_per_correct"]["device"]["items"] == 1
    spent = summary["reasoning_tokens_spent"]["device"]
    assert spent["gold"]["correct"] == len(tasks) and spent["refuse"]["correct"] == 1
    # paired on the same tasks: the one refusal the refuser got right, gold got right too
    paired = summary["paired"]["device"]["gold vs refuse"]
    assert paired == {"items": len(tasks), "both": 1, "only_a": len(tasks) - 1, "only_b": 0,
                      "p_value": round(2 / 2 ** (len(tasks) - 1), 4)}
    header = (out / "table.md").read_text().splitlines()[0]
    assert header == "| figure | gold | refuse |"
    assert f"| device | gold vs refuse | {len(tasks)} | {len(tasks) - 1} | 0 |" in (out / "table.md").read_text()
    record = json.loads((out / "gold" / "device.jsonl").read_text().splitlines()[0])
    assert {"id", "correct", "steps", "messages", "score", "wasted_calls", "stats"} <= set(record)
    assert record["steps"][0]["type"] == "model" and "loop_events" in record["steps"][0]


def test_resume_runs_only_missing_items(tmp_path, device_tasks):
    tasks = [Task.from_json(line) for line in device_tasks.read_text().splitlines()]
    out = tmp_path / "out"
    model = scripted_model(tmp_path / "m.json", [s for t in tasks for s in gold_scripts(t)])
    args = ["--suite", "device", "--model", model, "--label", "m", "--tasks", str(device_tasks),
            "--out", str(out), "--max-tokens", "256"]
    assert run_cli(*args) == 0
    jsonl = out / "m" / "device.jsonl"
    lines = jsonl.read_text().splitlines()
    assert len(lines) == len(KINDS)
    # Drop the last task's record: a rerun must do that task alone (the script holds only its turns).
    jsonl.write_text("\n".join(lines[:-1]) + "\n")
    model = scripted_model(tmp_path / "m.json", gold_scripts(tasks[-1]))
    assert run_cli(*args) == 0
    redone = jsonl.read_text().splitlines()
    assert len(redone) == len(KINDS) and json.loads(redone[-1])["id"] == tasks[-1].id
    assert json.loads((out / "summary.json").read_text())["models"]["m"]["suites"]["device"]["success_rate"] == 1.0
    # Everything done: a model with no scripts at all is never called.
    model = scripted_model(tmp_path / "m.json", [])
    assert run_cli(*args) == 0
    assert jsonl.read_text().splitlines() == redone


@needs_shared_data
def test_backend_failure_is_recorded_then_retried(tmp_path):
    suite = InstructionSuite("ifeval", SuiteOptions(limit=2))
    items = suite.items()
    path = tmp_path / "ifeval.jsonl"
    records = run_suite(ScriptedBackend([REFUSAL]), suite, items, RunSettings(max_tokens=64), path)
    assert "backend_error" not in records[0] and "scripted backend has only 1" in records[1]["backend_error"]
    assert records[1]["correct"] is False and suite.summarize(records)["items"] == 2
    backend = ScriptedBackend([REFUSAL])
    records = run_suite(backend, suite, items, RunSettings(max_tokens=64), path)
    assert len(backend.calls) == 1 and all("backend_error" not in r for r in records)
    assert set(read_records(path)) == {items[0].id, items[1].id}


@needs_shared_data
def test_instruction_records_score_the_answer_not_the_reasoning(tmp_path):
    suite = InstructionSuite("ifeval", SuiteOptions(limit=3))
    items = suite.items()
    answer = "thinking, with, commas\n</think>\n\nhere is a short answer without any comma<|im_end|>"
    records = run_suite(ScriptedBackend([answer] * 3), suite, items, RunSettings(max_tokens=64), tmp_path / "a.jsonl")
    assert all(r["response"] == "here is a short answer without any comma" for r in records)
    no_comma = [r for r in records if "punctuation:no_comma" in r["scores"]["instruction_id_list"]]
    assert no_comma and all(r["scores"]["strict"][r["scores"]["instruction_id_list"].index("punctuation:no_comma")]
                            for r in no_comma)
    assert all(r["generations"][0]["reasoning_tokens"] > 0 for r in records)
    assert suite.summarize(records)["items"] == 3


def test_bfcl_records_gold_correct_and_wrong_answers(tmp_path):
    from botpsy.eval.bfcl.gold import gold_output

    suite = BFCLSuite(SuiteOptions(limit=2, bfcl_categories=["simple_python", "irrelevance"]))
    items = suite.items()
    scripts = [gold_output(i.payload) if i.payload.category == "simple_python" else REFUSAL for i in items]
    records = run_suite(ScriptedBackend(scripts), suite, items, RunSettings(max_tokens=512), tmp_path / "b.jsonl")
    assert all(r["correct"] for r in records), [r["error"] for r in records]
    assert records[0]["calls"] and records[0]["generations"][0]["tool_calls"]
    wrong = run_suite(ScriptedBackend([REFUSAL] * 4), suite, items, RunSettings(max_tokens=512), tmp_path / "w.jsonl")
    assert [r["correct"] for r in wrong] == [False, False, True, True]
    summary = suite.summarize(wrong)
    assert summary["accuracy"] == 0.5 and summary["categories"]["irrelevance"]["accuracy"] == 1.0
    assert "web_search_base" in summary["left_out"]


@needs_shared_data
def test_concurrent_items_keep_their_order(tmp_path):
    suite = InstructionSuite("ifbench", SuiteOptions(limit=5))
    items = suite.items()
    records = run_suite(ScriptedBackend([REFUSAL] * 5), suite, items, RunSettings(max_tokens=64),
                        tmp_path / "c.jsonl", concurrency=3)
    assert [r["id"] for r in records] == [i.id for i in items]
    assert len(read_records(tmp_path / "c.jsonl")) == 5


def test_device_sample_has_every_kind():
    from botpsy.world import KINDS as ALL_KINDS

    items = DeviceSuite(SuiteOptions(limit=len(ALL_KINDS))).items()
    assert {i.payload.kind for i in items} == set(ALL_KINDS)


def test_labels_and_bad_arguments(tmp_path):
    config = EvalConfig(model=["runs/x/gguf/model-q8_0.gguf", "runs/y/gguf/model-q8_0.gguf", "http://h:8000/v1"])
    assert [label for label, _ in resolve_models(config)] == ["q8_0", "q8_0-2", "h-8000"]
    with pytest.raises(ConfigError):
        resolve_models(EvalConfig(model=["a"], label=["x", "y"]))
    with pytest.raises(ConfigError):
        resolve_models(EvalConfig())
    with pytest.raises(FileNotFoundError, match="q8_0"):
        (tmp_path / "model-bf16.gguf").write_text("")
        resolve_models(EvalConfig(compare_quants=str(tmp_path)))
    assert run_cli("--suite", "device,nope", "--model", "x") == 2
    assert run_cli("--suite", "ifeval", "--model", "scripted:/nonexistent.json", "--out", str(tmp_path / "o")) == 2


def test_compare_quants_flags_a_drop(tmp_path, monkeypatch, device_tasks):
    tasks = [Task.from_json(line) for line in device_tasks.read_text().splitlines()]
    for name in ("model-bf16.gguf", "model-q8_0.gguf", "model-q4_k_m.gguf"):
        (tmp_path / name).write_text("")
    gold = [s for t in tasks for s in gold_scripts(t)]
    scripts = {"bf16": gold, "q8_0": gold, "q4_k_m": [REFUSAL] * 40}  # Q4_K_M "lost" its skill
    monkeypatch.setattr(harness, "open_model", lambda model, config: ScriptedBackend(
        scripts[next(k for k in scripts if k in Path(model).name)]))
    out = tmp_path / "out"
    args = ["--compare-quants", str(tmp_path), "--suite", "device", "--tasks", str(device_tasks),
            "--out", str(out), "--max-tokens", "256", "--max-drop", "0.1"]
    assert run_cli(*args) == 1
    quant = json.loads((out / "summary.json").read_text())["quantization"]
    assert quant["deltas"]["q8_0"]["device"] == 0.0
    assert quant["deltas"]["q4_k_m"]["device"] == -0.75
    assert [(f["model"], f["metric"]) for f in quant["flagged"]] == [("q4_k_m", "device")]
    assert "FLAGGED" in (out / "table.md").read_text()
    # A tolerance wide enough passes (the records are reused: nothing runs again).
    assert run_cli(*args[:-1], "0.8") == 0


@pytest.mark.slow
@needs_shared_data
def test_eval_on_a_tiny_gguf(tmp_path, tiny_checkpoint):
    from botpsy.export.command import ExportConfig, export_checkpoint

    export_checkpoint(ExportConfig(checkpoint=str(tiny_checkpoint), out=str(tmp_path), formats="q8_0", threads=1))
    out = tmp_path / "eval"
    status = run_cli("--suite", "device,ifeval,bfcl", "--bfcl-category", "simple_python", "--model",
                     str(tmp_path / "model-q8_0.gguf"), "--limit", "2", "--max-tokens", "24", "--max-turns", "2",
                     "--threads", "1", "--out", str(out))
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())["models"]["q8_0"]
    records = [json.loads(line) for suite in ("device", "ifeval", "bfcl")
               for line in (out / "q8_0" / f"{suite}.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all("backend_error" not in r for r in records)
    from botpsy.eval.metrics import all_generations, cap_hit_rate

    generations = all_generations(records)
    assert summary["metrics"]["generations"] == len(generations) > 0
    assert summary["metrics"]["cap_hit_rate"] == cap_hit_rate(generations)
    assert all(g["completion_tokens"] <= 24 and g["ttft_ms"] > 0 for g in generations)


def test_records_of_a_rebuilt_model_are_set_aside(tmp_path):
    import os

    model = tmp_path / "model-q8_0.gguf"
    model.write_bytes(b"first build")
    folder = tmp_path / "out" / "q8_0"
    assert harness.set_aside_stale_records(folder, harness.model_fingerprint(str(model))) is None
    (folder / "device.jsonl").write_text('{"id": "t1"}\n')
    # Same model: records kept.
    assert harness.set_aside_stale_records(folder, harness.model_fingerprint(str(model))) is None
    assert (folder / "device.jsonl").is_file()
    # Rebuilt byte for byte (a fresh clone exporting the same adapter): a new mtime, records kept.
    model.write_bytes(b"first build")
    os.utime(model, ns=(1, 1))
    assert harness.set_aside_stale_records(folder, harness.model_fingerprint(str(model))) is None
    assert (folder / "device.jsonl").is_file()
    # Rebuilt with other weights of the same size: old records moved aside, nothing lost.
    model.write_bytes(b"other build")
    moved = harness.set_aside_stale_records(folder, harness.model_fingerprint(str(model)))
    assert moved == folder.with_name("q8_0.stale") and (moved / "device.jsonl").is_file()
    assert not (folder / "device.jsonl").exists()
    assert harness.model_fingerprint("http://localhost:8000/v1") == "http://localhost:8000/v1"


def test_records_stamped_by_path_and_mtime_resume_and_are_restamped(tmp_path):
    from botpsy.eval.suites import RunSettings

    model = tmp_path / "model-lora.gguf"
    model.write_bytes(b"adapter")
    folder = tmp_path / "out" / "lora"
    folder.mkdir(parents=True)
    settings = RunSettings(max_tokens=64)
    old = harness.run_fingerprint(str(model), settings, True, legacy=True)
    assert str(model) in old  # the old stamp: path and mtime
    (folder / "model.json").write_text(json.dumps({"fingerprint": old}))
    (folder / "device.jsonl").write_text('{"id": "t1"}\n')
    new = harness.run_fingerprint(str(model), settings, True)
    assert harness.set_aside_stale_records(folder, new, also=(old,)) is None
    assert (folder / "device.jsonl").is_file()
    assert json.loads((folder / "model.json").read_text())["fingerprint"] == new
    # Without the old stamp among the accepted ones, the records would have been set aside.
    (folder / "model.json").write_text(json.dumps({"fingerprint": old}))
    assert harness.set_aside_stale_records(folder, new) is not None


def test_records_made_with_other_generation_settings_are_set_aside(tmp_path):
    from botpsy.eval.suites import RunSettings

    model = tmp_path / "model-q8_0.gguf"
    model.write_bytes(b"weights")
    folder = tmp_path / "out" / "q8_0"
    settings = RunSettings(max_tokens=64)
    # --from-records reads the settings back from the stamp
    named = harness.fingerprint_settings(harness.run_fingerprint(str(model), settings, True))
    assert named["max_tokens"] == 64 and named["constrain_calls"] is True
    assert harness.fingerprint_settings("model.gguf:7:abc") == {}
    assert harness.set_aside_stale_records(folder, harness.run_fingerprint(str(model), settings, True)) is None
    (folder / "device.jsonl").write_text('{"id": "t1"}\n')
    assert harness.set_aside_stale_records(folder, harness.run_fingerprint(str(model), settings, True)) is None
    # Constrained calls switched off: the old records are not resumed.
    moved = harness.set_aside_stale_records(folder, harness.run_fingerprint(str(model), settings, False))
    assert moved is not None and (moved / "device.jsonl").is_file()
    (folder / "device.jsonl").write_text('{"id": "t1"}\n')
    # Another token cap: the same.
    assert harness.set_aside_stale_records(
        folder, harness.run_fingerprint(str(model), RunSettings(max_tokens=128), False)) is not None
    # Calls kept to turns with tools (--calls-need-tools): new records; off, the older stamps still match.
    plain = harness.run_fingerprint(str(model), RunSettings(max_tokens=128), True)
    assert "calls_need_tools" not in plain
    assert harness.run_fingerprint(str(model), RunSettings(max_tokens=128, calls_need_tools=True), True) != plain
    # where nothing is masked (an endpoint, a native template) the setting changes nothing, nor the stamp
    unmasked = harness.run_fingerprint(str(model), RunSettings(max_tokens=128), False)
    assert harness.run_fingerprint(str(model), RunSettings(max_tokens=128, calls_need_tools=True), False) == unmasked
    # The call gate likewise: off, older stamps match; on, new records; never applied, the same stamp.
    assert "call_threshold" not in plain
    gated = harness.run_fingerprint(str(model), RunSettings(max_tokens=128, call_threshold=0.5), True)
    assert gated != plain and '"call_threshold": 0.5' in gated
    assert harness.run_fingerprint(str(model), RunSettings(max_tokens=128, call_threshold=0.5), False) == unmasked
    native = RunSettings(max_tokens=128, chat_format="native")
    assert harness.run_fingerprint(str(model), replace(native, call_threshold=0.5), True) == \
        harness.run_fingerprint(str(model), native, True)


def test_from_records_summarizes_without_a_model_and_keeps_other_settings(tmp_path, device_tasks, capsys):
    tasks = [Task.from_json(line) for line in device_tasks.read_text().splitlines()]
    out = tmp_path / "out"
    gold = scripted_model(tmp_path / "gold.json", [s for t in tasks for s in gold_scripts(t)])
    base = ["--suite", "device", "--tasks", str(device_tasks), "--out", str(out), "--max-tokens", "256"]
    assert run_cli(*base, "--model", gold, "--label", "think") == 0
    assert run_cli(*base, "--model", gold, "--label", "nothink", "--no-enable-thinking") == 0
    alone = json.loads((out / "summary.json").read_text())["models"]["nothink"]["suites"]["device"]
    stamps = {label: (out / label / "model.json").read_text() for label in ("think", "nothink")}
    # One table for both, with settings of neither run and a model with no scripts left: nothing is
    # generated, nothing is set aside, and each label's records are read as they are.
    empty = scripted_model(tmp_path / "empty.json", [])
    assert run_cli(*base, "--model", empty, "--label", "think", "--model", empty, "--label", "nothink",
                   "--max-tokens", "64", "--from-records") == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["models"]["think"]["suites"]["device"]["success_rate"] == 1.0
    assert summary["models"]["nothink"]["suites"]["device"] == alone  # (the gold scripts were written for thinking on)
    assert summary["chat_format"] == {"think": "botpsy", "nothink": "botpsy"}
    assert not list(out.glob("*.stale"))
    assert {label: (out / label / "model.json").read_text() for label in stamps} == stamps
    # A missing item is an error that says how to finish it, not a silent partial table.
    jsonl = out / "think" / "device.jsonl"
    jsonl.write_text("\n".join(jsonl.read_text().splitlines()[:-1]) + "\n")
    capsys.readouterr()
    assert run_cli(*base, "--model", empty, "--label", "think", "--from-records") == 2
    assert f"1 of the {len(tasks)} device items are not recorded" in capsys.readouterr().err
    assert run_cli(*base, "--model", empty, "--label", "never", "--from-records") == 2
    assert "no records" in capsys.readouterr().err
