"""Items from a request's worker (``turns.Delta``, ``CallOut``, ``Note``, ``Finish``, ``APIError``) as OpenAI responses.

``ChatStream`` writes them as ``chat.completion.chunk`` server-sent events: a first chunk with
the role, then reasoning (``reasoning_content``, as llama-server and vLLM name it) and content
deltas, a tool call as a chunk with its id and name followed by one chunk per argument
fragment, and a last chunk with ``finish_reason``, then usage (when asked for with
``stream_options.include_usage``) and ``[DONE]``. ``ChatCollector`` builds the same turn as one
``chat.completion``. ``TextStream`` / ``TextCollector`` do the same for ``/v1/completions``.

Runtime events (a loop-guard firing, the thinking budget, assistant steps and confirmation
requests) travel in a ``botpsy`` field beside the standard ones, on a chunk whose delta is
empty, so clients that do not know it read past it; the last chunk's ``botpsy`` field tells
how the turn ended (``finish``, ``loop``, timings). A loop stop is finish reason ``"loop"``.

Example::

    stream = ChatStream(request_id, "model", include_usage=True)
    text = "".join(stream.render(item) for item in items)
"""

from __future__ import annotations

from typing import Any

from botpsy.serve.protocol import (
    APIError,
    argument_fragments,
    chat_chunk,
    now,
    sse,
    tool_call_object,
)
from botpsy.serve.turns import CallOut, Delta, Finish, Note


class ChatStream:
    """Items -> SSE text of a streamed chat completion."""

    def __init__(self, request_id: str, model: str, include_usage: bool) -> None:
        self.request_id, self.model, self.include_usage = request_id, model, include_usage
        self.created = now()
        self.started = False
        self.calls = 0

    def chunk(self, delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> str:
        return sse(chat_chunk(self.request_id, self.created, self.model, delta, finish_reason, **extra))

    def render(self, item: Any) -> str:
        out = ""
        if not self.started and not isinstance(item, APIError):
            self.started = True
            out += self.chunk({"role": "assistant", "content": ""})
        if isinstance(item, Delta):
            out += self.chunk({"reasoning_content" if item.kind == "reasoning" else "content": item.text})
        elif isinstance(item, CallOut):
            head = {"index": self.calls, "id": item.call_id, "type": "function",
                    "function": {"name": item.name, "arguments": ""}}
            out += self.chunk({"tool_calls": [head]})
            for fragment in argument_fragments(item.arguments):
                out += self.chunk({"tool_calls": [{"index": self.calls, "function": {"arguments": fragment}}]})
            self.calls += 1
        elif isinstance(item, Note):
            out += self.chunk({}, botpsy=item.event)
        elif isinstance(item, Finish):
            out += self.chunk({}, item.finish_reason, botpsy=item.botpsy)
            if self.include_usage:
                out += self.chunk(None, usage=item.usage)
            out += sse("[DONE]")
        elif isinstance(item, APIError):
            out += sse(item.body()) + sse("[DONE]")
        return out


class ChatCollector:
    """Items -> one ``chat.completion`` object."""

    def __init__(self, request_id: str, model: str) -> None:
        self.request_id, self.model = request_id, model
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.finish: Finish | None = None

    def add(self, item: Any) -> None:
        if isinstance(item, APIError):
            raise item
        if isinstance(item, Delta):
            (self.reasoning if item.kind == "reasoning" else self.content).append(item.text)
        elif isinstance(item, CallOut):
            self.calls.append(tool_call_object(item.call_id, item.name, item.arguments))
        elif isinstance(item, Note):
            self.events.append(item.event)
        elif isinstance(item, Finish):
            self.finish = item

    def response(self) -> dict[str, Any]:
        finish = self.finish or Finish("stop", {})
        content = finish.answer if finish.answer is not None else "".join(self.content).strip()
        message: dict[str, Any] = {"role": "assistant", "content": content if content or not self.calls else None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning).strip()
        if self.calls:
            message["tool_calls"] = self.calls
        return {"id": self.request_id, "object": "chat.completion", "created": now(), "model": self.model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish.finish_reason}],
                "usage": finish.usage, "botpsy": {**finish.botpsy, "events": self.events}}


def text_chunk(request_id: str, created: int, model: str, text: str, finish_reason: str | None = None,
               **extra: Any) -> dict[str, Any]:
    return {"id": request_id, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}], **extra}


class TextStream:
    """Items -> SSE text of a streamed ``/v1/completions`` response (one event per token)."""

    def __init__(self, request_id: str, model: str, include_usage: bool) -> None:
        self.request_id, self.model, self.include_usage = request_id, model, include_usage
        self.created = now()

    def render(self, item: Any) -> str:
        if isinstance(item, Delta):
            return sse(text_chunk(self.request_id, self.created, self.model, item.text))
        if isinstance(item, Note):
            return sse(text_chunk(self.request_id, self.created, self.model, "", botpsy=item.event))
        if isinstance(item, Finish):
            out = sse(text_chunk(self.request_id, self.created, self.model, "", item.finish_reason, botpsy=item.botpsy))
            if self.include_usage:
                out += sse({"id": self.request_id, "object": "text_completion", "created": self.created,
                            "model": self.model, "choices": [], "usage": item.usage})
            return out + sse("[DONE]")
        if isinstance(item, APIError):
            return sse(item.body()) + sse("[DONE]")
        return ""


class TextCollector:
    """Items -> one ``text_completion`` object."""

    def __init__(self, request_id: str, model: str) -> None:
        self.request_id, self.model = request_id, model
        self.parts: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.finish: Finish | None = None

    def add(self, item: Any) -> None:
        if isinstance(item, APIError):
            raise item
        if isinstance(item, Delta):
            self.parts.append(item.text)
        elif isinstance(item, Note):
            self.events.append(item.event)
        elif isinstance(item, Finish):
            self.finish = item

    def response(self) -> dict[str, Any]:
        finish = self.finish or Finish("stop", {})
        body = text_chunk(self.request_id, now(), self.model, "".join(self.parts), finish.finish_reason)
        return {**body, "usage": finish.usage, "botpsy": {**finish.botpsy, "events": self.events}}
