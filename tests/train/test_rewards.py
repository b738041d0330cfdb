"""RL rewards: the doctests, each reward on real device-world tasks, the penalties and the ablation switch."""

from __future__ import annotations

import doctest
import itertools

import pytest

from botpsy.chat.parse import parse_output
from botpsy.chat.template import render_completion
from botpsy.train import rewards
from botpsy.train.rewards import (
    CONFIRM_ASK,
    EXACT,
    FORBIDDEN_CALL,
    INVALID_CALL,
    NO_CALL_BASE,
    SCHEMA_VALID,
    UNFIT_CALL,
    UNPARSEABLE,
    RewardConfig,
    TurnTarget,
    combine,
    episode_reward,
    first_turn_reward,
    length_penalty,
    loop_fired,
    loop_penalty,
    turn_reward,
)
from botpsy.world import CheckResult, generate_tasks


def test_doctests():
    result = doctest.testmod(rewards)
    assert result.attempted >= 15 and result.failed == 0


@pytest.fixture(scope="module")
def tasks_by_kind():
    """One task per kind; the single-call task has a text argument (so a wrong value can still be schema-valid)."""
    by_kind = {}
    for task in generate_tasks("train", 120, seed=3):
        if task.kind == "single" and not any(isinstance(v, str) and "date" not in k and "time" not in k
                                             for k, v in task.gold_turns[0]["calls"][0]["arguments"].items()):
            continue
        by_kind.setdefault(task.kind, task)
    return by_kind


def turn(content="", calls=(), reasoning="ok"):
    """What a model would generate after ``<think>\\n`` for one turn, parsed."""
    text = render_completion(reasoning, content, [{"type": "function", "function": c} for c in calls])
    return text


def reward_of(task, text):
    return turn_reward(parse_output(text, task.tools), TurnTarget.from_task(task), task.tools)


def test_exact_schema_valid_and_garbage_calls(tasks_by_kind):
    task = tasks_by_kind["single"]
    gold = task.gold_turns[0]["calls"]
    assert reward_of(task, turn(calls=gold)) == EXACT
    # The same tool with a text argument that still validates but is wrong.
    name, arguments = gold[0]["name"], dict(gold[0]["arguments"])
    key = next(k for k, v in arguments.items() if isinstance(v, str) and "date" not in k and "time" not in k)
    arguments[key] = "something else entirely"
    assert reward_of(task, turn(calls=[{"name": name, "arguments": arguments}])) == SCHEMA_VALID
    assert reward_of(task, turn(calls=[{"name": "not_a_tool", "arguments": {}}])) == INVALID_CALL
    assert reward_of(task, "I keep thinking and never close the reasoning") == UNPARSEABLE
    assert reward_of(task, "ok\n</think>\n\n<tool_call>\n<function=set_alarm>\n<parameter=x>\n") == UNPARSEABLE


def test_parallel_calls_earn_the_fraction_matched(tasks_by_kind):
    task = tasks_by_kind["parallel"]
    gold = task.gold_turns[0]["calls"]
    assert reward_of(task, turn(calls=gold)) == EXACT
    assert reward_of(task, turn(calls=gold[:1])) == pytest.approx(round(1 / len(gold), 4))
    assert reward_of(task, turn(calls=list(reversed(gold)))) == EXACT


def test_special_cases_reward_the_right_behaviour(tasks_by_kind):
    irrelevant = tasks_by_kind["irrelevant"]
    answer = irrelevant.gold_turns[0]["say"]
    assert reward_of(irrelevant, turn(answer)) == 1.0
    assert reward_of(irrelevant, turn("No idea, sorry.")) == NO_CALL_BASE
    some_tool = irrelevant.tools[0]["function"]["name"]
    assert reward_of(irrelevant, turn(calls=[{"name": some_tool, "arguments": {}}])) == UNFIT_CALL

    incomplete = tasks_by_kind["incomplete"]
    assert reward_of(incomplete, turn(incomplete.gold_turns[0]["say"])) == 1.0  # asks, with the right keyword
    assert reward_of(incomplete, turn("Done, all set.")) == NO_CALL_BASE
    unavailable = tasks_by_kind["unavailable"]
    assert reward_of(unavailable, turn("Sorry, I can't do that with the tools I have.")) == 1.0
    assert reward_of(unavailable, turn("Done!")) == NO_CALL_BASE
    wrong_value = tasks_by_kind["wrong_value"]
    assert reward_of(wrong_value, turn(wrong_value.gold_turns[0]["say"])) == 1.0


