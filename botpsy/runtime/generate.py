"""The generation driver: one assistant turn from a backend, with the loop guard and the thinking budget.

``generate_stream`` runs a backend on a rendered prompt and yields events as they happen:
the chat parser's ``ReasoningDelta`` / ``ContentDelta`` / ``ToolCallStart`` / ``ToolCallEnd`` /
``ErrorEvent``, the runtime's ``LoopDetected`` and ``BudgetReached``, and finally ``Finished``
with the ``GenerationResult``. ``generate`` is the same, returning only the result.

While tokens stream, two ``LoopDetector``s watch them, one on the reasoning and one on the
answer. When one fires, ``on_loop`` decides:

* ``stop``: end the turn, ``finish_reason="loop"``;
* ``recover``: a loop in the reasoning is closed by writing ``\\n</think>\\n\\n`` and the model
  goes on to answer; a loop in the answer ends the turn as ``stop`` would;
* ``resample``: cut the text back to the end of the cycle's first copy (the copies after it
  are the loop) and sample again with raised repeat/presence penalties, at most
  ``max_resamples`` times, then stop;
* ``observe``: record the loop and carry on (evaluation measures loop rates this way).

The **thinking budget**: once the reasoning has ``thinking_budget`` tokens, the driver closes it
at the next sentence end (or, failing one, ``budget_slack`` tokens later) by writing
``\\n</think>\\n\\n``, and the model answers. Writing text into the turn is a new backend call
whose prompt is the old prompt plus everything so far: llama.cpp continues from its live
state, so only the injected tokens are evaluated.

The turn ends at ``<|im_end|>`` / ``<|endoftext|>`` (``finish_reason="stop"``) or after
``max_tokens`` sampled tokens (``"length"``: the cap-hit evaluation counts).

Example::

    prompt, prefix = chat_prompt(messages, tools)
    for event in generate_stream(backend, prompt, GenerateConfig(thinking_budget=512), tools=tools,
                                 cache_prefix=prefix):
        if isinstance(event, ReasoningDelta): show_dimmed(event.text)
        elif isinstance(event, Finished): print(event.result.finish_reason, event.result.ttft_ms)
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator

from botpsy.chat.parse import cut_at_end_marker
from botpsy.chat.stream import Event as ParserEvent
from botpsy.chat.stream import StreamParser
from botpsy.chat.template import THINK_CLOSE, THINK_OPEN, render
from botpsy.chat.types import ParsedOutput
from botpsy.runtime.backend import Backend, SamplingConfig, StreamInfo, TokenOut
from botpsy.runtime.loopguard import LoopDetector, LoopEvent, LoopGuardConfig
from botpsy.runtime.prefix_cache import cacheable_prefix

LOOP_POLICIES = ("stop", "recover", "resample", "observe")
REASONING, ANSWER, INJECTED = "reasoning", "answer", "injected"
# A sentence ends at . ! ? (not a decimal point or list number like "3.") or at a line break.
_SENTENCE_END = re.compile(r"(?:(?<!\d)[.!?]|[。！？])[\"')\]]*\s*$|\n\s*$")
CALL_THRESHOLD_HELP = ("Open a turn's first tool call only when the model gives it at least this probability (among "
                       "tokens that are not whitespace); below, it answers in text. 0 = off; with constrained calls "
                       "on a local backend (botpsy.chat.constrain.CallGate).")
# What the token loop does for each loop action: keep going, or stop the stream to act on it.
_STREAM_ACTIONS = {"observe": None, "recover": "close_reasoning", "stop": "stop", "resample": "resample"}


@dataclass
class GenerateConfig:
    """How one assistant turn is generated."""

    max_tokens: int = field(default=2048, metadata={"help": "Most tokens the model may sample in one turn."})
    sampling: SamplingConfig = field(default_factory=SamplingConfig, metadata={"help": "Sampling settings."})
    on_loop: str = field(default="recover", metadata={
        "help": "What to do when the loop guard fires.", "choices": list(LOOP_POLICIES)})
    loop_guard: LoopGuardConfig = field(default_factory=LoopGuardConfig, metadata={"help": "Loop guard sensitivity."})
    thinking_budget: int = field(default=0, metadata={
        "help": "Close the reasoning at the next sentence end after this many reasoning tokens (0 = no budget)."})
    budget_slack: int = field(default=48, metadata={
        "help": "Close the reasoning this many tokens after the budget even without a sentence end."})
    max_resamples: int = field(default=2, metadata={"help": "Resamples allowed per turn before a loop stops it."})
    resample_repeat_penalty: float = field(default=1.3, metadata={"help": "Repeat penalty used after a resample."})
    resample_presence_penalty: float = field(default=0.5, metadata={"help": "Presence penalty used after a resample."})
    thinking: bool | None = field(default=None, metadata={
        "help": "Whether the turn opens in reasoning; None: the prompt ends with '<think>\\n'."})
    constrain_calls: bool = field(default=True, metadata={
        "help": "Inside a tool call, allow only offered tool names, their parameter names and enum values, "
                "and no closing before the required parameters (botpsy.chat.constrain; local backends only)."})
    calls_need_tools: bool = field(default=True, metadata={
        "help": "With constrain_calls, a turn offered no tools cannot open a tool call (its token is masked)."})
    call_threshold: float = field(default=0.0, metadata={"help": CALL_THRESHOLD_HELP})
    chat_format: str = field(default="botpsy", metadata={
        "help": "How the output is read: botpsy's Qwen3.5 wire format, or 'native' (a base model in its own "
                "template: calls read leniently, no reasoning block, no constraint; botpsy.chat.native).",
        "choices": ["botpsy", "native"]})

    def __post_init__(self) -> None:
        if self.on_loop not in LOOP_POLICIES:
            raise ValueError(f"on_loop must be one of {LOOP_POLICIES}, got {self.on_loop!r}")
        if self.max_tokens < 1 or self.thinking_budget < 0 or self.budget_slack < 0 or self.max_resamples < 0:
            raise ValueError("max_tokens must be positive; thinking_budget, budget_slack, max_resamples >= 0")
        if not 0.0 <= self.call_threshold <= 1.0:
            raise ValueError(f"call_threshold must be in [0, 1], got {self.call_threshold}")


@dataclass
class GenerationResult:
    """One generated turn and what happened while generating it."""

    text: str  # the turn as generated (injections included, resampled tails dropped), end marker cut
    reasoning: str
    content: str
    parsed: ParsedOutput
    finish_reason: str  # "stop" | "length" | "loop"
    loop_detected: bool = False
    loop_period: int | None = None
    loop_kind: str | None = None  # "repeat" | "stall"
    loop_where: str | None = None  # "reasoning" | "answer"
    loop_events: list[dict[str, Any]] = field(default_factory=list)
    budget_hit: bool = False
    resamples: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0  # tokens the model sampled (dropped by resampling included: they cost time)
    reasoning_tokens: int = 0
    injected_tokens: int = 0
    dropped_tokens: int = 0
    ttft_ms: float = 0.0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    decode_tokens_per_s: float = 0.0
    total_ms: float = 0.0
    cache_hit: bool = False
    backend_calls: int = 0
    call_vetoes: int = 0  # positions where the call gate masked a call the model ranked first

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["parsed"] = self.parsed.to_dict()
        return out


@dataclass
class LoopDetected:
    where: str  # "reasoning" | "answer"
    loop: LoopEvent
    action: str  # what the driver did: "stop" | "recover" | "resample" | "observe"
    dropped_tokens: int = 0  # tokens cut from the turn (resample)

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, **self.loop.to_dict(), "action": self.action, "dropped_tokens": self.dropped_tokens}


@dataclass
class BudgetReached:
    reasoning_tokens: int
    at_sentence_end: bool  # False: closed hard, budget_slack tokens over


@dataclass
class Finished:
    result: GenerationResult


Event = ParserEvent | LoopDetected | BudgetReached | Finished


def chat_prompt(messages: list[dict], tools: list[dict] | None = None, enable_thinking: bool = True) -> tuple[str, str]:
    """(prompt, cache_prefix) for a conversation: the rendered prompt and its shared system turn."""
    return render(messages, tools, add_generation_prompt=True, enable_thinking=enable_thinking), \
        cacheable_prefix(messages, tools)


def generate(backend: Backend, prompt: str, config: GenerateConfig | None = None, *,
             tools: list[dict] | None = None, cache_prefix: str = "") -> GenerationResult:
    """Generate one turn after ``prompt`` (rendered text); see the module docstring."""
    for event in generate_stream(backend, prompt, config, tools=tools, cache_prefix=cache_prefix):
        if isinstance(event, Finished):
            return event.result
    raise RuntimeError("generate_stream ended without a result")  # unreachable: it always finishes


def generate_stream(backend: Backend, prompt: str, config: GenerateConfig | None = None, *,
                    tools: list[dict] | None = None, cache_prefix: str = "") -> Iterator[Event]:
    """``generate`` as events; the last one is ``Finished``. Closing it early stops the backend."""
    if cache_prefix and not prompt.startswith(cache_prefix):
        raise ValueError("cache_prefix must be the beginning of the prompt")
    yield from _Turn(backend, prompt, config or GenerateConfig(), tools, cache_prefix).run()


@dataclass
class _Token:
    id: int
    text: str
    where: str  # REASONING | ANSWER | INJECTED


class _Turn:
    """The state of one turn being generated (a fresh one per ``generate_stream`` call)."""

    def __init__(self, backend: Backend, prompt: str, config: GenerateConfig, tools: list[dict] | None,
                 cache_prefix: str) -> None:
        self.started = time.perf_counter()  # time to first token includes tokenizing the prompt
        self.backend, self.config, self.tools = backend, config, tools
        self.native = config.chat_format == "native"
        self.thinking = False if self.native else (
            config.thinking if config.thinking is not None else prompt.endswith((THINK_OPEN + "\n", THINK_OPEN)))
        self.prompt_text = prompt
        self.prompt_ids: list[int] = []
        self.prefix_tokens = 0
        if backend.token_ids:  # tokenize the prefix on its own so its ids are identical every turn
            prefix_ids = backend.tokenize(cache_prefix) if cache_prefix else []
            self.prompt_ids = prefix_ids + backend.tokenize(prompt[len(cache_prefix):])
            self.prefix_tokens = len(prefix_ids)
        self.sampling = config.sampling
        self.constraint = None
        if config.constrain_calls and backend.supports_constraint and not self.native:
            from botpsy.chat.constrain import CallConstraint, CallGate, NoCallConstraint

            if tools:
                table = backend.token_table()
                gate = CallGate(table, config.call_threshold, self.thinking) if config.call_threshold else None
                self.constraint = CallConstraint(tools, table, gate=gate)
            elif config.calls_need_tools:
                self.constraint = NoCallConstraint(backend.token_table())
        self.tokens: list[_Token] = []
        self.parser = StreamParser(tools, thinking=self.thinking)
        self.detectors = {REASONING: LoopDetector(config.loop_guard), ANSWER: LoopDetector(config.loop_guard)}
        self.positions: dict[str, list[int]] = {REASONING: [], ANSWER: []}  # detector index -> token index
        self.loop_events: list[LoopDetected] = []
        self.sampled = self.reasoning_tokens = self.injected = self.dropped = self.resamples = 0
        self.budget_hit = False
        self.first_info: StreamInfo | None = None
        self.calls = 0
        self.first_token_at: float | None = None

    # -- the outer loop: one backend call per stretch of uninterrupted sampling --------------

    def run(self) -> Iterator[Event]:
        finish: str | None = None
        while finish is None:
            remaining = self.config.max_tokens - self.sampled
            if remaining <= 0:
                finish = "length"
                break
            request = self._request()
            constraint = self.constraint.after(self._text()) if self.constraint is not None else None
            stream = self.backend.stream(request, self.sampling, remaining, self.prefix_tokens, constraint=constraint)
            self.calls += 1
            action = None
            try:
                for token in stream:
                    if self.first_token_at is None:
                        self.first_token_at = time.perf_counter()
                    events, action = self._on_token(token)
                    yield from events
                    if action:
                        break
            finally:
                stream.close()
            self.first_info = self.first_info or stream.info
            finish = yield from self._after_stream(action, stream.info)
        yield from self.parser.close()
        yield Finished(self._result(finish))

    def _request(self) -> list[int] | str:
        if self.backend.token_ids:
            return self.prompt_ids + [token.id for token in self.tokens]
        return self.prompt_text + "".join(token.text for token in self.tokens)

    def _after_stream(self, action: str | None, info: StreamInfo) -> Iterator[Event]:
        """Act on why the stream stopped; return the finish reason, or None to call the backend again."""
        if action is None:  # the backend stopped by itself
            return info.finish_reason or "stop"
        if action in ("end", "stop"):
            return "stop" if action == "end" else "loop"
        if action == "close_reasoning":
            yield from self._inject(THINK_CLOSE + "\n\n" if self._text().endswith("\n") else "\n" + THINK_CLOSE + "\n\n")
            return None
        if action == "resample":
            return self._resample()
        raise AssertionError(f"unknown action {action!r}")

    # -- per token ---------------------------------------------------------------------------

    def _on_token(self, token: TokenOut) -> tuple[list[Event], str | None]:
        state = self.parser.state
        where = REASONING if state == "reasoning" or (state == "start" and self.thinking) else ANSWER
        index = len(self.tokens)
        self.tokens.append(_Token(token.id, token.text, where))
        self.sampled += 1
        events: list[Event] = self.parser.feed(token.text) if token.text else []
        if self.parser.end_cut.ended:
            return events, "end"
        if where == REASONING:
            self.reasoning_tokens += 1
        self.positions[where].append(index)
        loop = self.detectors[where].push(token.id)
        if loop is not None:
            action = self._loop_action(where)
            detected = LoopDetected(where, loop, action)
            self.loop_events.append(detected)
            events.append(detected)
            return events, _STREAM_ACTIONS[action]
        budget = self.config.thinking_budget
        if where == REASONING and budget and self.reasoning_tokens >= budget and self.parser.state == "reasoning":
            at_sentence_end = bool(_SENTENCE_END.search("".join(t.text for t in self.tokens[-4:])))
            if at_sentence_end or self.reasoning_tokens >= budget + self.config.budget_slack:
                self.budget_hit = True
                events.append(BudgetReached(self.reasoning_tokens, at_sentence_end))
                return events, "close_reasoning"
        return events, None

    def _loop_action(self, where: str) -> str:
        policy = self.config.on_loop
        if policy == "recover":
            return "recover" if where == REASONING and self.parser.state == "reasoning" else "stop"
        if policy == "resample" and self.resamples >= self.config.max_resamples:
            return "stop"
        return policy

    # -- writing into the turn, cutting it back ----------------------------------------------

    def _inject(self, text: str) -> Iterator[Event]:
        if self.backend.token_ids:
            ids = self.backend.tokenize(text)
            self.tokens.extend(_Token(i, self.backend.detokenize([i]), INJECTED) for i in ids)
            self.injected += len(ids)
        else:
            self.tokens.append(_Token(-1, text, INJECTED))
            self.injected += 1
        yield from self.parser.feed(text)

    def _resample(self) -> str | None:
        """Cut the loop back to its first copy and raise the penalties; None to continue, "loop" to stop."""
        detected = self.loop_events[-1]
        loop, positions = detected.loop, self.positions[detected.where]
        keep_through = loop.start + (loop.period or 0)  # detector index of the first dropped token
        cut = positions[keep_through] if keep_through < len(positions) else positions[loop.start]
        detected.dropped_tokens = len(self.tokens) - cut
        self.dropped += detected.dropped_tokens
        del self.tokens[cut:]
        self.resamples += 1
        penalised = self.sampling.with_penalties(self.config.resample_repeat_penalty,
                                                 self.config.resample_presence_penalty)
        self.sampling = replace(penalised, seed=penalised.seed + 1)  # a different draw, not the same loop
        self._replay()
        return "loop" if any(d.event is not None for d in self.detectors.values()) else None

    def _replay(self) -> None:
        """Rebuild the parser and detectors from the kept tokens (their events were already shown)."""
        self.parser = StreamParser(self.tools, thinking=self.thinking)
        self.parser.feed(self._text())
        self.positions = {REASONING: [], ANSWER: []}
        for detector in self.detectors.values():
            detector.reset()
        for index, token in enumerate(self.tokens):
            if token.where != INJECTED:
                self.positions[token.where].append(index)
                self.detectors[token.where].push(token.id)

    def _text(self) -> str:
        return "".join(token.text for token in self.tokens)

    # -- the record ------------------------------------------------------------------------

    def _result(self, finish: str) -> GenerationResult:
        start = self.started
        end = time.perf_counter()
        parsed = self.parser.result()
        if self.native:  # a base model in its own format: its calls are read leniently
            from botpsy.chat.native import parse_lenient

            parsed = parse_lenient(cut_at_end_marker(self._text()), self.tools)
        info = self.first_info or StreamInfo()
        first = self.loop_events[0] if self.loop_events else None
        decode_s = end - self.first_token_at if self.first_token_at is not None else 0.0
        return GenerationResult(
            text=cut_at_end_marker(self._text()), reasoning=parsed.reasoning, content=parsed.content, parsed=parsed,
            finish_reason=finish, loop_detected=first is not None,
            loop_period=first.loop.period if first else None, loop_kind=first.loop.kind if first else None,
            loop_where=first.where if first else None, loop_events=[e.to_dict() for e in self.loop_events],
            budget_hit=self.budget_hit, resamples=self.resamples,
            prompt_tokens=info.prompt_tokens or len(self.prompt_ids), completion_tokens=self.sampled,
            reasoning_tokens=self.reasoning_tokens, injected_tokens=self.injected, dropped_tokens=self.dropped,
            ttft_ms=(self.first_token_at - start) * 1000 if self.first_token_at is not None else 0.0,
            prefill_ms=info.prefill_ms, decode_ms=decode_s * 1000,
            decode_tokens_per_s=(self.sampled - 1) / decode_s if decode_s > 0 and self.sampled > 1 else 0.0,
            total_ms=(end - start) * 1000, cache_hit=info.cache_hit, backend_calls=self.calls,
            call_vetoes=getattr(getattr(self.constraint, "gate", None), "vetoes", 0),
        )
