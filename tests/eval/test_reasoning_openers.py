"""bench/reasoning_openers.py: the first reasoning sentence of each record, counted by category and outcome."""

from __future__ import annotations

import importlib.util
import json


def load():
    spec = importlib.util.spec_from_file_location("reasoning_openers", "bench/reasoning_openers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_opener_names_the_verdict_and_hides_the_tool():
    openers = load()
    call = "I'll use geometry.area_circle (area of a circle) with radius=10.\n</think>\n\n<tool_call>..."
    refusal = "The requested value is outside what the function accepts, so I'll explain that. More.\n</think>\n\nNo."
    assert openers.opener(call) == "I'll use ..."
    assert openers.opener(refusal) == "The requested value is outside what the function accepts, so I'll explain that"
    assert openers.opener("A plain answer with no reasoning.") == ""


def test_count_splits_right_and_wrong_by_category(tmp_path):
    openers = load()
    rows = [
        {"category": "simple_python", "correct": True, "raw": "I'll use f (x) with a=1.\n</think>\n\n<tool_call>"},
        {"category": "simple_python", "correct": False, "raw": "I'll use g (y) with b=2.\n</think>\n\n<tool_call>"},
        {"category": "simple_python", "correct": False, "raw": "No function is needed for this; I'll answer directly.\n</think>\n\n4"},
        {"category": "irrelevance", "correct": True, "raw": "Plain text"},
    ]
    path = tmp_path / "bfcl.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    counted = openers.count(path)
    assert counted["simple_python"]["right"] == {"I'll use ...": 1}
    assert counted["simple_python"]["wrong"] == {"I'll use ...": 1, "No function is needed for this; I'll answer directly": 1}
    assert counted["irrelevance"] == {"right": {"": 1}, "wrong": {}}
