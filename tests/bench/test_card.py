"""The card schema (validated with jsonschema), its markdown, and --compare on hand-made cards."""

from __future__ import annotations

import copy
import json
import re

import pytest

from botpsy.bench.card import NOT_AVAILABLE, CardError, card_markdown, load_card, summarize, validate_card, write_card
from botpsy.bench import command
from botpsy.bench.compare import compare_cards, compare_markdown


def stats(value: float) -> dict:
    return summarize([value * 0.9, value, value * 1.1])


def model_entry(name: str, fmt: str, tools: list[int], contexts: list[int]) -> dict:
    return {
        "name": name, "path": f"/models/{name}.gguf", "format": fmt, "architecture": "qwen35", "file_bytes": 4 << 20,
        "speaks_botpsy_format": True, "n_ctx": 8192, "load_ms": stats(100.0),
        "memory": {"estimate": {"total_bytes": 70 << 20, "fits": True}, "rss_before_load_bytes": 50 << 20,
                   "rss_loaded_bytes": 60 << 20, "peak_rss_generating_bytes": 90 << 20},
        "ttft": [{"tools": n, "prompt_tokens": 100 * n, "prefix_tokens": 100 * n - 20, "cold_ms": stats(10.0 * n),
                  "warm_ms": stats(5.0), "warm_over_cold": 0.5 / n} for n in tools] + [{"tools": 50, "skipped": "too long"}],
        "throughput": [{"context_tokens": c, "decode_tokens": 64, "prefill_tokens_per_s": stats(3000.0),
                        "decode_tokens_per_s": stats(900.0)} for c in contexts],
        "agent_turn": {"ms": stats(30.0), "completion_tokens": 12, "tool_calls": 1},
        "task": {"skipped": "foreign format"},
        "energy": NOT_AVAILABLE,
        "roofline": {"bytes_per_token": 4 << 20, "bandwidth_gb_per_s": 12.0, "allowed_decode_tokens_per_s": 2800.0,
                     "measured_decode_tokens_per_s": 900.0, "fraction_of_roofline": 0.32, "context_tokens": 256},
    }


def make_card(cpu: str = "Test CPU", models: list[dict] | None = None) -> dict:
    return {
        "schema_version": 1, "created": "2026-12-02T12:00:00Z", "settings": {"reps": 3},
        "machine": {"cpu_model": cpu, "physical_cores": 2, "logical_cores": 2, "threads_used": 1,
                    "memory_bytes": 24 << 30, "os": "Linux", "last_level_cache_bytes": 32 << 20,
                    "llama_cpp": {"llama_cpp_python": "0.3.36", "system_info": "CPU : AVX2 = 1"},
                    "bandwidth": {"gb_per_s": stats(12.0), "best_gb_per_s": 13.2, "buffer_bytes": 256 << 20},
                    "energy_source": NOT_AVAILABLE},
        "models": models if models is not None else [model_entry("model-q8_0", "Q8_0", [10, 25], [256, 1024])],
    }


def test_summarize_reports_min_median_max():
    assert summarize([5.0, 1.0, 3.0, 9.0]) == {"min": 1.0, "median": 4.0, "max": 9.0, "n": 4, "values": [5.0, 1.0, 3.0, 9.0]}
    with pytest.raises(ValueError):
        summarize([])


def test_a_complete_card_validates_and_round_trips(tmp_path):
    card = make_card()
    path = write_card(card, tmp_path / "out")
    assert load_card(path) == card
    markdown = (tmp_path / "out" / "card.md").read_text()
    assert "model-q8_0" in markdown and "skipped: too long" in markdown and NOT_AVAILABLE in markdown


@pytest.mark.parametrize("breakage, where", [
    (lambda c: c["models"][0].pop("roofline"), "models/0"),
    (lambda c: c["models"][0]["ttft"][0].pop("warm_ms"), "models/0/ttft/0"),
    (lambda c: c["models"][0].update(energy="unknown"), "models/0/energy"),
    (lambda c: c["machine"]["bandwidth"]["gb_per_s"].update(median="fast"), "machine/bandwidth/gb_per_s"),
    (lambda c: c.pop("machine"), "(top level)"),
])
def test_a_broken_card_is_refused_with_the_place(breakage, where):
    card = make_card()
    breakage(card)
    with pytest.raises(CardError, match=re.escape(f"at {where}")):
        validate_card(card)


