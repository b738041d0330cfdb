"""The speedrun end to end at toy scale: every stage runs, hands over its output, and resumes."""

from __future__ import annotations

import json

import pytest

from botpsy.speedrun import STEPS, SpeedrunConfig, main
from tests.conftest import needs_shared_data

pytestmark = pytest.mark.slow


@needs_shared_data
def test_speedrun_runs_every_stage_and_resumes(tmp_path, capsys):
    run = tmp_path / "run"
    config = SpeedrunConfig(run=str(run), train_tasks=60, dev_tasks=10, test_tasks=20, vocab_size=600, sft_steps=4,
                            teacher_steps=2, mopd_steps=2, mopd_prompts=4, rl1_steps=1, rl2_steps=1, rl_prompts=2,
                            rl2_prompts=1, rl_group=2,
                            agent_tasks=2, threads=1, eval_device_tasks=2, eval_bfcl_categories=["simple_python"],
                            eval_if_items=1, eval_max_tokens=16, json=True)
    assert main(config) == 0
    timings = json.loads((run / "speedrun.json").read_text())
    assert list(timings) == [step.name for step in STEPS]
    for step in STEPS:
        assert (run / step.output).exists(), step.name
    sft_meta = json.loads((run / "sft" / "meta.json").read_text())
    assert sft_meta["stage"] == "sft" and "test_single_call" in sft_meta
    # Every stage of the recipe is evaluated side by side, the release formats beside them.
    models = json.loads((run / "eval" / "summary.json").read_text())["models"]
    assert {"base", "sft", "teacher-device", "teacher-special", "mopd", "rl1", "rl1-nopenalty", "bf16", "q4_k_m"} <= set(models)
    assert json.loads((run / "rl2" / "meta.json").read_text())["stage"] == "rl2"
    capsys.readouterr()
    # A second run finds every step done and redoes nothing.
    assert main(config) == 0
    out = capsys.readouterr().out
    assert out.count("done already") == len(STEPS)
    with pytest.raises(ValueError, match="unknown speedrun steps"):
        main(SpeedrunConfig(run=str(run), only=["nope"]))


def test_a_missing_input_stops_the_run_before_its_first_step(tmp_path, monkeypatch):
    monkeypatch.setenv("BOTPSY_DATA_DIR", str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="before its first step: ifeval data .*input_data.jsonl"):
        main(SpeedrunConfig(run=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()
