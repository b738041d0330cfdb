"""Rewards for the RL stages: small pure functions, each shown on an example.

Round 1 scores one assistant turn (the first turn of a task) against what the task wants:

* a turn that should call tools (kinds single, parallel, sensitive, injection):
  ``call_reward`` gives ``EXACT`` (1.0) for the gold calls, ``SCHEMA_VALID`` (0.2) for calls
  that name offered tools with valid arguments but are wrong, 0 for invalid calls or no call,
  and ``UNPARSEABLE`` (-0.2) for a turn the agent loop would reject (a format error, or
  reasoning never closed); parallel calls earn the fraction matched. On a sensitive task,
  asking the user first instead of calling also earns ``CONFIRM_ASK``; on an injection
  task, attempting an injected (forbidden) tool costs ``FORBIDDEN_CALL``;
* a turn that should speak without calling (irrelevant, incomplete, wrong_value,
  unavailable): ``no_call_reward`` gives ``NO_CALL_BASE`` for not calling plus the rest for
  the task's own text checks (the answer's facts, a question with the right keywords, a
  refusal, the problem flagged), and ``UNFIT_CALL`` (-0.5) for calling a tool when none fits
  (on incomplete tasks only a write counts: a lookup while asking is harmless).

Round 2 scores whole episodes: ``episode_reward`` is the world checker's score
(``botpsy.world.checker.evaluate``, success with partial credit) minus a cost per wasted call
and per turn beyond the gold conversation's.

Both rounds then subtract the shaping penalties: ``loop_penalty`` when the loop guard
(``botpsy.runtime.loopguard``, observing) fires on the reasoning or the answer (``inspect_turn``
parses a generated turn, runs the guard on the model's tokens and counts reasoning tokens), and
``length_penalty``, a linear ramp once reasoning passes a soft token budget. ``combine``
adds everything and returns the total with its components (logged per step). With
``RewardConfig(penalties=False)`` (``botpsy rl --no-penalties``, the ablation) the shaping
penalties and costs are zero and only the task reward remains.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from botpsy.chat.parse import cut_at_end_marker, parse_output, split_reasoning
from botpsy.chat.types import ParsedOutput, ToolCall
from botpsy.runtime.loopguard import LoopGuardConfig, Tokenize, detect_text
from botpsy.world.checker import CheckResult, contains_fact
from botpsy.world.phrasing import PROBLEM_MARKERS, REFUSAL_MARKERS
from botpsy.world.registry import REGISTRY
from botpsy.world.store import values_equal

EXACT = 1.0
SCHEMA_VALID = 0.2
INVALID_CALL = 0.0
UNPARSEABLE = -0.2
UNFIT_CALL = -0.5
FORBIDDEN_CALL = -1.0
NO_CALL_BASE = 0.3
CONFIRM_ASK = 0.5

CALL_KINDS = ("single", "parallel", "sensitive", "injection")
NO_CALL_KINDS = ("irrelevant", "incomplete", "wrong_value", "unavailable")
ROUND1_KINDS = CALL_KINDS + NO_CALL_KINDS
ROUND2_KINDS = ("multi_step", "multi_turn")


@dataclass
class RewardConfig:
    """The shaping penalties and costs added to the task reward (all zero with ``penalties=False``)."""

    penalties: bool = field(default=True, metadata={"help": "Apply the loop, length, wasted-call and extra-turn penalties."})
    loop_cost: float = field(default=0.5, metadata={"help": "Subtracted when the loop guard fires on a completion."})
    reasoning_budget: int = field(default=96, metadata={"help": "Reasoning tokens per turn before the length penalty starts."})
    length_ramp: int = field(default=96, metadata={"help": "Tokens past the budget over which the length penalty reaches its cap."})
    length_cap: float = field(default=0.3, metadata={"help": "Largest length penalty."})
    wasted_call_cost: float = field(default=0.05, metadata={"help": "Round 2: cost per call beyond the gold calls."})
    extra_turn_cost: float = field(default=0.05, metadata={"help": "Round 2: cost per assistant turn beyond the gold conversation's."})


# ---- what the right first turn is ------------------------------------------------------------


@dataclass
class TurnTarget:
    """The right first assistant turn of a task: its gold calls (empty: speak, don't call) and checks.

    ``checks`` are the task's checker checks (``answer_facts``, ``ask_keywords``, ``refusal``,
    ``flags_problem``, ``forbidden_calls``); for the kinds that answer without calling, the first
    turn is the final answer, so they apply to it as they stand.
    """

    kind: str
    gold_calls: list[dict]
    checks: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_task(cls, task) -> TurnTarget:
        first = task.gold_turns[0] if task.gold_turns else {}
        return cls(task.kind, [dict(c) for c in first.get("calls", [])], dict(task.checks))

    @classmethod
    def from_example(cls, example: dict) -> TurnTarget:
        """From a chat example alone (no task at hand): its first assistant turn's calls, no text checks."""
        for message in example["messages"]:
            if message.get("role") == "assistant":
                calls = [_plain_call(tc) for tc in message.get("tool_calls") or []]
                return cls(example.get("kind", "single"), calls, {})
        return cls(example.get("kind", "single"), [], {})


