"""Parse model output while it streams: reasoning and content deltas, tool calls as they finish.

``StreamParser`` reads the same format as ``parse.parse_output`` and, fed any chunking of a text,
ends with the same ``result()``. Deltas may split a tag anywhere (``"</thi"`` + ``"nk>"``): only a
possible tag prefix at the end of the text seen so far is held back. ``ToolCallStart`` fires as
soon as ``<function=NAME>`` (or a Hermes call's ``"name"``) is complete, so a caller can stop the
generation early; the call itself arrives with ``ToolCallEnd``, or an ``ErrorEvent`` when it
cannot be built.

Example::

    parser = StreamParser(tools)
    for delta in backend.stream(prompt):
        for event in parser.feed(delta):
            if isinstance(event, ToolCallEnd):
                run(event.call)
    parser.close()
    turn = parser.result()
"""

from __future__ import annotations

from dataclasses import dataclass

from botpsy.chat.parse import (
    END_MARKERS,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    call_name_hint,
    parse_call_block,
    stray_tag_errors,
    tool_schemas,
    truncated_error,
    unclosed_think_error,
)
from botpsy.chat.types import ParsedOutput, ParseError, ToolCall


@dataclass
class ReasoningDelta:
    text: str


@dataclass
class ContentDelta:
    text: str


@dataclass
class ToolCallStart:
    """A call's function name is known; its arguments are still being generated."""

    name: str


@dataclass
class ToolCallEnd:
    call: ToolCall


@dataclass
class ErrorEvent:
    error: ParseError


Event = ReasoningDelta | ContentDelta | ToolCallStart | ToolCallEnd | ErrorEvent


_LONGEST = {tags: max(len(tag) for tag in tags) for tags in (END_MARKERS, (THINK_CLOSE,), (TOOL_CALL_OPEN,))}


def partial_tag_start(text: str, tags: tuple[str, ...]) -> int:
    """Where a suffix of ``text`` that could still grow into one of ``tags`` begins (``len(text)`` if none).

    The caller has already searched ``text`` for complete tags, so only proper prefixes matter.
    """
    longest = _LONGEST.get(tags) or max(len(tag) for tag in tags)
    index = text.find("<", max(0, len(text) - longest + 1))
    while index >= 0:
        tail = text[index:]
        if any(tag.startswith(tail) for tag in tags):
            return index
        index = text.find("<", index + 1)
    return len(text)


class EndOfTurnCut:
    """Passes text through until the first end-of-turn marker; drops everything after it."""

    def __init__(self) -> None:
        self.held = ""
        self.ended = False

    def feed(self, delta: str) -> str:
        if self.ended:
            return ""
        text = self.held + delta
        found = [i for i in (text.find(marker) for marker in END_MARKERS) if i >= 0]
        if found:
            self.ended, self.held = True, ""
            return text[:min(found)]
        cut = partial_tag_start(text, END_MARKERS)
        self.held = text[cut:]
        return text[:cut]

    def close(self) -> str:
        text, self.held = self.held, ""
        return text


