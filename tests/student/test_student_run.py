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
                           eval_bfcl_categories=["simple_python"], eval_if_items=1, eval_max_tokens=16, json=True)
    assert main(config) == 0
    timings = json.loads((run / "student.json").read_text())
    assert list(timings) == [s.name for s in STEPS]
    assert json.loads((run / "bases" / "bases.json").read_text()) == {"student": {"name": base, "path": base}}
    assert json.loads((run / "sft" / "meta.json").read_text())["base"] == base
    assert json.loads((run / "gguf" / "meta.json").read_text())["architecture"] == "qwen2"
    summary = json.loads((run / "eval" / "summary.json").read_text())
    assert set(summary["models"]) == {"base-0.5b", "bf16"}
    assert summary["chat_format"] == {"base-0.5b": "botpsy", "bf16": "botpsy"}  # this toy base carries botpsy's template
    quant = json.loads((run / "eval-quant" / "summary.json").read_text())
    assert set(quant["models"]) == {"bf16", "q8_0", "q4_k_m"} and "quantization" in quant
    capsys.readouterr()
    assert main(config) == 0
    assert capsys.readouterr().out.count("done already") == len(STEPS)