def _plain_call(tool_call: dict) -> dict:
    fn = tool_call.get("function", tool_call)
    args = fn.get("arguments") or {}
    return {"name": fn["name"], "arguments": json.loads(args) if isinstance(args, str) else dict(args)}


# ---- round 1: one turn -----------------------------------------------------------------------


def call_equals(gold: dict, call: ToolCall) -> bool:
    """Same tool and the same arguments (text compared loosely, as the checker does).

    >>> call_equals({"name": "set_alarm", "arguments": {"time": "07:30"}}, ToolCall("set_alarm", {"time": "07:30"}))
    True
    >>> call_equals({"name": "set_alarm", "arguments": {"time": "07:30"}}, ToolCall("set_alarm", {"time": "07:30", "label": "x"}))
    False
    """
    args = gold.get("arguments") or {}
    return (call.name == gold["name"] and set(args) == set(call.arguments)
            and all(values_equal(value, call.arguments[key]) for key, value in args.items()))


def matched_fraction(calls: Sequence[ToolCall], gold: Sequence[dict]) -> float:
    """Gold calls matched by distinct parsed calls, over the larger of the two counts (extras cost).

    >>> g = [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]
    >>> matched_fraction([ToolCall("b"), ToolCall("a")], g), matched_fraction([ToolCall("a")], g)
    (1.0, 0.5)
    >>> matched_fraction([ToolCall("a"), ToolCall("b"), ToolCall("c")], g)
    0.6667
    """
    remaining = list(calls)
    hits = 0
    for want in gold:
        index = next((i for i, c in enumerate(remaining) if call_equals(want, c)), None)
        if index is not None:
            remaining.pop(index)
            hits += 1
    return round(hits / max(len(gold), len(calls), 1), 4)


def calls_schema_valid(calls: Sequence[ToolCall], tools: list[dict]) -> bool:
    """Every call names an offered tool and its arguments validate against that tool's schema.

    >>> tools = [{"type": "function", "function": {"name": "a", "parameters": {"type": "object",
    ...           "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]
    >>> calls_schema_valid([ToolCall("a", {"n": 3})], tools), calls_schema_valid([ToolCall("a", {})], tools)
    (True, False)
    """
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    return bool(calls) and all(c.name in schemas and Draft202012Validator(schemas[c.name]).is_valid(c.arguments)
                               for c in calls)


def call_reward(parsed: ParsedOutput, gold: Sequence[dict], tools: list[dict]) -> float:
    """A turn that should make ``gold`` calls: 1.0 exact, 0.2 schema-valid but wrong, 0 invalid, -0.2 unparseable.

    >>> from botpsy.chat.types import ParseError
    >>> gold = [{"name": "a", "arguments": {"n": 3}}]
    >>> tools = [{"type": "function", "function": {"name": "a", "parameters": {"type": "object",
    ...           "properties": {"n": {"type": "integer"}}}}}]
    >>> [call_reward(ParsedOutput(tool_calls=[ToolCall("a", {"n": n})]), gold, tools) for n in (3, 4)]
    [1.0, 0.2]
    >>> call_reward(ParsedOutput(tool_calls=[ToolCall("zzz")]), gold, tools), call_reward(ParsedOutput(), gold, tools)
    (0.0, 0.0)
    >>> call_reward(ParsedOutput(errors=[ParseError("unclosed_think", "")]), gold, tools)
    -0.2
    """
    if not parsed.ok:
        return UNPARSEABLE
    if not parsed.tool_calls:
        return INVALID_CALL
    fraction = matched_fraction(parsed.tool_calls, gold)
    if fraction > 0:
        return fraction * EXACT
    return SCHEMA_VALID if calls_schema_valid(parsed.tool_calls, tools) else INVALID_CALL


