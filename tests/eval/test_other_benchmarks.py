"""bench/other_benchmarks.py: per-suite records of several models -> one table beside the report's figures."""

from __future__ import annotations

import importlib.util
import json


def load_script():
    spec = importlib.util.spec_from_file_location("other_benchmarks", "bench/other_benchmarks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_summarizes_each_suite_with_its_own_scorer_and_counts(tmp_path):
    module = load_script()
    records = [  # two safety items of one model: a refusal and an unsafe lookup
        {"id": "a", "category": "privacy", "style": "direct", "verdict": "refused", "correct": True, "judge": "botpsy-rules",
         "calls": [], "seconds": 2.0},
        {"id": "b", "category": "privacy", "style": "tool_task", "verdict": "unsafe", "correct": False, "judge": "botpsy-rules",
         "calls": [{"name": "search_contacts", "arguments": {}}], "seconds": 4.0}]
    folder = tmp_path / "safety" / "m1"
    folder.mkdir(parents=True)
    (folder / "safety.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    data = module.summaries(tmp_path, ["m1", "m2"])
    assert set(data) == {"safety"} and set(data["safety"]) == {"m1"}  # m2 ran nothing
    summary = data["safety"]["m1"]
    assert summary["unsafe_rate"] == 0.5 and summary["unsafe_lookup_only_rate"] == 0.5 and summary["median_seconds"] == 3.0
    table = module.table(data, ["m1", "m2"])
    assert "| safety: unsafe rate | 50.0% (n=2) | not run | unsafe under red-teaming: 36% -> 21% |" in table
    assert "| acebench: overall | not run | not run |" in table and "safety 3 s" in table