def test_other_schema_versions_and_non_json_are_refused(tmp_path):
    card = make_card()
    card["schema_version"] = 2
    with pytest.raises(CardError, match="schema_version 2"):
        validate_card(card)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CardError, match="not JSON"):
        load_card(bad)
    with pytest.raises(CardError, match="does not exist"):
        load_card(tmp_path / "absent.json")


def test_compare_puts_every_model_of_every_card_side_by_side():
    first = make_card("CPU A", [model_entry("m-q8_0", "Q8_0", [10], [256]), model_entry("m-f32", "F32", [10], [256])])
    second = make_card("CPU B", [model_entry("m-q8_0", "Q8_0", [10, 25], [256, 4096])])
    table = compare_cards([("a.json", first), ("b.json", second)])
    assert [c["card"] for c in table["columns"]] == ["a.json", "a.json", "b.json"]
    rows = {row["metric"]: row["values"] for row in table["rows"]}
    assert rows["CPU"] == ["CPU A", "CPU A", "CPU B"]
    assert rows["format"] == ["Q8_0", "F32", "Q8_0"]
    assert rows["TTFT cold ms, 25 tools"] == [None, None, 250.0]  # only the second card measured 25 tools
    assert rows["decode tok/s @ 4096"] == [None, None, 900.0]
    assert rows["whole task ms"] == [None, None, None]  # skipped everywhere
    assert rows["decode J/token"] == [NOT_AVAILABLE] * 3
    markdown = compare_markdown(table)
    assert "m-f32 (a.json)" in markdown and "| TTFT cold ms, 25 tools | - | - | 250.0 |" in markdown
    json.dumps(table)  # the comparison is plain JSON


def test_markdown_renders_a_card_with_energy_and_a_task():
    card = make_card()
    model = copy.deepcopy(card["models"][0])
    model["energy"] = {"decode_joules_per_token": stats(0.02), "prefill_joules_per_token": stats(0.001),
                       "domains": ["intel-rapl:0 (package-0)"]}
    model["task"] = {"ms": stats(800.0), "task_id": "t1", "kind": "multi_step", "model_turns": 3, "success": True}
    card["models"] = [model]
    validate_card(card)
    text = card_markdown(card)
    assert "decode 0.0200" in text and "multi_step" in text


def test_agreement_checks_repeated_figures_of_the_same_model_by_range_overlap():
    first = make_card("CPU A", [model_entry("m-q8_0", "Q8_0", [10], [256]), model_entry("m-f32", "F32", [10], [256])])
    second = make_card("CPU A", [model_entry("m-q8_0", "Q8_0", [10], [256])])
    # The second run decodes a third slower: 900 +- 10% and 600 +- 10% do not overlap; prefill
    # 3000 +- 10% against 3250 +- 10% does.
    second["models"][0]["throughput"][0]["decode_tokens_per_s"] = stats(600.0)
    second["models"][0]["throughput"][0]["prefill_tokens_per_s"] = stats(3250.0)
    result = compare_cards([("a.json", first), ("b.json", second)])["agreement"]
    assert result["models"] == [["m-q8_0", "Q8_0"]]  # m-f32 is only in one card
    by_metric = {f["metric"]: f for f in result["figures"]}
    assert set(by_metric) == {"load ms", "TTFT cold ms, 10 tools", "TTFT warm ms, 10 tools", "prefill tok/s @ 256",
                              "decode tok/s @ 256", "agent turn ms"}  # the task was skipped in both
    assert not by_metric["decode tok/s @ 256"]["agrees"] and by_metric["prefill tok/s @ 256"]["agrees"]
    assert (result["compared"], result["agreeing"]) == (6, 5)
    markdown = compare_markdown(compare_cards([("a.json", first), ("b.json", second)]))
    assert "5 of 6 figures agree" in markdown and "| m-q8_0 (Q8_0) | decode tok/s @ 256 | 810-990; 540-660 |" in markdown


