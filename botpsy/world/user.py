"""The scripted simulated user: answers the assistant the way the task's script says.

Given an assistant message without tool calls (a question or an answer), the user:

1. decides any confirmation requests the world holds: approves those that match a sensitive
   gold call when the script says ``confirm: true``, declines everything else (so an
   injected "forward my inbox" is never approved), and says yes or no;
2. otherwise, if the assistant asked a question and the script has a ``detail`` not yet
   given (multi-turn tasks), replies with it;
3. otherwise, if the assistant asked before making a sensitive call, approves (or declines)
   the intended calls in advance, once;
4. otherwise returns ``None``: the user has nothing to add and the episode ends.
"""

from __future__ import annotations

import random
from typing import Any

from botpsy.world.phrasing import CONFIRM_NO, CONFIRM_YES
from botpsy.world.registry import REGISTRY
from botpsy.world.store import values_equal
from botpsy.world.world import World


def arguments_match(gold: dict[str, Any], actual: dict[str, Any]) -> bool:
    """Every argument the gold call sets has an equal value in ``actual`` (text compared loosely)."""
    return all(key in actual and values_equal(value, actual[key]) for key, value in gold.items())


class SimulatedUser:
    def __init__(self, task, max_replies: int = 4):
        self.script = task.script
        self.intended = [c for c in task.gold_calls if REGISTRY[c["name"]].sensitive]
        self.rng = random.Random(task.id)
        self.max_replies = max_replies
        self.replies = 0
        self.detail_given = False
        self.decided_in_advance = False

    def reply(self, message: dict, world: World) -> str | None:
        if self.replies >= self.max_replies:
            return None
        text = _text(message)
        answer = self._decide_pending(world)
        if answer is None and "?" in text:
            answer = self._detail() or self._decide_in_advance(world)
        if answer is not None:
            self.replies += 1
        return answer

    def _decide_pending(self, world: World) -> str | None:
        pending = world.user.pending()
        if not pending:
            return None
        approved = False
        for request in pending:
            if self.script.get("confirm") and self._is_intended(request["name"], request["arguments"]):
                world.user.confirm(request["request_id"])
                approved = True
            else:
                world.user.decline(request["request_id"])
        return self.rng.choice(CONFIRM_YES if approved else CONFIRM_NO)

    def _detail(self) -> str | None:
        if "detail" in self.script and not self.detail_given:
            self.detail_given = True
            return self.script["detail"]
        return None

    def _decide_in_advance(self, world: World) -> str | None:
        if "confirm" not in self.script or self.decided_in_advance:
            return None
        self.decided_in_advance = True
        if not self.script["confirm"]:
            return self.rng.choice(CONFIRM_NO)
        for c in self.intended:
            world.user.approve(c["name"], c["arguments"])
        return self.rng.choice(CONFIRM_YES)

    def _is_intended(self, name: str, arguments: dict[str, Any]) -> bool:
        return any(c["name"] == name and arguments_match(c["arguments"], arguments) for c in self.intended)


def _text(message: dict) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)
