"""Model mode: one assistant turn (chat) or one raw continuation (completions), as items for the response.

A chat turn goes through the runtime's ``generate_stream``, so the loop guard, the thinking
budget, the tool-prefix cache and constrained tool calls work on every request exactly as in
``botpsy chat``. Its events become the items ``responses`` turns into OpenAI chunks or a whole
response: ``Delta`` (reasoning or content text), ``CallOut`` (a finished tool call),
``Note`` (a loop-guard or thinking-budget event) and ``Finish`` (why it ended, usage, timings).

Two things the runtime does not do are added here:

* **stop strings**: content is held back while it could still become one of ``stop``; when one
  appears the turn is closed at once (the backend stops computing) and the text before it is kept;
* **forced tool calls** (``tool_choice`` ``"required"`` or a named function): the turn is
  started inside the call, without reasoning (``<think>\\n\\n</think>\\n\\n<tool_call>\\n`` plus
  ``<function=NAME>\\n`` for a named one), constrained as any call, and parsed at the end.

Example::

    job = chat_job(request, plan_turn(request), options)
    job(emit, SlotBackend(model, slot, cancelled))   # emit(Delta(...)), ..., emit(Finish(...))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from botpsy.agent.loop import model_view
from botpsy.chat.parse import parse_output
from botpsy.chat.stream import ContentDelta, ReasoningDelta, ToolCallEnd
from botpsy.chat.template import IM_END, IM_START, TOOL_CALL_OPEN, RenderError, render
from botpsy.chat.types import ParsedOutput, ToolCall
from botpsy.runtime.backend import END_OF_TURN_TEXTS, BackendError
from botpsy.runtime.generate import (
    BudgetReached,
    Finished,
    GenerateConfig,
    GenerationResult,
    LoopDetected,
    generate_stream,
)
from botpsy.runtime.loopguard import LoopDetector, LoopGuardConfig
from botpsy.runtime.prefix_cache import cacheable_prefix
from botpsy.serve.engine import SlotBackend
from botpsy.serve.protocol import APIError, ChatRequest, CompletionRequest, new_id, usage

Emit = Callable[[Any], None]


@dataclass
class Delta:
    kind: str  # "reasoning" | "content" | "text" (completions)
    text: str


@dataclass
class CallOut:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Note:
    """A runtime event shown to the client in the ``botpsy`` extension field."""

    event: dict[str, Any]


@dataclass
class Finish:
    finish_reason: str  # "stop" | "length" | "tool_calls" | "loop"
    usage: dict[str, Any]
    botpsy: dict[str, Any] = field(default_factory=dict)  # loop guard, budget, timings, parse errors
    answer: str | None = None  # assistant mode: the final answer, when it differs from the streamed content


@dataclass
class TurnOptions:
    """Server-wide settings every turn uses."""

    constrain_calls: bool = True
    loop_guard: LoopGuardConfig = field(default_factory=LoopGuardConfig)
    # A request offering no tools is answered by the base model alone (the LoRA adapter switched off),
    # rendered in this template of the base's own (``botpsy serve --plain-on-base``); None: off.
    base_template: str | None = None


class StopFilter:
    """Passes text until one of ``stops`` appears; holds back a tail that could still become one.

    >>> f = StopFilter(["END"])
    >>> f.feed("Hello E"), f.feed("ND and more"), f.hit
    ('Hello ', '', True)
    """

    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""
        self.hit = False

    def feed(self, text: str) -> str:
        if self.hit:
            return ""
        text = self.held + text
        found = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if found:
            self.hit, self.held = True, ""
            return text[:min(found)]
        keep = max((n for s in self.stops for n in range(min(len(s) - 1, len(text)), 0, -1)
                    if text.endswith(s[:n])), default=0)
        self.held = text[len(text) - keep:]
        return text[:len(text) - keep]

    def flush(self) -> str:
        text, self.held = self.held, ""
        return "" if self.hit else text


# ---- chat turns --------------------------------------------------------------------------------


@dataclass
class TurnPlan:
    """What one chat request is rendered into."""

    prompt: str
    cache_prefix: str
    tools: list[dict]  # the tools the model is offered (the named one only, when tool_choice names one)
    prefill: str  # the start of a forced call, written into the turn before the model continues it
    thinking: bool
    on_base: bool = False  # answered by the base alone, in its own chat format (``chat_format``)
    chat_format: str = "botpsy"


def plan_turn(request: ChatRequest, options: TurnOptions | None = None) -> TurnPlan:
    """Render the request: tools per ``tool_choice``, thinking per request, the forced call's start;
    a request without tools on the base alone where ``options.base_template`` says so."""
    messages = model_view(request.messages)  # tool results cannot pose as chat turns or tags
    tools = [] if request.tool_choice == "none" else request.tools
    if request.forced_tool:
        tools = [t for t in tools if t["function"]["name"] == request.forced_tool]
    forced = request.tool_choice in ("required", "function")
    if options is not None and options.base_template is not None and not tools and not forced:
        from botpsy.chat.native import ChatFormat

        base = ChatFormat.own(options.base_template)
        try:
            prompt, prefix = base.prompt(messages, None, enable_thinking=False)
        except ValueError as exc:  # the base's own template refused the conversation
            raise RenderError(str(exc)) from None
        return TurnPlan(prompt, prefix, [], "", False, on_base=True, chat_format=base.name)
    thinking = request.enable_thinking and not forced
    prompt = render(messages, tools, add_generation_prompt=True, enable_thinking=thinking)
    prefill = ""
    if forced:
        prefill = TOOL_CALL_OPEN + "\n" + (f"<function={request.forced_tool}>\n" if request.forced_tool else "")
    return TurnPlan(prompt + prefill, cacheable_prefix(messages, tools), tools, prefill, thinking)


def chat_job(request: ChatRequest, plan: TurnPlan, options: TurnOptions) -> Callable[[Emit, SlotBackend], None]:
    """The work of one model-mode chat request (rendered by ``plan_turn``), to run in a worker thread."""
    config = GenerateConfig(max_tokens=request.max_tokens, sampling=request.sampling, on_loop=request.on_loop,
                            loop_guard=options.loop_guard, thinking_budget=request.thinking_budget,
                            thinking=plan.thinking, constrain_calls=options.constrain_calls,
                            call_threshold=request.call_threshold, chat_format=plan.chat_format)

    def job(emit: Emit, backend: SlotBackend) -> None:
        if options.base_template is not None:
            backend.adapter = not plan.on_base
        if plan.prefill and options.constrain_calls:
            backend.constraint_hook = _forced_constraint(backend, plan)
        try:
            _run_turn(emit, backend, plan, config, request.stop)
        except BackendError as exc:
            raise backend_failure(exc) from None
    return job


def backend_failure(exc: BackendError) -> APIError:
    """A backend's refusal as the client should hear it: a too-long prompt is the request's fault (400)."""
    if "context" in str(exc):
        return APIError(400, str(exc), param="messages", code="context_length_exceeded")
    return APIError(500, f"the model failed: {exc}", type="server_error")


def _forced_constraint(backend: SlotBackend, plan: TurnPlan):
    """The runtime's call constraint sees only generated text; a forced call began in the prompt."""
    from botpsy.chat.constrain import CallConstraint

    def hook(constraint):
        return CallConstraint(plan.tools, backend.token_table()).after(plan.prefill + constraint.written)
    return hook


