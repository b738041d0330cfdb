"""``botpsy bench`` end to end on a tiny GGUF in two formats (``--quick``), and ``--compare`` on two runs.

Timings are recorded, never asserted: the tests check that every measurement is present, the
card validates against its schema, the plots are PNGs, and bad input is refused clearly.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from botpsy.bench import command
from botpsy.bench.card import CARD_SCHEMA, NOT_AVAILABLE
from botpsy.bench.command import BenchConfig, run_bench
from botpsy.bench.machine import RaplMeter
from botpsy.cli import main as cli_main

pytestmark = pytest.mark.slow
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class CountingMeter(RaplMeter):
    """A RAPL meter whose counter advances 1000 µJ at every read (what a busy package would show)."""

    def __init__(self) -> None:
        super().__init__([])
        self.count = 0

    def names(self) -> list[str]:
        return ["intel-rapl:0 (fake)"]

    def read(self) -> list[int]:
        self.count += 1000
        return [self.count]

    def joules_between(self, start: list[int], end: list[int]) -> float:
        return (end[0] - start[0]) / 1e6


@pytest.fixture(scope="module")
def quick_card(bench_ggufs, tmp_path_factory):
    out = tmp_path_factory.mktemp("card_a")
    config = BenchConfig(models=[str(bench_ggufs["f32"]), str(bench_ggufs["q8_0"])], out=str(out), threads=1,
                         quick=True)
    mp = pytest.MonkeyPatch()
    mp.setattr(command.RaplMeter, "open", classmethod(lambda cls, root=None: None))  # as on a machine without RAPL
    try:
        card = run_bench(config, log=lambda message: None)
    finally:
        mp.undo()
    return card, out


def test_quick_bench_writes_a_valid_card_plots_and_markdown(quick_card):
    card, out = quick_card
    on_disk = json.loads((out / "card.json").read_text())
    jsonschema.validate(on_disk, CARD_SCHEMA)
    assert on_disk == card
    assert [m["format"] for m in card["models"]] == ["F32", "Q8_0"]
    for name in ("speed.png", "ttft.png", "memory.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
    markdown = (out / "card.md").read_text()
    assert all(m["name"] in markdown for m in card["models"]) and "![ttft](ttft.png)" in markdown
    assert card["machine"]["energy_source"] == NOT_AVAILABLE


def test_every_model_has_each_measurement(quick_card):
    card, _ = quick_card
    for model in card["models"]:
        assert model["speaks_botpsy_format"]
        assert [t["tools"] for t in model["ttft"]] == [10, 25]
        measured = [t for t in model["ttft"] if "skipped" not in t]
        assert measured and measured[0]["tools"] == 10
        for ttft in measured:
            assert ttft["prompt_tokens"] > ttft["prefix_tokens"] > 0
            assert ttft["warm_cache_hits"] == 1  # the warm turn restored the saved tools prefix
            # a new process's first turn read the state file the disk tier wrote
            assert ttft["restart_cache_hits"] == 1 and ttft["state_file_bytes"] > 0 and ttft["restart_ms"]["n"] == 1
        for ttft in model["ttft"]:  # the test tokenizer's 512-token vocabulary makes long prompts
            assert "skipped" not in ttft or "n_ctx is 4096" in ttft["skipped"]
        assert [t["context_tokens"] for t in model["throughput"]] == [256]
        assert model["agent_turn"]["ms"]["n"] == 1 and model["task"]["kind"] == "multi_step"
        assert model["energy"] == NOT_AVAILABLE
        assert model["memory"]["peak_rss_generating_bytes"] >= model["memory"]["rss_before_load_bytes"]
        assert model["roofline"]["bytes_per_token"] <= model["file_bytes"]
    f32, q8 = card["models"]
    assert q8["roofline"]["bytes_per_token"] < f32["roofline"]["bytes_per_token"]


def test_compare_two_runs_through_the_cli(quick_card, bench_ggufs, tmp_path, monkeypatch, capsys):
    first_card, first_dir = quick_card
    monkeypatch.setattr(command.RaplMeter, "open", classmethod(lambda cls, root=None: CountingMeter()))
    second_dir = tmp_path / "card_b"
    assert cli_main(["bench", str(bench_ggufs["q8_0"]), "--out", str(second_dir), "--threads", "1", "--quick",
                     "--rounds", "2"]) == 0
    second = json.loads((second_dir / "card.json").read_text())
    jsonschema.validate(second, CARD_SCHEMA)
    model = second["models"][0]
    energy = model["energy"]
    # --quick records one repetition; two rounds pool two values into every figure
    assert energy["domains"] == ["intel-rapl:0 (fake)"] and energy["decode_joules_per_token"]["n"] == 2
    assert model["load_ms"]["n"] == 2 and model["throughput"][0]["decode_tokens_per_s"]["n"] == 2
    probes = second["machine"]["speed_probes"]  # before the model in each round, and at the end
    assert probes["matmul_gflops"]["n"] == probes["copy_gb_per_s"]["n"] == 3 and probes["spread"] >= 0
    assert model["roofline"]["measured_decode_tokens_per_s"] == pytest.approx(
        model["throughput"][0]["decode_tokens_per_s"]["median"], abs=0.05)
    capsys.readouterr()
    compare_dir = tmp_path / "compare"
    assert cli_main(["bench", "--compare", str(first_dir / "card.json"), str(second_dir / "card.json"),
                     "--out", str(compare_dir), "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table == json.loads((compare_dir / "compare.json").read_text())
    assert [c["format"] for c in table["columns"]] == ["F32", "Q8_0", "Q8_0"]
    rows = {row["metric"]: row["values"] for row in table["rows"]}
    assert all(isinstance(v, float) for v in rows["decode tok/s @ 256"])
    assert rows["decode J/token"][:2] == [NOT_AVAILABLE] * 2 and isinstance(rows["decode J/token"][2], float)
    assert "Device cards compared" in (compare_dir / "compare.md").read_text()
    assert table["agreement"]["models"] == [["model-q8_0", "Q8_0"]]  # the file benched in both runs
    assert table["agreement"]["compared"] >= 4
    first = json.loads((first_dir / "card.json").read_text())["machine"]["speed_probes"]
    medians = [{k: v["median"] for k, v in p.items() if isinstance(v, dict)} for p in (first, probes)]
    expected = max(max(m[k] for m in medians) / min(m[k] for m in medians) - 1 for k in medians[0])
    assert table["agreement"]["drift"] == pytest.approx(expected, abs=1e-3)  # how far the medians moved


def test_bad_input_is_refused_with_a_clear_message(tmp_path, capsys):
    assert cli_main(["bench", str(tmp_path / "absent.gguf"), "--out", str(tmp_path / "o")]) == 2
    assert "model files not found" in capsys.readouterr().err
    assert cli_main(["bench", "--compare", str(tmp_path / "one.json")]) == 2
    assert "at least two" in capsys.readouterr().err
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.json").write_text("[]")
    assert cli_main(["bench", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                     "--out", str(tmp_path / "c")]) == 2
    assert "does not match the card schema" in capsys.readouterr().err
    not_gguf = tmp_path / "text.gguf"
    not_gguf.write_text("hello")
    assert cli_main(["bench", str(not_gguf), "--out", str(tmp_path / "o"), "--quick"]) == 2
    assert "GGUF" in capsys.readouterr().err