class StreamParser:
    """Incremental ``parse_output``: ``feed`` deltas, ``close`` at the end, then ``result()``."""

    def __init__(self, tools: list[dict] | None = None, thinking: bool = True) -> None:
        self.schemas = tool_schemas(tools)
        self.thinking = thinking
        self.state = "start"  # start -> reasoning -> content <-> call
        self.pending = ""  # text of the current state not yet turned into events
        self.piece = ""  # content since the last tool call, checked for stray tags when it ends
        self.call_scanned = 0  # how much of a call body was already searched for its closing tag
        self.call_named = False
        self.closed = False
        self.end_cut = EndOfTurnCut()
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.errors: list[ParseError] = []
        self.steps = {"start": self._start, "reasoning": self._reasoning, "content": self._content, "call": self._call}

    def feed(self, delta: str) -> list[Event]:
        if self.closed:
            raise RuntimeError("StreamParser.feed called after close()")
        return self._advance(self.end_cut.feed(delta), final=False)

    def close(self) -> list[Event]:
        """Flush held-back text and report what the end of the stream left unfinished."""
        if self.closed:
            return []
        events = self._advance(self.end_cut.close(), final=True)
        if self.state == "reasoning":
            events.append(self._error(unclosed_think_error("".join(self.reasoning))))
        elif self.state == "content":
            events.extend(self._end_piece())
        self.closed = True
        return events

    def result(self) -> ParsedOutput:
        """The turn so far (all of it after ``close``)."""
        return ParsedOutput(
            reasoning="".join(self.reasoning).strip(),
            content="".join(self.content).strip(),
            tool_calls=list(self.tool_calls),
            errors=list(self.errors),
        )

    # Each step consumes what it can of ``pending`` and says whether to keep going.

    def _advance(self, text: str, final: bool) -> list[Event]:
        self.pending += text
        events: list[Event] = []
        while self.steps[self.state](events, final):
            pass
        return events

    def _start(self, events: list[Event], final: bool) -> bool:
        """Decide whether the text opens with ``<think>`` (same rule as ``split_reasoning``)."""
        head = self.pending.lstrip()
        if head.startswith(THINK_OPEN):
            self.pending = head[len(THINK_OPEN):]
            self.state = "reasoning"
        elif THINK_OPEN.startswith(head) and not final:
            return False
        else:
            self.state = "reasoning" if self.thinking else "content"
        return True

    def _reasoning(self, events: list[Event], final: bool) -> bool:
        end = self.pending.find(THINK_CLOSE)
        if end >= 0:
            self._emit_reasoning(events, self.pending[:end])
            self.pending = self.pending[end + len(THINK_CLOSE):]
            self.state = "content"
            return True
        cut = len(self.pending) if final else partial_tag_start(self.pending, (THINK_CLOSE,))
        self._emit_reasoning(events, self.pending[:cut])
        self.pending = self.pending[cut:]
        return False

    def _content(self, events: list[Event], final: bool) -> bool:
        start = self.pending.find(TOOL_CALL_OPEN)
        if start >= 0:
            self._emit_content(events, self.pending[:start])
            events.extend(self._end_piece())
            self.pending = self.pending[start + len(TOOL_CALL_OPEN):]
            self._begin_call()
            return True
        cut = len(self.pending) if final else partial_tag_start(self.pending, (TOOL_CALL_OPEN,))
        self._emit_content(events, self.pending[:cut])
        self.pending = self.pending[cut:]
        return False

    def _call(self, events: list[Event], final: bool) -> bool:
        body = self.pending
        if not self.call_named:
            name = call_name_hint(body)
            if name:
                self.call_named = True
                events.append(ToolCallStart(name))
        close = body.find(TOOL_CALL_CLOSE, self.call_scanned)
        reopen = body.find(TOOL_CALL_OPEN, self.call_scanned)
        if close >= 0 and not 0 <= reopen < close:
            call, errors = parse_call_block(body[:close], self.schemas)
            if call is not None:
                self.tool_calls.append(call)
                events.append(ToolCallEnd(call))
            events.extend(self._error(error) for error in errors)
            self.pending = body[close + len(TOOL_CALL_CLOSE):]
            self.state = "content"
            return True
        if reopen >= 0:  # a new call began before this one closed
            events.append(self._error(truncated_error(body[:reopen])))
            self.pending = body[reopen + len(TOOL_CALL_OPEN):]
            self._begin_call()
            return True
        if final:
            events.append(self._error(truncated_error(body)))
            self.pending = ""
            self.state = "content"
            return False
        self.call_scanned = max(0, len(body) - len(TOOL_CALL_CLOSE) + 1)
        return False

    def _begin_call(self) -> None:
        self.state, self.call_scanned, self.call_named = "call", 0, False

    def _emit_reasoning(self, events: list[Event], text: str) -> None:
        if text:
            self.reasoning.append(text)
            events.append(ReasoningDelta(text))

    def _emit_content(self, events: list[Event], text: str) -> None:
        if text:
            self.content.append(text)
            self.piece += text
            events.append(ContentDelta(text))

    def _end_piece(self) -> list[Event]:
        piece, self.piece = self.piece, ""
        return [self._error(error) for error in stray_tag_errors(piece)]

    def _error(self, error: ParseError) -> ErrorEvent:
        self.errors.append(error)
        return ErrorEvent(error)
