"""`botpsy student` end to end at toy scale: the tiny Qwen2 GGUF stands in for the pulled 0.5B base."""

from __future__ import annotations

import json

import pytest

from botpsy.student import STEPS, StudentConfig, main

pytestmark = pytest.mark.slow


def test_the_student_run_goes_through_every_step_and_resumes(qwen2_gguf, tmp_path, capsys):
    run = tmp_path / "run"
    base = str(qwen2_gguf[0])
    # The tiny tokenizer spells words out, so trajectories run to a few thousand tokens here.
    config = StudentConfig(run=str(run), base=base, peer="", train_tasks=40, dev_tasks=6, test_tasks=12, sft_steps=2,
                           sft_batch_tokens=8192, sft_max_length=8192, lora_rank=4, curve_every=0, curve_examples=2,
                           test_calls=2, threads=1, eval_device_tasks=2, eval_bfcl_items=1,
                           eval_bfcl_categories=["simple_python"], eval_if_items=1, eval_max_tokens=16,
                           teacher_steps=1, mopd_steps=1, mopd_prompts=4, mopd_new_tokens=4, rl1_steps=1, rl2_steps=1,
                           rl_prompts=1, rl2_prompts=1, rl_group=2, rl_new_tokens=4, stage_dev_examples=1, json=True)
    assert main(config) == 0
    timings = json.loads((run / "student.json").read_text())
    assert list(timings) == [s.name for s in STEPS]
    assert json.loads((run / "bases" / "bases.json").read_text()) == {"student": {"name": base, "path": base}}
    assert json.loads((run / "sft" / "meta.json").read_text())["base"] == base
    assert json.loads((run / "gguf" / "meta.json").read_text())["architecture"] == "qwen2"
    summary = json.loads((run / "eval" / "summary.json").read_text())
    assert set(summary["models"]) == {"base-0.5b", "lora"}
    assert summary["chat_format"] == {"base-0.5b": "botpsy", "lora": "botpsy"}  # this toy base carries botpsy's template
    quant = json.loads((run / "eval-quant" / "summary.json").read_text())
    assert set(quant["models"]) == {"bf16", "q8_0", "q4_k_m", "lora"} and "quantization" in quant
    assert (run / "eval-quant" / "lora" / "device.jsonl").read_text() == (run / "eval" / "lora" / "device.jsonl").read_text()
    # Stages 2-4: one adapter on the same base each, every stage's adapter file beside SFT's on the same device draw.
    manifest = json.loads((run / "teachers" / "manifest.json").read_text())["teachers"]
    assert set(manifest) == {"device", "personal", "commerce", "special"}
    assert all("student_dev_call" in t for t in manifest.values())
    for stage in ("mopd", "rl1", "rl1-nopenalty", "rl2"):
        meta = json.loads((run / stage / "meta.json").read_text())
        assert meta["adapter"] == "lora" and meta["base"] == base
    assert json.loads((run / "rl2" / "meta.json").read_text())["init"] == str(run / "rl1")
    stages = json.loads((run / "eval-stages" / "summary.json").read_text())
    assert list(stages["models"]) == ["sft", "mopd", "rl1", "rl1-nopenalty", "rl2"]
    sft_records = (run / "eval-quant" / "lora" / "device.jsonl").read_text()
    assert (run / "eval-stages" / "sft" / "device.jsonl").read_text() == sft_records  # reused, not rerun
    report = (run / "report" / "report.md").read_text()  # the last step shows every stage above
    assert f"_From `botpsy student` → {run}/student.json" in report and "## 6. Device report card" in report
    assert "### Quantization gate" in report and "### Stages beside SFT" in report and "Agent run" not in report
    capsys.readouterr()
    assert main(config) == 0
    assert capsys.readouterr().out.count("done already") == len(STEPS)


def test_the_learning_curve_keeps_the_call_checks_only(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("student_curve", "bench/student_curve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    curves = tmp_path / "curves.jsonl"
    rows = [{"step": 0, "tokens_seen": 0, "dev": {"exact_call_rate": 0.0, "call_examples": 4}},
            {"step": 1, "tokens_seen": 900, "loss": 2.0},
            {"step": 2, "tokens_seen": 1800, "loss": 1.0, "dev": {"loss": 1.2}},
            {"step": 2, "tokens_seen": 1800, "dev": {"loss": 1.1, "exact_call_rate": 0.5, "schema_valid_rate": 0.75}}]
    curves.write_text("".join(json.dumps(r) + "\n" for r in rows))
    points = module.curve_points(curves)
    assert [(p["step"], p["tokens_seen"], p["exact_call_rate"], p["dev_loss"]) for p in points] == [(0, 0, 0.0, None), (2, 1800, 0.5, 1.1)]
    with pytest.raises(FileNotFoundError, match="eval-calls-every"):
        module.curve_points(tmp_path / "missing.jsonl")
