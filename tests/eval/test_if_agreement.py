"""botpsy's checkers reproduce the official IFEval and IFBench verdicts on the reference responses
(``botpsy/evaldata/*/reference``): at least 99% of items agree, strict and loose."""

from __future__ import annotations

import json

import pytest

from botpsy.eval.instructions.agreement import AgreementConfig, check_benchmark, default_data_dir, main

DATA = default_data_dir()
pytestmark = pytest.mark.skipif(
    not (DATA / "ifeval" / "reference").is_dir(),
    reason=f"reference data not found under {DATA} (set BOTPSY_DATA_DIR)",
)


@pytest.fixture(scope="module")
def results():
    return {name: check_benchmark(name, DATA) for name in ("ifeval", "ifbench")}


@pytest.mark.parametrize("name,items", [("ifeval", 540), ("ifbench", 294)])
def test_every_reference_response_is_matched_to_its_prompt(results, name, items):
    assert results[name]["items"] == items
    assert results[name]["unmatched"] == []


@pytest.mark.parametrize("name", ["ifeval", "ifbench"])
@pytest.mark.parametrize("mode", ["strict", "loose"])
def test_item_agreement_is_at_least_99_percent(results, name, mode):
    assert results[name][f"agreement_{mode}"] >= 99.0, results[name]["disagreements"]


def test_only_the_pos_tagger_instruction_is_skipped(results):
    assert results["ifeval"]["skipped_items"] == []
    skipped = {i for item in results["ifbench"]["skipped_items"] for i in item["skipped"]}
    assert skipped == {"words:start_verb"}
    assert len(results["ifbench"]["skipped_items"]) == 6


def test_main_writes_the_agreement_json(tmp_path, capsys):
    out = tmp_path / "if_agreement.json"
    assert main(AgreementConfig(benchmark=["ifbench"], out=str(out), json=True)) == 0
    written = json.loads(out.read_text())
    assert written["ifbench"]["comparable_items"] == 288
    assert json.loads(capsys.readouterr().out) == written


def test_missing_data_is_a_clear_error(tmp_path, capsys):
    config = AgreementConfig(data_dir=str(tmp_path), out=str(tmp_path / "x.json"))
    assert main(config) == 2
    assert "not found" in capsys.readouterr().out