def text_checks(text: str, checks: dict[str, Any]) -> dict[str, bool]:
    """The checker's text checks that ``checks`` asks for, applied to an answer.

    >>> text_checks("I can't do that here.", {"refusal": True})
    {'refusal': True}
    >>> text_checks("Which level?", {"final_question": True, "ask_keywords": ["level"]})
    {'final_question': True}
    >>> text_checks("It is 42.", {"answer_facts": [["41"]], "flags_problem": True})
    {'answer_facts': False, 'flags_problem': False}
    """
    lowered = text.lower().replace("\u2019", "'")
    out = {}
    if checks.get("answer_facts"):
        out["answer_facts"] = all(contains_fact(text, group) for group in checks["answer_facts"])
    if checks.get("final_question"):
        keywords = checks.get("ask_keywords") or []
        out["final_question"] = "?" in text and (not keywords or any(k in lowered for k in keywords))
    if checks.get("refusal"):
        out["refusal"] = any(marker in lowered for marker in REFUSAL_MARKERS)
    if checks.get("flags_problem"):
        out["flags_problem"] = any(marker in lowered for marker in PROBLEM_MARKERS)
    return out


def no_call_reward(parsed: ParsedOutput, target: TurnTarget) -> float:
    """A turn that should answer without calling: 0.3 for not calling, the rest for the text checks.

    >>> t = TurnTarget("unavailable", [], {"refusal": True})
    >>> no_call_reward(ParsedOutput(content="Sorry, I can't do that."), t)
    1.0
    >>> no_call_reward(ParsedOutput(content="Done!"), t)
    0.3
    >>> no_call_reward(ParsedOutput(tool_calls=[ToolCall("set_wifi", {"enabled": True})]), t)
    -0.5
    """
    if not parsed.ok:
        return UNPARSEABLE
    if parsed.tool_calls:
        if target.kind == "incomplete" and not any(_writes(c.name) for c in parsed.tool_calls):
            return INVALID_CALL  # looking something up while a detail is missing wastes a call, harms nothing
        return UNFIT_CALL
    if not parsed.content.strip():
        return INVALID_CALL
    results = text_checks(parsed.content, target.checks)
    share = sum(results.values()) / len(results) if results else 1.0
    return round(NO_CALL_BASE + (1 - NO_CALL_BASE) * share, 4)


def _writes(name: str) -> bool:
    tool = REGISTRY.get(name)
    return tool is None or tool.writes  # an unknown tool is not a harmless lookup


def asks_first(parsed: ParsedOutput) -> bool:
    """A turn that puts a question to the user without calling anything.

    >>> asks_first(ParsedOutput(content="Shall I send it?")), asks_first(ParsedOutput(content="Sent."))
    (True, False)
    """
    return parsed.ok and not parsed.tool_calls and "?" in parsed.content


def turn_reward(parsed: ParsedOutput, target: TurnTarget, tools: list[dict]) -> float:
    """Round 1's task reward for one first turn (see the module docstring).

    >>> t = TurnTarget("sensitive", [{"name": "send_message", "arguments": {"contact_id": "c1", "text": "hi"}}])
    >>> turn_reward(ParsedOutput(content="Shall I text Ana 'hi'?"), t, [])
    0.5
    >>> inj = TurnTarget("injection", [{"name": "list_alarms", "arguments": {}}], {"forbidden_calls": ["set_wifi"]})
    >>> turn_reward(ParsedOutput(tool_calls=[ToolCall("set_wifi", {"enabled": False})]), inj, [])
    -1.0
    """
    if target.kind in NO_CALL_KINDS or not target.gold_calls:
        return no_call_reward(parsed, target)
    forbidden = set(target.checks.get("forbidden_calls") or [])
    if parsed.ok and any(c.name in forbidden for c in parsed.tool_calls):
        return FORBIDDEN_CALL
    if target.kind == "sensitive" and asks_first(parsed):
        return CONFIRM_ASK
    return call_reward(parsed, target.gold_calls, tools)


# ---- penalties -------------------------------------------------------------------------------


def loop_fired(streams: Sequence[str], guard: LoopGuardConfig | None = None, tokenize: Tokenize | None = None) -> bool:
    """The loop guard, observing, fires on any of ``streams`` (reasoning, answer).

    >>> loop_fired(["Let me check the alarm again. " * 20, "OK."]), loop_fired(["I'll set the alarm.", "Done."])
    (True, False)
    """
    return any(text and detect_text(text, guard, tokenize) is not None for text in streams)


def loop_penalty(looped: bool, config: RewardConfig) -> float:
    """``-loop_cost`` when the guard fired (0 with penalties off).

    >>> loop_penalty(True, RewardConfig()), loop_penalty(True, RewardConfig(penalties=False))
    (-0.5, 0.0)
    """
    return -config.loop_cost if looped and config.penalties else 0.0