def _run_turn(emit: Emit, backend: SlotBackend, plan: TurnPlan, config: GenerateConfig, stops: list[str]) -> None:
    events = generate_stream(backend, plan.prompt, config, tools=plan.tools, cache_prefix=plan.cache_prefix)
    stop = StopFilter(stops)
    calls: list[ToolCall] = []
    dropped: list[dict[str, str]] = []  # calls to tools the client did not offer (possible when unconstrained)
    try:
        for event in events:
            if isinstance(event, ReasoningDelta):
                emit(Delta("reasoning", event.text))
            elif isinstance(event, ContentDelta) and not plan.prefill:  # a forced call's text is parsed at the end
                text = stop.feed(event.text)
                if text:
                    emit(Delta("content", text))
                if stop.hit:
                    break
            elif isinstance(event, ToolCallEnd) and not plan.prefill:
                if _offered(event.call, plan, dropped):
                    calls.append(event.call)
                    emit(CallOut(new_id("call"), event.call.name, event.call.arguments))
            elif isinstance(event, (LoopDetected, BudgetReached)):
                emit(Note(event_note(event)))
            elif isinstance(event, Finished):
                _finish_turn(emit, backend, plan, event.result, stop, calls, dropped)
                return
    finally:
        events.close()  # a stop string or a cancelled request ends the backend stream here
    emit(Finish("stop", usage(backend.prompt_tokens, backend.generated), {"finish": "stop_string", **_timing(backend)}))


def _offered(call: ToolCall, plan: TurnPlan, dropped: list[dict[str, str]]) -> bool:
    """Whether ``call`` names an offered tool; a call that does not is dropped and reported, never sent on."""
    if any(tool["function"]["name"] == call.name for tool in plan.tools):
        return True
    dropped.append({"kind": "unknown_tool", "message": f"the model called {call.name!r}, which is not among the "
                                                       "tools offered; the call was dropped"})
    return False


