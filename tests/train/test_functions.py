"""`botpsy data --functions N`: varied function-calling examples whose gold calls are exact and grounded."""

from __future__ import annotations

import json
import random
import re

import pytest

from botpsy.chat.parse import parse_output
from botpsy.cli import main as cli_main
from botpsy.train import functions
from botpsy.train.encode import assistant_spans, without_reasoning

BY_NAME = {f.name: f for f in functions.CATALOGUE}


@pytest.fixture(scope="module")
def generated():
    return functions.examples(600, seed=5)


def catalogue_name(offered: str) -> str:
    """Undo a name style: ``domain.name`` -> name, camelCase -> snake_case."""
    bare = offered.split(".")[-1]
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), bare)


def test_catalogue_is_consistent():
    assert functions.catalogue_problems() == []
    assert len(functions.CATALOGUE) >= 60 and len({f.domain for f in functions.CATALOGUE}) >= 15
    broken = functions.Function("f", "d", "Do it.", (functions.P("x", "integer", "x", functions.ints(1, 2)),), ("no slot here {y}",))
    assert broken.problems() == ["f: slot 'y' is not a parameter", "f: required 'x' missing from 'no slot here {y}'"]


def test_same_seed_same_examples_and_every_kind(generated):
    assert functions.examples(600, seed=5) == generated
    assert functions.examples(50, seed=6) != generated[:50]
    assert {e["kind"] for e in generated} == set(functions.KINDS)
    assert {e["split"] for e in generated} == {"train"}
    styles = {("." in t["function"]["name"], any(c.isupper() for c in t["function"]["name"])) for e in generated for t in e["tools"]}
    assert {(False, False), (True, False), (False, True)} <= styles


def test_every_example_renders_and_parses_back_to_its_gold_calls(generated):
    for example in generated:
        messages = example["messages"] if example["thinking"] else [without_reasoning(m) for m in example["messages"]]
        text, spans = assistant_spans(messages, example["tools"], example["thinking"])
        (start, end), = spans
        parsed = parse_output(text[start:end], example["tools"], thinking=example["thinking"])
        gold = [(c["function"]["name"], c["function"]["arguments"]) for c in example["messages"][1].get("tool_calls", [])]
        assert parsed.ok, (example["id"], parsed.errors)
        assert [(c.name, c.arguments) for c in parsed.tool_calls] == gold, example["id"]


def test_calls_match_what_was_asked_and_give_every_required_argument(generated):
    for example in generated:
        reply = example["messages"][1]
        offered = {catalogue_name(t["function"]["name"]) for t in example["tools"]}
        calls = reply.get("tool_calls") or []
        if example["kind"] == "fn_irrelevant":
            assert not calls and reply["content"]
            assert not set(example["asked"]) & offered
            assert not any(functions.overlapping(BY_NAME[n], BY_NAME[example["asked"][0]]) for n in offered)
            continue
        assert {catalogue_name(c["function"]["name"]) for c in calls} == set(example["asked"]) <= offered
        for c in calls:
            required = {p.name for p in BY_NAME[catalogue_name(c["function"]["name"])].params if p.required}
            assert required <= set(c["function"]["arguments"])
        keys = [json.dumps(c["function"], sort_keys=True) for c in calls]
        assert len(keys) == len(set(keys)), "a parallel request never asks the same call twice"
        if example["kind"] in ("fn_single", "fn_multiple"):
            assert len(calls) == 1
            assert (len(example["tools"]) == 1) == (example["kind"] == "fn_single")
        else:
            assert len(calls) >= 2


def test_reasoning_grounds_the_verdict_in_the_request(generated):
    for example in generated:
        reply = example["messages"][1]
        reasoning = reply["reasoning_content"]
        purpose = BY_NAME[example["asked"][0]].purpose
        assert purpose in reasoning, example["id"]
        for call in reply.get("tool_calls") or []:
            assert call["function"]["name"] in reasoning
            for key, value in call["function"]["arguments"].items():
                assert f"{key}={json.dumps(value, ensure_ascii=False)}" in reasoning
        named = [t["function"]["name"] for t in example["tools"] if t["function"]["name"] in reasoning]
        if example["kind"] == "fn_irrelevant":
            assert len(named) == 1 and reasoning.endswith("so I won't call any.")
        else:  # only the functions it calls: the others are counted, never listed
            assert set(named) == {c["function"]["name"] for c in reply["tool_calls"]}


def test_string_values_come_from_the_request_text(generated):
    for example in generated:
        request = example["messages"][0]["content"]
        for call in example["messages"][1].get("tool_calls") or []:
            for value in call["function"]["arguments"].values():
                if isinstance(value, str):
                    assert value in request, (example["id"], value)


def test_none_fits_requests_are_never_ones_a_model_can_answer_itself(generated):
    # "I can't compute a mean" would teach the student to decline the device world's arithmetic
    # questions, which it should answer.
    assert functions.ANSWERABLE <= set(BY_NAME)
    irrelevant = [e for e in generated if e["kind"] == "fn_irrelevant"]
    assert irrelevant and not any(set(e["asked"]) & functions.ANSWERABLE for e in irrelevant)
    assert any(set(e["asked"]) & functions.ANSWERABLE for e in generated if e["kind"] == "fn_single")


