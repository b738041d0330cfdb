"""``botpsy report`` on a hand-made run folder: every section with its numbers, valid PNGs, "not run"
lines for absent stages, and a corrupt file named while the rest still renders."""

from __future__ import annotations

import doctest
import json
import shutil
from pathlib import Path

import pytest

from botpsy import cli
from botpsy.bench.card import write_card
from botpsy.report import folder, plots, sections
from botpsy.report.command import SECTIONS, ReportConfig, main
from botpsy.speedrun import STEPS
from tests.bench.test_card import make_card

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRY1 = Path(__file__).resolve().parents[2] / "runs" / "try1"


def write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(record) + "\n" for record in data))
    else:
        path.write_text(json.dumps(data))


def device_entry(model: str, success: float, loop_rate: float) -> dict:
    return {"model": model, "suites": {"device": {"tasks": 4, "success_rate": success, "mean_score": 0.5, "turns": 3.0}},
            "metrics": {"generations": 8, "loop_rate": loop_rate, "cap_hit_rate": 0.125}}


def make_run(run: Path) -> Path:
    """A small run folder with every file the report reads, numbers chosen to be recognisable."""
    write(run / "speedrun.json", {"tasks": {"seconds": 10.0, "output": "x"}, "sft": {"seconds": 30.0, "output": "y"}})
    write(run / "speedrun_config.json", {"preset": "tiny", "sft_steps": 7})
    write(run / "tasks" / "test.jsonl", [{"id": i} for i in range(3)])
    write(run / "tasks" / "config.test.json", {"seed": 2})
    write(run / "data" / "meta.json", {"splits": {
        "train": {"examples": 8, "thinking_on": 4, "kinds": {"single": 5, "parallel": 3}},
        "test": {"examples": 2, "thinking_on": 1, "kinds": {"single": 2}}}})
    write(run / "tokenizer" / "meta.json", {"vocab_size": 600, "chars_per_token": 3.25, "corpus_lines": 77})
    write(run / "base" / "meta.json", {"preset": "tiny", "model_type": "qwen3_5_text",
                                       "spec": {"hidden_size": 256, "num_hidden_layers": 4}})
    write(run / "sft" / "meta.json", {"stage": "sft", "parameters": 12345, "dev": {
        "loss": 0.75, "call_examples": 24, "parse_rate": 1.0, "schema_valid_rate": 0.5, "exact_call_rate": 0.25},
        "test_single_call": {"call_examples": 40, "parse_rate": 0.9, "schema_valid_rate": 0.625, "exact_call_rate": 0.375}})
    write(run / "sft" / "curves.jsonl", [{"step": s, "loss": 4.0 - s / 2, "lr": 0.001, "tokens_per_s": 900.0}
                                         for s in range(1, 6)] + [{"step": 5, "dev": {"loss": 0.75, "parse_rate": 1.0}}])
    write(run / "teachers" / "commerce" / "curves.jsonl", [{"step": s, "loss": 2.0 / s} for s in (1, 2)])
    write(run / "rl1" / "meta.json", {"stage": "rl1"})
    write(run / "rl1" / "curves.jsonl", [{"step": s, "loss": 1.0, "reward": 0.25 * s, "kl": 0.01 * s, "loop_rate": 0.5 / s,
                                          "reasoning_tokens": 60 - s, "reward_by_domain": {"device": 0.5, "commerce": 0.125}}
                                         for s in (1, 2, 3)] + [{"step": 3, "dev": {"tasks": 4, "reward": 0.5}}])
    write(run / "mopd" / "curves.jsonl", [{"step": s, "loss": 1.5, "kl": 0.5, "eval": {
        "student": {"device": {"exact": 0.25 * s}}, "teacher": {"device": {"exact": 1.0}}}} for s in (0, 1)])
    parity = {"bf16": (1.0, 1e-5, True), "q4_k_m": (0.995, 3.5e-3, True)}
    write(run / "gguf" / "parity.json", {"checkpoint": str(run / "sft"), "passed": True, "missed": [], "formats": {
        name: {"file": f"model-{name}.gguf", "positions": 886, "top1_agreement": top1, "top1_agreement_raw": top1,
               "mean_kl": kl, "max_abs_logit_diff": 0.25, "greedy_identical": 1.0, "passed": passed,
               "thresholds": {"min_top1": 0.9, "max_kl": 0.03, "greedy_identical": False}}
        for name, (top1, kl, passed) in parity.items()}})
    write(run / "gguf" / "meta.json", {"files": {"q4_k_m": {"file": "model-q4_k_m.gguf", "bytes": 4_900_000,
                                                             "tensor_types": {"Q4_K": 27, "F32": 23}}}})
    write(run / "eval" / "summary.json", {
        "suites": ["device"], "models": {"base": device_entry(str(run / "base"), 0.0, 1.0),
                                         "q4_k_m": device_entry(str(run / "gguf" / "model-q4_k_m.gguf"), 0.75, 0.0)},
        "reasoning_tokens_per_correct": {"device": {"items": 3, "per_model": {"base": None, "q4_k_m": 41.5}}},
        "reasoning_tokens_spent": {"device": {
            "base": {"items": 4, "correct": 0, "reasoning_tokens": 1600, "per_correct": None},
            "q4_k_m": {"items": 4, "correct": 3, "reasoning_tokens": 150, "per_correct": 50.0}}}})
    write(run / "agent" / "summary.json", {"model": "model-q4_k_m.gguf", "tasks": 8, "solved": 2, "success_rate": 0.25,
                                           "loop_rate": 0.125, "by_kind": {"single": {"tasks": 8, "solved": 2,
                                                                                      "success_rate": 0.25}}})
    card = make_card()
    card["plots"] = ["speed.png"]
    write_card(card, run / "bench")
    (run / "bench" / "speed.png").write_bytes(PNG_MAGIC)
    return run


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("report") / "run")
    result = write_json_result(run)
    return run, (run / "report" / "report.md").read_text(), result