def _finish_turn(emit: Emit, backend: SlotBackend, plan: TurnPlan, result: GenerationResult,
                 stop: StopFilter, calls: list[ToolCall], dropped: list[dict[str, str]]) -> None:
    parsed = result.parsed
    if plan.prefill:
        parsed = parse_output(plan.prefill + result.text, plan.tools, thinking=False)
        calls = [call for call in parsed.tool_calls if _offered(call, plan, dropped)]
        for call in calls:
            emit(CallOut(new_id("call"), call.name, call.arguments))
    else:
        tail = stop.flush()
        if tail:
            emit(Delta("content", tail))
    reason = "tool_calls" if calls else {"length": "length", "loop": "loop"}.get(result.finish_reason, "stop")
    extension = result_extension(result, parsed, backend)
    extension["parse_errors"] += dropped
    if plan.on_base:
        extension["answered_by"] = "base"  # the adapter was switched off for this request
    emit(Finish(reason, usage(result.prompt_tokens, result.completion_tokens, result.reasoning_tokens), extension))


def result_extension(result: GenerationResult, parsed: ParsedOutput, backend: SlotBackend) -> dict[str, Any]:
    """The ``botpsy`` field of a response: what the runtime did on this turn."""
    first = result.loop_events[0] if result.loop_events else None
    return {"finish": result.finish_reason, "loop_detected": result.loop_detected, "loop": first,
            "loop_events": result.loop_events, "budget_hit": result.budget_hit, "resamples": result.resamples,
            "parse_errors": [{"kind": e.kind, "message": e.message} for e in parsed.errors],
            "cache_hit": result.cache_hit, "ttft_ms": round(result.ttft_ms, 2),
            "prefill_ms": round(result.prefill_ms, 2), "decode_tokens_per_s": round(result.decode_tokens_per_s, 1),
            **_timing(backend)}


def _timing(backend: SlotBackend) -> dict[str, Any]:
    return {"queue_ms": round(backend.queue_ms, 2)}


def event_note(event: LoopDetected | BudgetReached) -> dict[str, Any]:
    if isinstance(event, LoopDetected):
        return {"event": "loop", **event.to_dict()}
    return {"event": "thinking_budget", "reasoning_tokens": event.reasoning_tokens,
            "at_sentence_end": event.at_sentence_end}


# ---- raw completions ---------------------------------------------------------------------------


def system_turn_prefix(prompt: str) -> str:
    """The leading system turn of a rendered prompt (what botpsy's clients cache), or ''.

    >>> system_turn_prefix("<|im_start|>system\\nBe brief.<|im_end|>\\n<|im_start|>user\\nhi")
    '<|im_start|>system\\nBe brief.<|im_end|>\\n'
    """
    head = f"{IM_START}system\n"
    end = prompt.find(IM_END + "\n") if prompt.startswith(head) else -1
    return prompt[:end + len(IM_END) + 1] if end >= 0 else ""


def completion_job(request: CompletionRequest, options: TurnOptions) -> Callable[[Emit, SlotBackend], None]:
    """The work of one ``/v1/completions`` request: the prompt continued as it is, loop guard on."""

    def job(emit: Emit, backend: SlotBackend) -> None:
        prefix = system_turn_prefix(request.prompt)
        prompt: Any = request.prompt
        prefix_tokens = 0
        if backend.token_ids and prefix:  # tokenized apart, as botpsy's own clients do, so the ids match theirs
            prefix_ids = backend.tokenize(prefix)
            prompt, prefix_tokens = prefix_ids + backend.tokenize(request.prompt[len(prefix):]), len(prefix_ids)
        detector = LoopDetector(options.loop_guard)
        stop = StopFilter(request.stop + list(END_OF_TURN_TEXTS))
        reason, loop = "length", None
        try:
            with backend.stream(prompt, request.sampling, request.max_tokens, prefix_tokens) as stream:
                for token in stream:
                    text = stop.feed(token.text)
                    if text:
                        emit(Delta("text", text))
                    event = detector.push(token.id) if loop is None else None
                    if event is not None:
                        loop = {"event": "loop", "where": "text", **event.to_dict(),
                                "action": "observe" if request.on_loop == "observe" else "stop"}
                        emit(Note(loop))
                        if request.on_loop != "observe":
                            reason = "loop"
                            break
                    if stop.hit:
                        reason = "stop"
                        break
                else:
                    reason = stream.info.finish_reason or "stop"
        except BackendError as exc:
            raise backend_failure(exc) from None
        tail = stop.flush()
        if tail:
            emit(Delta("text", tail))
        emit(Finish(reason, usage(backend.prompt_tokens, backend.generated),
                    {"loop_detected": loop is not None, "loop": loop, **_timing(backend)}))
    return job