def test_none_fits_requests_include_near_misses_from_the_same_domain(generated):
    irrelevant = [e for e in generated if e["kind"] == "fn_irrelevant"]
    same = [e for e in irrelevant if any(BY_NAME[catalogue_name(t["function"]["name"])].domain == BY_NAME[e["asked"][0]].domain
                                         for t in e["tools"])]
    assert 0.1 < len(same) / len(irrelevant) < 0.6


def test_parallel_requests_in_one_sentence_vary_one_argument(generated):
    merged = [e for e in generated if e["kind"] == "fn_parallel" and "values of" in e["messages"][1]["reasoning_content"]]
    assert len(merged) >= 10
    for example in merged:
        calls = [c["function"]["arguments"] for c in example["messages"][1]["tool_calls"]]
        varying = {k for k in calls[0] if len({json.dumps(c[k]) for c in calls}) > 1}
        assert len(varying) == 1 and all(c.keys() == calls[0].keys() for c in calls)
        (slot,) = varying
        assert f"values of {slot}" in example["messages"][1]["reasoning_content"]
        assert " and " in example["messages"][0]["content"] and "\n" not in example["messages"][0]["content"]
    assert functions.fill_varying(BY_NAME["random_password"], random.Random(0), 3)[1] == "length"


def test_distinct_parameters_never_repeat_a_value():
    rng = random.Random(0)
    for _ in range(200):
        _, arguments = functions.fill(BY_NAME["convert_currency"], rng)
        assert arguments["from_currency"] != arguments["to_currency"]


def test_same_seed_same_examples_in_another_process():
    import hashlib
    import os
    import subprocess
    import sys

    code = ("import hashlib, json; from botpsy.train import functions as F; "
            "print(hashlib.sha256(json.dumps(F.examples(300, seed=5)).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed},
                              capture_output=True, text=True, check=True).stdout.strip() for seed in ("1", "2")}
    assert digests == {hashlib.sha256(json.dumps(functions.examples(300, seed=5)).encode()).hexdigest()}


def test_bad_counts_and_kinds_are_clear_errors():
    with pytest.raises(ValueError, match="--functions must be 0 or more"):
        functions.examples(-1)
    with pytest.raises(ValueError, match="unknown function-example kind"):
        functions.example("fn_nonsense", random.Random(0), 0)


def test_quote_style_quotes_the_request_first_and_changes_nothing_but_the_reasoning(generated):
    quoted = functions.examples(600, seed=5, reasoning_style="quote")
    for plain, quote in zip(generated, quoted):
        assert {**plain, "messages": plain["messages"][:1]} == {**quote, "messages": quote["messages"][:1]}
        assert plain["messages"][1].get("tool_calls") == quote["messages"][1].get("tool_calls")
        assert plain["messages"][1]["content"] == quote["messages"][1]["content"]
        reasoning, request = quote["messages"][1]["reasoning_content"], quote["messages"][0]["content"]
        assert reasoning.startswith('The user asks: "' + " ".join(request.split()[:5])), reasoning
        assert "The user wants to" not in reasoning
        verdict = {"fn_single": "which is what is asked", "fn_multiple": "which is what is asked",
                   "fn_irrelevant": "which is not what is asked"}.get(quote["kind"], "")
        assert verdict in reasoning, reasoning
    long = functions.quoted(" ".join(["word"] * 40))
    assert long.endswith('word ..."') and long.count("word") == functions.QUOTE_WORDS
    with pytest.raises(ValueError, match="unknown reasoning style"):
        functions.example("fn_single", random.Random(0), 0, reasoning_style="shout")


def test_data_command_adds_them_to_the_train_split_only(tmp_path, device_data):
    tasks = device_data.parent / "tasks"
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(tmp_path / "d"), "--functions", "40"]) == 0
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["splits"]["train"]["functions"] == 40 and meta["splits"]["dev"]["functions"] == 0
    rows = [json.loads(line) for line in (tmp_path / "d" / "train.jsonl").read_text().splitlines()]
    assert sum(r["domain"] == "functions" for r in rows) == 40 and len(rows) == 160
    assert all(r["domain"] != "functions" for r in map(json.loads, (tmp_path / "d" / "test.jsonl").read_text().splitlines()))
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(tmp_path / "q"), "--functions", "40",
                     "--functions-reasoning", "quote"]) == 0
    quoted = [json.loads(line) for line in (tmp_path / "q" / "train.jsonl").read_text().splitlines()]
    assert [r for r in quoted if r["domain"] != "functions"] == [r for r in rows if r["domain"] != "functions"]
    assert all(r["messages"][1]["reasoning_content"].startswith("The user asks:") for r in quoted if r["domain"] == "functions")


