"""``EpisodeAgent`` inside ``world.run_episode``: the simulated user drives turns and confirmations."""

from __future__ import annotations

import pytest

from botpsy.agent import AgentConfig, EpisodeAgent
from botpsy.runtime.scripted import ScriptedBackend
from botpsy.world import KINDS, evaluate, generate_tasks, run_episode
from tests.agent.conftest import call, gold_scripts, turn

TASKS = generate_tasks("test", 200, seed=0)


def first_of(kind, **script):
    return next(t for t in TASKS if t.kind == kind and all(t.script.get(k) == v for k, v in script.items()))


@pytest.mark.parametrize("kind", KINDS)
def test_gold_turns_generated_through_the_agent_solve_every_kind(kind):
    task = first_of(kind)
    backend = ScriptedBackend(gold_scripts(task))
    agent = EpisodeAgent(backend)
    transcript = run_episode(task, agent)
    result = evaluate(task, transcript)
    assert result.success, result.reasons
    assert backend.remaining == 0 and len(agent.steps) == len(backend.calls)
    assert agent.stop_reason is None


@pytest.mark.parametrize("confirm", [True, False])
def test_confirmation_is_decided_by_the_simulated_user(confirm):
    """call -> needs_confirmation -> the model asks -> the user decides -> the model calls again (or not)."""
    task = first_of("sensitive", confirm=confirm)
    transcript = run_episode(task, EpisodeAgent(ScriptedBackend(gold_scripts(task))))
    decisions = [a["status"] for a in transcript.audit if a["actor"] == "user"]
    assert decisions == (["approved"] if confirm else ["declined"])
    ran = [a for a in transcript.audit if a["actor"] == "assistant" and a["status"] == "ok"
           and a["name"] == task.gold_calls[-1]["name"]]
    assert bool(ran) is confirm
    assert evaluate(task, transcript).success


def test_a_malformed_turn_is_retried_inside_one_agent_call():
    task = first_of("single")
    gold = gold_scripts(task)
    broken = "Hmm.\n</think>\n\n<tool_call>\n<function=" + task.gold_calls[0]["name"] + "\n<|im_end|>"
    backend = ScriptedBackend([broken] + gold)
    agent = EpisodeAgent(backend)
    transcript = run_episode(task, agent)
    assert evaluate(task, transcript).success
    assert agent.steps[0].parse_errors and not agent.steps[1].parse_errors
    assert "format_check" not in str(transcript.messages)  # the retry stays out of the episode's conversation
    assert "Hmm." not in str(transcript.messages)
    assert agent.steps[0].parse_errors[0]["message"][:30] in backend.calls[1].prompt


def test_retries_are_bounded_and_the_malformed_turn_is_returned():
    broken = "Hmm.\n</think>\n\n<tool_call>\n<function=x\n<|im_end|>"
    backend = ScriptedBackend([broken] * 2)
    agent = EpisodeAgent(backend, AgentConfig(max_retries=1))
    message = agent([{"role": "user", "content": "hi"}], [])
    assert len(backend.calls) == 2 and message["content"].startswith("<tool_call>")


def test_token_budget_spans_the_episode_and_ends_it():
    task = first_of("multi_step")
    scripts = [turn("", call("get_device_status"))] * 10
    cost = len(ScriptedBackend([]).tokenize(scripts[0].rstrip("\n")))  # the model stops at <|im_end|>
    agent = EpisodeAgent(ScriptedBackend(scripts), AgentConfig(token_budget=cost * 3))
    run_episode(task, agent)
    assert len(agent.steps) == 3 and agent.stop_reason == "token_budget"
