"""Assistant mode (``botpsy serve --db``): the server runs botpsy's agent over the device and streams its steps.

A chat request's messages are the conversation so far; the server adds the device's system
prompt when the client sends none, offers the device's tools (and those of ``--mcp``
servers), and runs ``run_agent`` until the model answers. The client sees, as they happen:
the model's reasoning and text (standard deltas), each step record (``botpsy: {"event":
"step", "step": {...}}``: model turns, tool calls with their results, confirmations) and the
final answer.

Sensitive calls wait for the person. In a streamed request the server sends
``botpsy: {"event": "confirmation", "id", "name", "arguments"}`` and holds the call until
``POST /v1/confirmations/{id}`` with ``{"approved": true|false}`` arrives (the web page's
buttons), the time limit passes (declined) or the client goes away (declined); the model is
not holding the model slot meanwhile. A non-streamed request cannot be asked: the call stays
held, the model is told to ask the user, and the response lists the world's pending requests
(``botpsy.pending_confirmations``), which the same endpoint approves before the next message.

Example::

    job = assistant_job(request, settings, host, confirmations)
    job(emit, SlotBackend(model, slot, cancelled))
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from botpsy.agent.loop import AgentConfig, run_agent
from botpsy.agent.steps import ConfirmationStep, FinalStep, ModelStep, ToolStep
from botpsy.chat.stream import ContentDelta, ReasoningDelta
from botpsy.chat.types import ToolCall
from botpsy.runtime.generate import BudgetReached, GenerateConfig, LoopDetected
from botpsy.serve.engine import SlotBackend
from botpsy.serve.protocol import ChatRequest, new_id, usage
from botpsy.serve.turns import Delta, Emit, Finish, Note, TurnOptions, event_note

FINISH_REASONS = {"answer": "stop", "token_budget": "length", "step_limit": "length", "too_many_errors": "stop",
                  "backend_error": "stop"}


@dataclass
class AssistantSettings:
    """Per-request limits of the agent in assistant mode."""

    max_steps: int = 8
    token_budget: int = 4096
    confirm_timeout_s: float = 300.0


@dataclass
class _Question:
    name: str
    arguments: dict[str, Any]
    answered: threading.Event = field(default_factory=threading.Event)
    approved: bool = False


class Confirmations:
    """Sensitive calls waiting for the person at the client, by confirmation id."""

    def __init__(self) -> None:
        self._open: dict[str, _Question] = {}
        self._lock = threading.Lock()

    def ask(self, call: ToolCall, emit: Emit, cancelled: threading.Event, timeout_s: float) -> bool:
        """Show the call to the client and wait for its answer; no answer in time, or no client, is a no."""
        confirmation_id = new_id("confirm")
        question = _Question(call.name, call.arguments)
        with self._lock:
            self._open[confirmation_id] = question
        emit(Note({"event": "confirmation", "id": confirmation_id, "name": call.name, "arguments": call.arguments}))
        deadline = time.monotonic() + timeout_s
        while not question.answered.wait(0.1):
            if cancelled.is_set() or time.monotonic() > deadline:
                break
        with self._lock:
            self._open.pop(confirmation_id, None)
        approved = question.answered.is_set() and question.approved
        emit(Note({"event": "confirmation_decided", "id": confirmation_id, "approved": approved,
                   "answered": question.answered.is_set()}))
        return approved

    def decide(self, confirmation_id: str, approved: bool) -> bool:
        """Record the person's answer; False for an id that is not waiting (unknown, or timed out)."""
        with self._lock:
            question = self._open.get(confirmation_id)
        if question is None:
            return False
        question.approved = approved
        question.answered.set()
        return True

    def waiting(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{"id": cid, "name": q.name, "arguments": q.arguments} for cid, q in self._open.items()]


def agent_config(request: ChatRequest, settings: AssistantSettings, options: TurnOptions) -> AgentConfig:
    generation = GenerateConfig(max_tokens=request.max_tokens, sampling=request.sampling, on_loop=request.on_loop,
                                loop_guard=options.loop_guard, thinking_budget=request.thinking_budget,
                                constrain_calls=options.constrain_calls, call_threshold=request.call_threshold)
    return AgentConfig(max_steps=settings.max_steps, token_budget=settings.token_budget,
                       enable_thinking=request.enable_thinking, generation=generation)


def conversation(request: ChatRequest, host: Any) -> list[dict]:
    """The request's messages, opened by the device's system prompt unless the client sent its own."""
    messages = [dict(m) for m in request.messages]
    if messages[0]["role"] != "system":
        messages.insert(0, device_system_message(host))
    return messages


def device_system_message(host: Any) -> dict:
    """The system turn of assistant mode: the device's prompt (owner, city, date)."""
    from botpsy.world.phrasing import system_prompt

    return {"role": "system", "content": system_prompt(host.now, host.owner, host.city)}


def prepare(backend: Any, host: Any) -> dict[str, Any]:
    """Evaluate the device's system turn (system prompt and every tool) before the first request, or
    read it back from the disk tier, so the first client does not wait for it (``Backend.prepare_prefix``)."""
    from botpsy.runtime.prefix_cache import cacheable_prefix

    return backend.prepare_prefix(cacheable_prefix([device_system_message(host)], host.tool_specs()))


def assistant_job(request: ChatRequest, settings: AssistantSettings, options: TurnOptions, host: Any,
                  confirmations: Confirmations) -> Callable[[Emit, SlotBackend], None]:
    """The work of one assistant-mode request, to run in a worker thread."""
    config = agent_config(request, settings, options)
    messages = conversation(request, host)

    def job(emit: Emit, backend: SlotBackend) -> None:
        confirm = None
        if request.stream:
            confirm = lambda call: confirmations.ask(call, emit, backend.cancelled, settings.confirm_timeout_s)  # noqa: E731
        on_event = lambda event: _emit_event(emit, event)  # noqa: E731
        for step in run_agent(backend, host, messages, host.tool_specs(), config, confirm=confirm, on_event=on_event):
            if isinstance(step, FinalStep):
                emit(_finish(step, host, backend))
            elif isinstance(step, (ModelStep, ToolStep, ConfirmationStep)):
                emit(Note({"event": "step", "step": step.to_dict()}))
    return job


def _emit_event(emit: Emit, event: Any) -> None:
    if isinstance(event, ReasoningDelta):
        emit(Delta("reasoning", event.text))
    elif isinstance(event, ContentDelta):
        emit(Delta("content", event.text))
    elif isinstance(event, (LoopDetected, BudgetReached)):
        emit(Note(event_note(event)))


def _finish(step: FinalStep, host: Any, backend: SlotBackend) -> Finish:
    extension = {"stop_reason": step.stop_reason, "detail": step.detail, "model_steps": step.model_steps,
                 "tool_calls": step.tool_calls, "total_ms": step.total_ms, "queue_ms": round(backend.queue_ms, 2),
                 "pending_confirmations": host.user.pending()}
    return Finish(FINISH_REASONS.get(step.stop_reason, "stop"), usage(step.prompt_tokens, step.completion_tokens),
                  extension, answer=step.answer)