def test_student_data_stage_passes_the_count_on(tmp_path, device_data):
    import shutil
    from types import SimpleNamespace

    from botpsy.speedrun import step_data

    shutil.copytree(device_data.parent / "tasks", tmp_path / "tasks")
    step_data(SimpleNamespace(seed=0, functions=7), tmp_path)
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    assert meta["splits"]["train"]["functions"] == 7 and meta["config"]["functions"] == 7


@pytest.fixture(scope="module")
def answered():
    return functions.answer_examples(300, seed=5)


def test_answer_examples_reply_with_the_worked_answer_and_call_nothing(answered):
    assert functions.answer_examples(300, seed=5) == answered
    assert {e["kind"] for e in answered} == {"fn_answer"} and len({e["id"] for e in answered}) == 300
    assert all(e["id"].startswith("fn-answer-") for e in answered)
    for example in answered:
        reply = example["messages"][1]
        wanted = BY_NAME[example["asked"][0]]
        offered = {catalogue_name(t["function"]["name"]) for t in example["tools"]}
        assert "tool_calls" not in reply and reply["content"]
        assert wanted.name not in offered and 1 <= len(offered) <= 3
        assert all(BY_NAME[name].domain != wanted.domain for name in offered), example["id"]
        assert reply["reasoning_content"].endswith("so I won't call any.")
        messages = example["messages"] if example["thinking"] else [without_reasoning(m) for m in example["messages"]]
        text, spans = assistant_spans(messages, example["tools"], example["thinking"])
        (start, end), = spans
        parsed = parse_output(text[start:end], example["tools"], thinking=example["thinking"])
        assert parsed.ok and parsed.tool_calls == [] and reply["content"] in parsed.content
    # Most draws offer a function whose parameters have the request's shape: the trap being taught.
    alike = sum(any(functions.shape(BY_NAME[catalogue_name(t["function"]["name"])]) == functions.shape(BY_NAME[e["asked"][0]])
                    for t in e["tools"]) for e in answered)
    assert alike > 0.6 * len(answered)
    assert len({e["asked"][0] for e in answered}) == len(functions.ANSWERS)


def test_answer_examples_check_their_count():
    with pytest.raises(ValueError, match="--functions-answer must be 0 or more"):
        functions.answer_examples(-1)
    assert functions.answer_examples(0) == []


def test_data_command_adds_answer_examples_beside_the_others(tmp_path, device_data):
    tasks = device_data.parent / "tasks"
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(tmp_path / "a"), "--functions", "40"]) == 0
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(tmp_path / "b"), "--functions", "40", "--functions-answer", "12"]) == 0
    plain = [json.loads(line) for line in (tmp_path / "a" / "train.jsonl").read_text().splitlines()]
    more = [json.loads(line) for line in (tmp_path / "b" / "train.jsonl").read_text().splitlines()]
    assert [r for r in more if r["kind"] != "fn_answer"] == plain
    assert sum(r["kind"] == "fn_answer" for r in more) == 12
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert meta["splits"]["train"]["functions_answer"] == 12 and meta["splits"]["dev"]["functions_answer"] == 0
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(tmp_path / "c"), "--functions-answer", "5", "--functions-answer-paired"]) == 0
    paired = [json.loads(line) for line in (tmp_path / "c" / "train.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == "fn_answer" for r in paired) == 5 and sum(r["kind"] == "fn_answer_call" for r in paired) == 5


def test_paired_answer_examples_come_with_a_twin_that_calls_the_fitting_function():
    rows = functions.answer_examples(100, seed=5, paired=True)
    assert len(rows) == 200 and [r["kind"] for r in rows[:4]] == ["fn_answer", "fn_answer_call"] * 2
    for plain, twin in zip(rows[::2], rows[1::2]):
        wanted = BY_NAME[plain["asked"][0]]
        assert twin["id"] == plain["id"] + "-call" and twin["messages"][0] == plain["messages"][0]
        assert "arguments" not in plain["messages"][1] and "tool_calls" not in plain["messages"][1]
        names = [t["function"]["name"] for t in twin["tools"]]
        assert sorted(names) == sorted([t["function"]["name"] for t in plain["tools"]] + [twin["messages"][1]["tool_calls"][0]["function"]["name"]])
        (called,) = twin["messages"][1]["tool_calls"]
        assert catalogue_name(called["function"]["name"]) == wanted.name
        assert set(called["function"]["arguments"]) >= {p.name for p in wanted.params if p.required}
        # The twin's call renders and parses back exactly, with thinking on or off.
        messages = twin["messages"] if twin["thinking"] else [without_reasoning(m) for m in twin["messages"]]
        text, spans = assistant_spans(messages, twin["tools"], twin["thinking"])
        (start, end), = spans
        parsed = parse_output(text[start:end], twin["tools"], thinking=twin["thinking"])
        assert parsed.ok and [(c.name, c.arguments) for c in parsed.tool_calls] == [(called["function"]["name"], called["function"]["arguments"])]
    quoted = functions.answer_examples(20, seed=5, reasoning_style="quote", paired=True)
    assert all(r["messages"][1]["reasoning_content"].startswith("The user asks:") for r in quoted)
