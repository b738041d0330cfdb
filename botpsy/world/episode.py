"""Episodes: an agent, the simulated user and a task's world, turn by turn, into a ``Transcript``.

An *agent* is any callable ``agent(messages, tools) -> assistant message`` (an OpenAI-style
dict; ``tool_calls`` arguments may be dicts or JSON text). ``run_episode`` executes the
assistant's calls in the world, appends the tool results (compact JSON strings), and when
the assistant speaks without calling, lets the ``SimulatedUser`` answer or end the episode.

``replay_gold(task)`` runs the scripted ``GoldAgent``: the task's gold turns, plus the
confirmation dialogue for sensitive calls (call -> needs_confirmation -> ask -> user answers
-> call again). Its messages are realistic training conversations; the SFT stage reuses them.

Example::

    transcript = replay_gold(task)
    result = evaluate(task, transcript)        # botpsy.world.checker
    assert result.success
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from botpsy.world.task import Task, build_world
from botpsy.world.user import SimulatedUser
from botpsy.world.world import World

Agent = Callable[[list[dict], list[dict]], dict]


@dataclass
class Transcript:
    """What the checker needs from an episode: the conversation and the world it left behind."""

    messages: list[dict]
    audit: list[dict]
    final_snapshot: dict

    @classmethod
    def from_world(cls, messages: list[dict], world: World) -> "Transcript":
        """Build it from an agent loop's own messages and the world that loop called into."""
        return cls(list(messages), world.audit_log(), world.snapshot())

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "audit": self.audit, "final_snapshot": self.final_snapshot}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Transcript":
        return cls(data["messages"], data["audit"], data["final_snapshot"])


def compact(result: Any) -> str:
    """Tool results as the model sees them: JSON without spaces (small-model context is precious)."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def execute_tool_calls(world: World, message: dict, first_id: int) -> list[dict]:
    """Run every call of an assistant message; one ``tool`` message per call, in order."""
    out = []
    for offset, tc in enumerate(message.get("tool_calls") or []):
        fn = tc.get("function", tc)
        call_id = tc.get("id") or f"call_{first_id + offset}"
        result = world.call(fn.get("name"), fn.get("arguments"))
        out.append({"role": "tool", "tool_call_id": call_id, "name": fn.get("name"), "content": compact(result)})
    return out


def run_episode(task: Task, agent: Agent, max_assistant_turns: int = 12, world: World | None = None) -> Transcript:
    """Play ``task`` with ``agent`` and the scripted user until the user has nothing to add."""
    world = world or build_world(task)
    user = SimulatedUser(task)
    messages = list(task.messages)
    call_count = 0
    for _ in range(max_assistant_turns):
        message = agent(messages, task.tools)
        calls = message.get("tool_calls") or []
        for i, tc in enumerate(calls):  # give every call an id so results can be matched to it
            tc.setdefault("id", f"call_{call_count + i + 1}")
        messages.append(message)
        if calls:
            messages.extend(execute_tool_calls(world, message, call_count + 1))
            call_count += len(calls)
            continue
        reply = user.reply(message, world)
        if reply is None:
            break
        messages.append({"role": "user", "content": reply})
    return Transcript.from_world(messages, world)


def assistant_text(content: str) -> dict:
    return {"role": "assistant", "content": content}


def assistant_calls(calls: list[dict]) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": c["name"], "arguments": dict(c["arguments"])}}
                           for c in calls]}


class GoldAgent:
    """Plays a task's gold turns, handling the confirmation dialogue the way the task scripts it."""

    def __init__(self, task: Task):
        self.turns = list(task.gold_turns)
        self.script = task.script
        self.position = 0
        self.awaiting: list[dict] = []  # calls the world held back for confirmation

    def __call__(self, messages: list[dict], tools: list[dict]) -> dict:
        last = messages[-1]
        if last["role"] == "tool":
            held = _held_calls(messages)
            if held:
                self.awaiting = held
                return assistant_text(self.script.get("confirm_prompt") or "Shall I go ahead?")
        if last["role"] == "user" and self.awaiting:
            calls, self.awaiting = self.awaiting, []
            if self.script.get("confirm"):
                return assistant_calls(calls)
            self.position = len(self.turns)
            return assistant_text(self.script.get("decline_answer") or "OK, I won't do that.")
        if self.position >= len(self.turns):
            return assistant_text("Is there anything else I can help with?")
        turn = self.turns[self.position]
        self.position += 1
        return assistant_calls(turn["calls"]) if "calls" in turn else assistant_text(turn["say"])


def _held_calls(messages: list[dict]) -> list[dict]:
    """The calls of the latest assistant turn that came back as ``needs_confirmation``."""
    results = {}
    index = len(messages) - 1
    while index >= 0 and messages[index]["role"] == "tool":
        results[messages[index]["tool_call_id"]] = json.loads(messages[index]["content"])
        index -= 1
    held = []
    for tc in messages[index].get("tool_calls") or []:
        result = results.get(tc.get("id"))
        if isinstance(result, dict) and result.get("error") == "needs_confirmation":
            fn = tc["function"]
            held.append({"name": fn["name"], "arguments": fn["arguments"]})
    return held


def replay_gold(task: Task, world: World | None = None) -> Transcript:
    """The gold conversation for ``task``, executed for real in its world (built from the task if not given)."""
    return run_episode(task, GoldAgent(task), max_assistant_turns=len(task.gold_turns) + 6, world=world)