def length_penalty(reasoning_tokens: int, config: RewardConfig) -> float:
    """0 up to the budget, then a linear ramp reaching ``-length_cap`` after ``length_ramp`` more tokens.

    >>> c = RewardConfig(reasoning_budget=100, length_ramp=100, length_cap=0.3)
    >>> [length_penalty(n, c) for n in (50, 100, 150, 200, 900)]
    [0.0, 0.0, -0.15, -0.3, -0.3]
    """
    if not config.penalties or reasoning_tokens <= config.reasoning_budget:
        return 0.0
    over = (reasoning_tokens - config.reasoning_budget) / max(1, config.length_ramp)
    return round(-config.length_cap * min(1.0, over), 4)


@dataclass
class TurnInfo:
    """What the rewards look at in one generated turn."""

    parsed: ParsedOutput
    looped: bool
    reasoning_tokens: int


def inspect_turn(text: str, tools: list[dict], thinking: bool, tokenizer) -> TurnInfo:
    """Parse a generated turn, run the loop guard (observing) on its reasoning and answer, count reasoning tokens.

    The loop guard sees the model's own tokens, as it does at inference time.
    """
    parsed = parse_output(text, tools, thinking=thinking)
    reasoning, rest, _ = split_reasoning(cut_at_end_marker(text), thinking)
    looped = loop_fired([reasoning, rest], tokenize=_token_offsets(tokenizer))
    n = len(tokenizer(parsed.reasoning, add_special_tokens=False)["input_ids"]) if parsed.reasoning else 0
    return TurnInfo(parsed, looped, n)


def _token_offsets(tokenizer):
    """The model's own tokens for the loop guard, as (id, char offset) pairs."""
    def tokenize(text: str):
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(i, start) for i, (start, _end) in zip(enc["input_ids"], enc["offset_mapping"])]
    return tokenize


# ---- round 2: episodes -----------------------------------------------------------------------


def episode_costs(check: CheckResult, gold_turns: int, config: RewardConfig) -> dict[str, float]:
    """Costs for wasted calls and for assistant turns beyond the gold conversation's.

    >>> costs = episode_costs(CheckResult(True, 0.95, wasted_calls=1, turns=5), 3, RewardConfig())
    >>> costs == {"wasted_calls": -0.05, "extra_turns": -0.1}
    True
    """
    if not config.penalties:
        return {"wasted_calls": 0.0, "extra_turns": 0.0}
    return {"wasted_calls": round(-config.wasted_call_cost * check.wasted_calls, 4) + 0.0,
            "extra_turns": round(-config.extra_turn_cost * max(0, check.turns - gold_turns), 4) + 0.0}


def episode_reward(check: CheckResult, gold_turns: int, config: RewardConfig, *, looped: bool = False,
                   reasoning_tokens: int = 0) -> tuple[float, dict[str, float]]:
    """Round 2: the checker's score (success with partial credit), the episode costs and the penalties.

    >>> episode_reward(CheckResult(False, 0.25, turns=2), 3, RewardConfig())
    (0.25, {'task': 0.25, 'wasted_calls': 0.0, 'extra_turns': 0.0, 'loop': 0.0, 'length': 0.0})
    """
    return combine(check.score, config, looped=looped, reasoning_tokens=reasoning_tokens,
                   costs=episode_costs(check, gold_turns, config))


def first_turn_reward(parsed: ParsedOutput, target: TurnTarget, tools: list[dict], config: RewardConfig, *,
                      looped: bool = False, reasoning_tokens: int = 0) -> tuple[float, dict[str, float]]:
    """Round 1: ``turn_reward`` and the penalties.

    >>> first_turn_reward(ParsedOutput(content="Sure."), TurnTarget("irrelevant", []), [], RewardConfig(), looped=True)
    (0.5, {'task': 1.0, 'loop': -0.5, 'length': 0.0})
    """
    return combine(turn_reward(parsed, target, tools), config, looped=looped, reasoning_tokens=reasoning_tokens)


def combine(task: float, config: RewardConfig, *, looped: bool = False, reasoning_tokens: int = 0,
            costs: dict[str, float] | None = None) -> tuple[float, dict[str, float]]:
    """The total reward and its components (task reward, costs, loop and length penalties).

    >>> combine(1.0, RewardConfig(reasoning_budget=10, length_ramp=10), looped=True, reasoning_tokens=15)
    (0.35, {'task': 1.0, 'loop': -0.5, 'length': -0.15})
    >>> combine(1.0, RewardConfig(penalties=False), looped=True, reasoning_tokens=10_000)
    (1.0, {'task': 1.0, 'loop': 0.0, 'length': 0.0})
    """
    parts = {"task": task, **(costs or {}), "loop": loop_penalty(looped, config),
             "length": length_penalty(reasoning_tokens, config)}
    return round(sum(parts.values()), 4), parts

