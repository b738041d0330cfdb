"""The typed step records the agent loop yields, and the statistics computed from them.

One user request produces, in order: a ``ModelStep`` per generated assistant turn, a
``ToolStep`` per executed call (preceded by a ``ConfirmationStep`` when the call was
sensitive), and one ``FinalStep`` saying why the loop stopped. Every record serialises
with ``to_dict()`` (its ``type`` included), so ``botpsy chat --json`` and ``botpsy solve``
write them as they are, and loop rate, token use and latency are computed from them
(``summarize``), never parsed back out of logs.

Example::

    for step in agent.run("set an alarm for 7"):
        if isinstance(step, ToolStep):
            print(step.name, step.result)
    print(summarize(agent.steps)["ttft_ms_mean"])
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

# World error codes that mean the call itself was malformed (the model's fault, fed back and retried).
VALIDATION_ERRORS = ("unknown_tool", "invalid_arguments")

STOP_REASONS = {
    "answer": "the model answered without calling a tool",
    "step_limit": "the model used every turn the step limit allows",
    "token_budget": "the model generated as many tokens as the budget allows",
    "too_many_errors": "the model kept writing malformed output or invalid calls",
    "backend_error": "the model backend failed",
}


class _Record:
    """``to_dict`` with the record's type name, for JSON output."""

    type = "step"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}  # type: ignore[call-overload]


@dataclass
class ModelStep(_Record):
    """One assistant turn: what the model was shown, what it wrote, how long it took."""

    type = "model"
    index: int  # model turn number within the run, from 0
    prompt_tokens: int
    reasoning: str
    content: str
    tool_calls: list[dict[str, Any]]  # {"id", "name", "arguments"}
    parse_errors: list[dict[str, str]]  # {"kind", "message"}
    finish_reason: str  # "stop" | "length" | "loop"
    completion_tokens: int
    reasoning_tokens: int = 0
    loop_events: list[dict[str, Any]] = field(default_factory=list)
    budget_hit: bool = False
    cache_hit: bool = False
    render_ms: float = 0.0  # rendering the conversation (agent overhead, not the model)
    ttft_ms: float = 0.0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    total_ms: float = 0.0  # the generation, first token to last, tokenizing included
    decode_tokens_per_s: float = 0.0
    call_vetoes: int = 0  # calls the call gate masked where the model ranked them first


@dataclass
class ToolStep(_Record):
    """One executed call and what the world answered (the result the model is shown)."""

    type = "tool"
    index: int  # the model turn that made the call
    call_id: str
    name: str
    arguments: dict[str, Any]
    result: dict[str, Any]
    error: str | None = None  # the world's error code, if the call failed
    validation_error: bool = False  # the call was malformed (unknown tool, bad arguments)
    duration_ms: float = 0.0


@dataclass
class ConfirmationStep(_Record):
    """A sensitive call the world held back, and what the user decided.

    ``asked`` is False when no one could be asked here (the call stays pending and the
    model has to ask the user itself); then ``approved`` is False.
    """

    type = "confirmation"
    index: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    request_id: str
    asked: bool
    approved: bool


@dataclass
class FinalStep(_Record):
    """Why the loop stopped, the answer if there is one, and the run's totals."""

    type = "final"
    answer: str
    stop_reason: str  # a key of STOP_REASONS
    detail: str = ""
    model_steps: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_ms: float = 0.0


Step = ModelStep | ToolStep | ConfirmationStep | FinalStep


def summarize(steps: Iterable[Step]) -> dict[str, Any]:
    """Totals and rates over any records: tokens, latency, decode speed, loop-guard events, errors.

    >>> s = summarize([ModelStep(0, 100, "", "hi", [], [], "stop", 10, ttft_ms=50.0, decode_ms=90.0)])
    >>> s["model_steps"], s["completion_tokens"], s["ttft_ms_mean"], s["decode_tokens_per_s"]
    (1, 10, 50.0, 100.0)
    """
    model = [s for s in steps if isinstance(s, ModelStep)]
    tools = [s for s in steps if isinstance(s, ToolStep)]
    decode_ms = sum(s.decode_ms for s in model)
    decoded = sum(max(0, s.completion_tokens - 1) for s in model)  # the first token is not decode time
    return {
        "model_steps": len(model),
        # The calls the model made: an episode run by the device world executes them outside these
        # records (no ToolStep), the chat agent records one ToolStep per call it ran.
        "tool_calls": len(tools) or sum(len(s.tool_calls) for s in model),
        "prompt_tokens": sum(s.prompt_tokens for s in model),
        "completion_tokens": sum(s.completion_tokens for s in model),
        "reasoning_tokens": sum(s.reasoning_tokens for s in model),
        "ttft_ms_mean": round(sum(s.ttft_ms for s in model) / len(model), 2) if model else 0.0,
        "ttft_ms_last": round(model[-1].ttft_ms, 2) if model else 0.0,
        "decode_tokens_per_s": round(decoded / (decode_ms / 1000), 2) if decode_ms > 0 else 0.0,
        "loop_events": sum(len(s.loop_events) for s in model),
        "loop_turns": sum(1 for s in model if s.loop_events),
        "budget_hits": sum(1 for s in model if s.budget_hit),
        "cache_hits": sum(1 for s in model if s.cache_hit),
        "parse_errors": sum(len(s.parse_errors) for s in model),
        "validation_errors": sum(1 for s in tools if s.validation_error),
        "tool_errors": sum(1 for s in tools if s.error and not s.validation_error),
    }