def test_incomplete_penalises_guessing_a_write_not_a_lookup():
    target = TurnTarget("incomplete", [], {"final_question": True})
    write = parse_output(turn(calls=[{"name": "set_alarm", "arguments": {"time": "07:00"}}]))
    lookup = parse_output(turn(calls=[{"name": "list_alarms", "arguments": {}}]))
    assert turn_reward(write, target, []) == UNFIT_CALL
    assert turn_reward(lookup, target, []) == INVALID_CALL


def test_sensitive_and_injection_first_turns(tasks_by_kind):
    sensitive = tasks_by_kind["sensitive"]
    assert reward_of(sensitive, turn(calls=sensitive.gold_turns[0]["calls"])) == EXACT
    assert reward_of(sensitive, turn("Shall I go ahead with that?")) == CONFIRM_ASK
    injection = tasks_by_kind["injection"]
    forbidden = injection.checks["forbidden_calls"][0]
    assert reward_of(injection, turn(calls=injection.gold_turns[0]["calls"])) == EXACT
    assert reward_of(injection, turn(calls=[{"name": forbidden, "arguments": {}}])) == FORBIDDEN_CALL


def test_loop_text_gets_the_penalty():
    looping = "I should check the alarm list again before answering. " * 12
    assert loop_fired([looping, ""]) and loop_fired(["fine", looping])
    assert not loop_fired(["I'll list the alarms, then answer.", "Your alarms: 7:00 and 8:30."])
    parsed = parse_output(looping + "\n</think>\n\nThe answer is 42.")
    total, parts = first_turn_reward(parsed, TurnTarget("irrelevant", [], {"answer_facts": [["42"]]}), [],
                                     RewardConfig(), looped=loop_fired([parsed.reasoning, parsed.content]))
    assert parts == {"task": 1.0, "loop": -0.5, "length": 0.0} and total == 0.5


def test_inspect_turn_runs_the_guard_on_model_tokens_and_counts_reasoning(tiny_tokenizer):
    from botpsy.train.rewards import inspect_turn

    looping = "I will set the alarm. " * 30 + "\n</think>\n\nDone.<|im_end|>"
    info = inspect_turn(looping, [], True, tiny_tokenizer)
    assert info.looped and info.parsed.ok and info.parsed.content == "Done."
    assert info.reasoning_tokens == len(tiny_tokenizer(info.parsed.reasoning, add_special_tokens=False)["input_ids"])
    calm = inspect_turn("Set it.\n</think>\n\nDone.<|im_end|>", [], True, tiny_tokenizer)
    assert not calm.looped and 0 < calm.reasoning_tokens < 10
    assert inspect_turn("Done.<|im_end|>", [], False, tiny_tokenizer).reasoning_tokens == 0


def test_long_reasoning_gets_the_ramp():
    config = RewardConfig(reasoning_budget=50, length_ramp=50, length_cap=0.4)
    values = [length_penalty(n, config) for n in (0, 50, 60, 75, 100, 1000)]
    assert values == [0.0, 0.0, -0.08, -0.2, -0.4, -0.4]
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_penalties_off_means_zero_penalty():
    off = RewardConfig(penalties=False)
    assert loop_penalty(True, off) == 0.0 and length_penalty(10_000, off) == 0.0
    total, parts = combine(0.7, off, looped=True, reasoning_tokens=10_000)
    assert total == 0.7 and parts["loop"] == 0.0 and parts["length"] == 0.0
    check = CheckResult(success=True, score=0.9, wasted_calls=2, turns=9)
    total, parts = episode_reward(check, 3, off, looped=True, reasoning_tokens=10_000)
    assert total == 0.9 and all(v == 0.0 for k, v in parts.items() if k != "task")
    total, parts = episode_reward(check, 3, RewardConfig(), looped=True)
    assert parts["wasted_calls"] == -0.1 and parts["extra_turns"] == -0.3 and parts["loop"] == -0.5
    assert total == pytest.approx(0.9 - 0.1 - 0.3 - 0.5)


def test_target_from_example_matches_target_from_task(tasks_by_kind):
    import random

    from botpsy.train.trajectories import trajectory

    for kind in ("single", "parallel", "irrelevant"):
        task = tasks_by_kind[kind]
        example = trajectory(task.to_dict(), random.Random(0), 0.5)
        assert TurnTarget.from_example(example).gold_calls == TurnTarget.from_task(task).gold_calls
