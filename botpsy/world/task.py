"""The ``Task`` record (one episode to solve, as written to JSONL) and ``build_world`` for it.

Example::

    task = Task.from_json(line)             # a line written by ``botpsy tasks``
    world = build_world(task)               # seeded, patched, only the offered tools callable
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from botpsy.world.world import World


@dataclass
class Task:
    """One episode to solve. ``messages`` hold the system prompt and the first user request.

    ``group`` is the domain for the core kinds and ``"special"`` for irrelevant, incomplete,
    wrong_value and unavailable, whose ``domain`` still names the underlying request's domain.
    """

    id: str
    split: str
    kind: str
    domain: str
    group: str
    world_seed: int
    messages: list[dict]
    tools: list[dict]
    gold_calls: list[dict]
    expected_state: dict[str, Any]
    gold_turns: list[dict]
    checks: dict[str, Any]
    script: dict[str, Any] = field(default_factory=dict)
    patch: dict[str, list[dict]] = field(default_factory=dict)
    intent: str = ""
    template: str = ""

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Task":
        names = {f.name for f in fields(cls)}
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing = [name for name in required if name not in data]
        if missing:
            raise ValueError(f"task record lacks {missing}")
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_json(cls, line: str) -> "Task":
        return cls.from_dict(json.loads(line))


def build_world(task: Task, path: str = ":memory:") -> World:
    """The task's world as the episode starts: seeded, patched, only the offered tools callable."""
    world = World(path, seed=task.world_seed, offered=task.tool_names)
    if task.patch:
        world.apply_patch(task.patch)
    return world
