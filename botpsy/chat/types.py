"""Data that crosses the chat-format boundary: tool calls, parse errors, parsed outputs.

Messages and tools themselves stay plain OpenAI-style dicts, so users can pass what
their other tooling already produces:

* message: ``{"role": "system"|"user"|"assistant"|"tool", "content": str,
  "reasoning_content": str (assistant, optional), "tool_calls": [{"type": "function",
  "function": {"name": str, "arguments": dict | JSON str}}] (assistant, optional)}``
* tool: ``{"type": "function", "function": {"name", "description", "parameters": JSON schema}}``
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """One function call the model made, arguments already converted to schema types."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ParseError:
    """Something in the model's output that could not be turned into a call.

    ``kind`` is a short machine tag (for metrics); ``message`` is written to be fed back to
    the model verbatim; ``raw`` is the offending snippet (truncated).
    """

    kind: str
    message: str
    raw: str = ""


@dataclass
class ParsedOutput:
    """A model turn split into its parts."""

    reasoning: str = ""
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "reasoning": self.reasoning,
            "content": self.content,
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "errors": [asdict(e) for e in self.errors],
        }

    def to_message(self) -> dict[str, Any]:
        """The assistant message to append to a conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return msg
