"""Intents: the things a user asks for, drawn against a concrete world.

An ``Intent`` owns its request templates and a ``draw(ctx)`` function that looks at the
seeded world (which alarm is called "Gym", which order is still processing), picks slot
values and returns a ``Draft``: the slots, the gold call batches, the final answer and the
facts that answer must state. The task kinds (``kinds.py``) combine drafts: one (single),
several (parallel), one with a slot withheld (multi_turn, incomplete), with a bad value
(wrong_value), without its tool (unavailable), and so on.

Styles: ``single`` is one call (and may be combined in parallel), ``chain`` looks things up
first and then acts, ``sensitive`` ends in a call that needs the user's confirmation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Callable

from botpsy.world import phrasing
from botpsy.world.world import World


def call(name: str, /, **arguments: Any) -> dict[str, Any]:
    """A gold call; arguments left as None are dropped (the tool's default applies)."""
    return {"name": name, "arguments": {k: v for k, v in arguments.items() if v is not None}}


@dataclass
class Draft:
    slots: dict[str, Any]
    steps: list[list[dict]]  # gold call batches; each batch is one assistant turn
    answer: str
    action: str  # what the user wants, said as "I can't <action>" when the tool is missing
    facts: list[list[str]] = field(default_factory=list)  # each group: the answer names one alternative
    patch: dict[str, list[dict]] = field(default_factory=dict)  # rows this task adds to the seeded world
    confirm_prompt: str = ""  # how the assistant asks before a sensitive call runs
    decline_answer: str = ""  # what it says when the user declines

    @property
    def tools(self) -> list[str]:
        names: list[str] = []
        for batch in self.steps:
            for c in batch:
                if c["name"] not in names:
                    names.append(c["name"])
        return names

    @property
    def calls(self) -> list[dict]:
        return [c for batch in self.steps for c in batch]


@dataclass
class Ask:
    """A slot the request can leave out, and how the assistant asks for it and the user answers."""

    slot: str
    templates: list[str]  # requests without the slot
    questions: list[str]  # the assistant's question (gold)
    keywords: list[str]  # a good question mentions one of these
    replies: list[str]  # the user's answer, formatted with the draft's slots


@dataclass
class Invalid:
    """A slot value the tool cannot take: ``draw(rng, slots)`` -> (slot text, the value as the answer must
    say it, the gold explanation)."""

    slot: str
    draw: Callable[[random.Random, dict], tuple[str, str, str]]


@dataclass
class Intent:
    name: str
    domain: str
    style: str
    templates: list[str]
    draw: Callable[["Ctx"], Draft | None]  # None: this world cannot host the intent
    ask: Ask | None = None
    invalid: Invalid | None = None

    def __post_init__(self) -> None:
        lists = [self.templates] + ([self.ask.templates, self.ask.replies] if self.ask else [])
        for items in lists:
            if len(items) < phrasing.MIN_TEMPLATES:
                raise ValueError(f"intent {self.name}: every phrasing list needs {phrasing.MIN_TEMPLATES}+ entries")


class Ctx:
    """What ``Intent.draw`` sees: the world (read-only), a seeded rng and the split."""

    def __init__(self, world: World, rng: random.Random, split: str):
        self.world = world
        self.rng = rng
        self.split = split
        self.today: date = world.now.date()

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return self.world.read(sql, *params)

    def pick_row(self, sql: str, *params: Any) -> dict[str, Any] | None:
        rows = self.rows(sql, *params)
        return self.rng.choice(rows) if rows else None

    def time(self, value: str) -> str:
        return phrasing.time_phrase(self.rng, value)

    def date(self, day: date) -> str:
        return phrasing.date_phrase(self.rng, day, self.today)

    def one_of(self, *options: str) -> str:
        return self.rng.choice(options)


def first_name(full: str) -> str:
    return full.split()[0]


def minutes_phrase(rng: random.Random, minutes: int) -> str:
    if minutes % 60 == 0:
        hours = minutes // 60
        return rng.choice([f"{hours} hour{'s' if hours > 1 else ''}", f"{minutes} minutes"]) if hours > 1 else \
            rng.choice(["an hour", "one hour", "60 minutes"])
    return rng.choice([f"{minutes} minutes", f"{minutes} min", f"{minutes} mins"])
