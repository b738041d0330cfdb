"""Shared helpers for the device-world tests: a pool of generated tasks and scripted agents."""

from __future__ import annotations

import pytest

from botpsy.world.task import Task
from botpsy.world.tasks import KINDS, generate_tasks


def tasks_by_kind(tasks: list[Task]) -> dict[str, list[Task]]:
    out: dict[str, list[Task]] = {k: [] for k in KINDS}
    for task in tasks:
        out[task.kind].append(task)
    return out


@pytest.fixture(scope="session")
def task_pool() -> dict[str, list[Task]]:
    """A few hundred train tasks grouped by kind, shared by the checker tests."""
    return tasks_by_kind(generate_tasks("train", 400, seed=11))


class ScriptedAgent:
    """Plays a fixed list of assistant messages, one per turn (then says goodbye)."""

    def __init__(self, messages: list[dict]):
        self.queue = list(messages)

    def __call__(self, messages: list[dict], tools: list[dict]) -> dict:
        if self.queue:
            return self.queue.pop(0)
        return {"role": "assistant", "content": "Done."}


def calls_message(*calls: tuple[str, dict]) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]}


def say(text: str) -> dict:
    return {"role": "assistant", "content": text}
