"""Value swaps on real device-world trajectories: renamed everywhere, nothing else touched."""

from __future__ import annotations

import json
import random

import pytest

from botpsy.cli import main as cli_main
from botpsy.train import augment
from tests.conftest import write_task_splits


@pytest.fixture(scope="module")
def swapped_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("swaps")
    tasks = write_task_splits(root / "tasks", {"train": 80, "dev": 10, "test": 10}, seed=5)
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(root / "plain")]) == 0
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(root / "swapped"), "--value-swaps", "2"]) == 0
    return root


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def texts(node):
    """Every string in a message tree."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from texts(item)
    elif isinstance(node, dict):
        for item in node.values():
            yield from texts(item)


def calls(messages):
    return [c["function"] for m in messages for c in m.get("tool_calls") or []]


def test_copies_are_renamed_everywhere_and_otherwise_identical(swapped_data):
    originals = {r["id"]: r for r in read(swapped_data / "plain" / "train.jsonl")}
    rows = read(swapped_data / "swapped" / "train.jsonl")
    copies = [r for r in rows if "swapped" in r]
    assert copies and len(rows) == len(originals) + len(copies)
    assert {r["id"] for r in rows if "swapped" not in r} == set(originals)
    for copy in copies:
        original = originals[copy["id"].split("~")[0]]
        assert [m["role"] for m in copy["messages"]] == [m["role"] for m in original["messages"]]
        assert [c["name"] for c in calls(copy["messages"])] == [c["name"] for c in calls(original["messages"])]
        assert copy["tools"] == original["tools"] and copy["thinking"] == original["thinking"]
        all_text = "\n".join(texts(copy["messages"]))
        for old, new in copy["swapped"].items():
            assert old != new and not augment.whole_word(old).search(all_text), (copy["id"], old)
            user = "\n".join(m["content"] for m in copy["messages"] if m["role"] == "user")
            assert augment.whole_word(new).search(user)  # still copyable from the request
            assert new in [v for c in calls(copy["messages"]) for v in c["arguments"].values()]


def test_enum_and_formatted_values_are_left_alone(swapped_data):
    rows = read(swapped_data / "swapped" / "train.jsonl")
    originals = {r["id"]: r for r in rows if "swapped" not in r}
    for copy in (r for r in rows if "swapped" in r):
        schemas = {t["function"]["name"]: t["function"]["parameters"].get("properties", {}) for t in copy["tools"]}
        original_calls = calls(originals[copy["id"].split("~")[0]]["messages"])
        for before, after in zip(original_calls, calls(copy["messages"])):
            for key, value in before["arguments"].items():
                if "enum" in schemas[before["name"]].get(key, {}) or not isinstance(value, str) \
                        or not value[:1].isalpha():
                    assert after["arguments"][key] == value


def test_meta_counts_copies_and_corpus_keeps_the_original_text(swapped_data):
    meta = json.loads((swapped_data / "swapped" / "meta.json").read_text())
    train = meta["splits"]["train"]
    assert meta["config"]["value_swaps"] == 2 and train["value_swapped_copies"] > 0
    assert train["examples"] == 80 + train["value_swapped_copies"]
    assert meta["splits"]["dev"]["value_swapped_copies"] == 0  # evaluation splits are never augmented
    corpus = (swapped_data / "swapped" / "corpus.txt").read_text()
    assert corpus == (swapped_data / "plain" / "corpus.txt").read_text()


def test_a_value_that_opens_a_sentence_keeps_its_capital():
    messages = [{"role": "user", "content": "Start a pasta timer for 9 minutes."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "start_timer",
                                                      "arguments": {"minutes": 9, "label": "pasta"}}}]},
                {"role": "assistant", "content": "Pasta timer: 9 minutes."}]
    tools = [{"type": "function", "function": {"name": "start_timer", "parameters": {"properties": {
        "minutes": {"type": "integer"}, "label": {"type": "string"}}}}}]
    swapped, renamed = augment.swap_values(messages, tools, random.Random(3))
    new = renamed["pasta"]
    assert swapped[2]["content"] == f"{new.capitalize()} timer: 9 minutes."
    assert swapped[1]["tool_calls"][0]["function"]["arguments"] == {"minutes": 9, "label": new}
    assert messages[0]["content"] == "Start a pasta timer for 9 minutes."  # the input is not changed


def test_nothing_to_swap_gives_no_copy():
    example = {"id": "t1", "tools": [], "messages": [{"role": "user", "content": "Is my cart empty?"},
                                                      {"role": "assistant", "content": "", "tool_calls": [
                                                          {"type": "function", "function": {"name": "view_cart",
                                                                                            "arguments": {}}}]}]}
    assert augment.with_value_swaps([example], copies=3, seed=0) == [example]