def test_agreement_allows_for_the_drift_the_cards_speed_probes_measured():
    first, second = make_card(), make_card()
    # The second run decodes 38% slower: 504-616 tok/s, outside the first run's 810-990.
    second["models"][0]["throughput"][0]["decode_tokens_per_s"] = stats(560.0)
    strict = compare_cards([("a.json", first), ("b.json", second)])["agreement"]
    assert strict["drift"] == 0.0 and strict["agreeing"] == strict["agreeing_strictly"] == strict["compared"] - 1
    # The probes say the machine itself ran 10% slower during the second run: 810 is still above
    # 616 * 1.1 = 678, so the figure still disagrees ...
    # Single jittery readings do not count: the drift compares the cards' medians.
    first["machine"]["speed_probes"] = command.speed_probe_record(
        [{"copy_gb_per_s": 20.0, "matmul_gflops": 50.0}, {"copy_gb_per_s": 9.0, "matmul_gflops": 50.0},
         {"copy_gb_per_s": 20.0, "matmul_gflops": 50.0}])
    second["machine"]["speed_probes"] = command.speed_probe_record(
        [{"copy_gb_per_s": 20.0, "matmul_gflops": 45.4545}, {"copy_gb_per_s": 30.0, "matmul_gflops": 45.4545},
         {"copy_gb_per_s": 20.0, "matmul_gflops": 80.0}])
    assert first["machine"]["speed_probes"]["spread"] > 1  # within the card: 9 to 20 GB/s
    for card in (first, second):
        validate_card(card)
    slower = compare_cards([("a.json", first), ("b.json", second)])["agreement"]
    assert slower["drift"] == pytest.approx(0.1, abs=1e-3)
    assert slower["agreeing"] == slower["compared"] - 1
    # ... and with 35% drift it agrees (810 <= 616 * 1.35 = 832), strictly still not.
    second["machine"]["speed_probes"] = command.speed_probe_record([{"copy_gb_per_s": 14.8148, "matmul_gflops": 50.0}])
    table = compare_cards([("a.json", first), ("b.json", second)])
    drifted = table["agreement"]
    assert drifted["drift"] == pytest.approx(0.35, abs=1e-3)
    assert (drifted["agreeing"], drifted["agreeing_strictly"]) == (drifted["compared"], drifted["compared"] - 1)
    markdown = compare_markdown(table)
    assert "between the runs (35.0%" in markdown and f"{drifted['compared'] - 1} of {drifted['compared']} agree" in markdown
    assert "Machine speed over the run" in card_markdown(second)


def test_agreement_says_when_no_model_is_in_every_card():
    first = make_card(models=[model_entry("a", "Q8_0", [10], [256])])
    second = make_card(models=[model_entry("b", "Q8_0", [10], [256])])
    table = compare_cards([("a.json", first), ("b.json", second)])
    assert table["agreement"]["compared"] == 0
    assert "No model file appears in every card" in compare_markdown(table)


def test_doctests():
    import doctest

    from botpsy.bench import card, compare

    for module in (card, compare, command):
        assert doctest.testmod(module).failed == 0


def test_rounds_pool_every_value_and_keep_the_largest_peak_memory():
    from botpsy.bench.card import pool

    first, second = model_entry("m", "Q8_0", [10], [256]), model_entry("m", "Q8_0", [10], [256])
    second["throughput"][0]["decode_tokens_per_s"] = summarize([600.0, 700.0])
    second["memory"]["peak_rss_generating_bytes"] = 95 << 20
    second["ttft"][0]["warm_cache_hits"], first["ttft"][0]["warm_cache_hits"] = 2, 3
    pooled = pool([first, second])
    decode = pooled["throughput"][0]["decode_tokens_per_s"]
    assert decode == summarize([810.0, 900.0, 990.0, 600.0, 700.0], 12)
    assert (decode["min"], decode["max"], decode["n"]) == (600.0, 990.0, 5)
    assert pooled["memory"]["peak_rss_generating_bytes"] == 95 << 20 and pooled["ttft"][0]["warm_cache_hits"] == 5
    assert pooled["ttft"][1] == {"tools": 50, "skipped": "too long"} and pooled["format"] == "Q8_0"
    validate_card(make_card(models=[pooled]))


def test_markdown_says_how_values_were_pooled():
    card = make_card()
    assert "over 3 repetitions" in card_markdown(card)
    card["settings"] = {"reps": 2, "rounds": 2}
    assert "over 2 rounds of 2 repetitions (values pooled)" in card_markdown(card)