def write_json_result(run: Path) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(ReportConfig(run=str(run), json=True)) == 0
    return json.loads(out.getvalue())


def test_every_section_is_there_with_where_it_came_from(full_report):
    run, text, result = full_report
    for number, (title, _) in enumerate(SECTIONS, 1):
        assert f"## {number}. {title}" in text
    assert result["problems"] == [] and result["not_run"] == []
    assert f"_From `botpsy sft` → {run}/sft/curves.jsonl_" in text
    assert f"_From `botpsy parity` → {run}/gguf/parity.json_" in text
    assert f"_From the `rl1` stage → {run}/rl1/curves.jsonl_" in text


def test_the_numbers_are_the_files_numbers(full_report):
    _, text, _ = full_report
    assert "| tasks | 10.0 | 25.0% |" in text and "| sft | 30.0 | 75.0% |" in text and "| **total (stages timed here)** | 40.0 | 100% |" in text
    assert "| single | 5 | 2 |" in text and "| thinking on | 4 (50.0%) | 1 (50.0%) |" in text
    assert "| test | 3 | 2 |" in text and "vocabulary 600, 3.25 characters per token" in text
    assert "12,345 parameters" in text
    assert "| sft | 0.75 | 24 | 100.0% | 50.0% | 25.0% | 40 | 90.0% | 62.5% | 37.5% |" in text
    assert "| q4_k_m | 886 | 99.5% | 3.50e-03 | 0.25 | 100.0% | top-1 ≥ 90.0%, KL ≤ 0.03 | yes |" in text
    assert "| q4_k_m | `model-q4_k_m.gguf` | 4.9 MB | 4,900,000 | Q4_K 27, F32 23 |" in text
    assert "| device: success | 0.0% | 75.0% |" in text
    assert "| reasoning tokens per correct device item (3 items all got right) | - | 41.5 |" in text
    assert ("| reasoning tokens spent per correct device item (all items, each model alone) | "
            "none correct (1,600 spent) | 50 |") in text
    assert "| model-q8_0 | 25 | 250.0 (225.0-275.0) | 5.0 (4.5-5.5) | 0.020 |" in text  # TTFT cold / warm
    assert "| model-q8_0 | 256 | 3000.0 (2700.0-3300.0) | 900.0 (810.0-990.0) |" in text  # prefill / decode
    assert "| model-q8_0 | Q8_0 | 4.0 MiB | 900.0 | 2800.0 | 0.32 | - |" in text  # roofline
    assert "![speed](../bench/speed.png)" in text and "[bench/card.md](../bench/card.md)" in text
    assert "| success rate | 25.0% |" in text and "| single | 8 | 2 | 25.0% | - |" in text


def test_plots_are_valid_pngs_linked_from_the_report(full_report):
    run, text, result = full_report
    names = [Path(p).name for p in result["plots"]]
    assert names == ["curves_sft.png", "curves_teachers_commerce.png", "curves_mopd.png", "curves_rl1.png",
                     "eval_device.png"]
    for path in map(Path, result["plots"]):
        assert path.parent == run / "report" and path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 1000
        assert f"]({path.name})" in text


def test_later_training_stages_appear_in_recipe_order_with_their_series(full_report):
    _, text, _ = full_report
    assert text.index("### sft") < text.index("### teachers/commerce") < text.index("### mopd") < text.index("### rl1")
    for series in ("reward", "kl", "loop_rate", "reasoning_tokens", "reward_by_domain: device"):
        assert f"| {series} | 3 | 3 |" in text
    assert "| reward: dev | 1 | 3 | 0.5 | 0.5 |" in text and "tasks" not in text.split("### rl1")[1].split("##")[0]
    assert "| eval: exact: student device | 2 | 1 | 0.25 | 0.125 |" in text
    assert "lr" not in plots.curve_series([{"step": 1, "lr": 0.1, "loss": 1.0}])


def test_missing_stages_say_how_to_produce_them(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    result = write_json_result(run)
    text = (run / "report" / "report.md").read_text()
    for step in ("sft", "data", "parity", "export", "eval", "bench", "agent"):
        assert f"produce it with `botpsy speedrun --run {run} --only {step}`" in text, step
    assert "produce it with `botpsy speedrun`" in text  # speedrun.json itself
    assert result["problems"] == [] and str(run / "eval" / "summary.json") in result["not_run"]
    assert len([line for line in text.splitlines() if line.startswith("## ")]) == len(SECTIONS)


def test_a_student_run_reads_its_own_files_and_shows_its_gate(tmp_path):
    """A folder `botpsy student` made: its timings and config, the pulled bases, the quantization gate
    and the stage table beside the main evaluation; no agent part; missing stages made by `botpsy student`."""
    run = tmp_path / "student"
    write(run / "student.json", {"sft": {"seconds": 6840.0, "output": "x"}, "eval": {"seconds": 360.0, "output": "y"}})
    write(run / "student_config.json", {"base": "qwen2.5-coder-0.5b", "sft_steps": 360})
    write(run / "bases" / "bases.json", {"student": {"name": "qwen2.5-coder-0.5b", "path": "/cache/q05.gguf"}})
    write(run / "sft" / "meta.json", {"stage": "sft", "parameters": 638969216, "trainable_parameters": 8801792})
    write(run / "eval-quant" / "summary.json", {"suites": ["device"], "models": {
        "bf16": device_entry(str(run / "gguf" / "model-bf16.gguf"), 0.7, 0.0),
        "q4_k_m": device_entry(str(run / "gguf" / "model-q4_k_m.gguf"), 0.6, 0.0)}})
    result = write_json_result(run)
    text = (run / "report" / "report.md").read_text()
    assert f"_From `botpsy student` → {run}/student.json, {run}/student_config.json_" in text
    assert "| sft | 6840.0 | 95.0% |" in text and "Student config (as of the last `botpsy student` call" in text
    assert "- student: `qwen2.5-coder-0.5b` at /cache/q05.gguf" in text
    assert "- SFT adapter: 8,801,792 trained parameters of 638,969,216" in text
    assert "tokenizer" not in text.lower() and "Agent run" not in text and "agent" not in " ".join(result["sections"]).lower()
    gate = text.split("### Quantization gate")[1]
    assert "| device: success | 70.0% | 60.0% |" in gate.split("###")[0]
    assert f"produce it with `botpsy student --run {run} --only eval`" in text  # eval/summary.json
    assert f"produce it with `botpsy student --run {run} --only stages-eval`" in text
    assert f"produce it with `botpsy student --run {run} --only bench`" in text
    assert [Path(p).name for p in result["plots"]] == ["eval_quant_device.png"]
    assert "#### Every figure" in gate and "#### By release format" not in gate  # one table, in the gate's order


def test_a_corrupt_file_is_named_and_the_rest_still_renders(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    for stage in ("teachers", "mopd", "rl1"):  # fewer plots: this test is about the broken files
        shutil.rmtree(run / stage)
    (run / "sft" / "meta.json").write_text('{"stage": "sft", ')
    (run / "gguf" / "parity.json").write_text(json.dumps({"formats": {"bf16": {"passed": True}}}))  # no mean_kl
    assert cli.main(["report", "--run", str(run)]) == 0
    text = (run / "report" / "report.md").read_text()
    assert f"**Problem:** {run}/sft/meta.json is not valid JSON" in text
    assert f"rerun `botpsy speedrun --run {run} --only sft` to rewrite it" in text
    assert f"the release formats section could not be rendered from {run}/gguf/parity.json" in text
    assert text.index("**Problems found**") < text.index("## 1. Run summary")
    assert "| tasks | 10.0 | 25.0% |" in text and "| success rate | 25.0% |" in text and "![sft curves]" in text
    captured = capsys.readouterr()
    assert "problem:" in captured.out and "2 file(s) could not be read" in captured.err


def test_a_card_that_breaks_the_schema_is_named(tmp_path):
    run = tmp_path / "run"
    write(run / "bench" / "card.json", {"schema_version": 1})
    result = write_json_result(run)
    assert len(result["problems"]) == 1 and "card.json does not match the card schema" in result["problems"][0]


def test_no_run_folder_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["report", "--run", str(tmp_path / "nope")]) == 2
    assert "run folder" in capsys.readouterr().err


def test_speedrun_ends_with_bench_then_report():
    assert [(s.name, s.output) for s in STEPS[-2:]] == [("bench", "bench/card.json"), ("report", "report/report.md")]


def test_doctests():
    for module in (folder, plots, sections):
        assert doctest.testmod(module).failed == 0


@pytest.mark.skipif(not (TRY1 / "speedrun.json").is_file(), reason="runs/try1 (a real run folder, not in git) is absent")
def test_the_real_try1_run(tmp_path):
    assert main(ReportConfig(run=str(TRY1), out=str(tmp_path / "report.md"))) == 0
    text = (tmp_path / "report.md").read_text()
    parity = json.loads((TRY1 / "gguf" / "parity.json").read_text())
    for name, result in parity["formats"].items():
        assert f"| {name} | {result['positions']} | {100 * result['top1_agreement']:.1f}%" in text
    assert "**Problems found**" not in text and (tmp_path / "curves_sft.png").read_bytes()[:8] == PNG_MAGIC
