"""Human-readable views of conversations and step records, for ``botpsy chat`` and ``botpsy solve``.

``format_transcript(messages)`` prints an episode the way a person reads it: the user's
words, the assistant's reasoning (dimmed), its answers, each call as ``-> name(args)`` and
each result as ``<- {...}``. ``Style`` adds ANSI colours only when asked to (a terminal).

Example::

    print(format_transcript(transcript.messages, Style(color=sys.stdout.isatty())))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botpsy.chat.template import call_name_and_arguments, content_text

RESULT_LIMIT = 240  # characters of a tool result shown; the records keep all of it


@dataclass
class Style:
    """ANSI styling, or plain text when ``color`` is False."""

    color: bool = False

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def call(self, text: str) -> str:
        return self._wrap("36", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def error(self, text: str) -> str:
        return self._wrap("31", text)

    def ok(self, text: str) -> str:
        return self._wrap("32", text)

    def start_dim(self) -> str:
        """Open a dimmed stretch that streams in pieces (closed by ``reset``)."""
        return "\x1b[2m" if self.color else ""

    def reset(self) -> str:
        return "\x1b[0m" if self.color else ""


def clip(text: str, limit: int = RESULT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_call(name: str, arguments: dict[str, Any] | Any) -> str:
    """``set_alarm(time="07:00", days=["mon"])``.

    >>> format_call("set_alarm", {"time": "07:00", "enabled": True})
    'set_alarm(time="07:00", enabled=true)'
    """
    if not isinstance(arguments, dict):
        return f"{name}({arguments!r})"
    args = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    return f"{name}({args})"


def format_result(result: Any, limit: int = RESULT_LIMIT) -> str:
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    return clip(text, limit)


def format_transcript(messages: list[dict], style: Style | None = None, show_system: bool = False,
                      result_limit: int = RESULT_LIMIT) -> str:
    """An episode as indented lines: who said what, which calls ran, what came back."""
    style = style or Style()
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        text = content_text(message.get("content")).strip()
        if role == "system":
            if show_system:
                lines.append(style.dim(f"system: {text}"))
        elif role == "user":
            lines.append(style.bold("user: ") + text)
        elif role == "assistant":
            lines.extend(_assistant_lines(message, text, style))
        elif role == "tool":
            result = format_result(text, result_limit)
            is_error = text.startswith('{"error"')
            lines.append("    " + (style.error("<- " + result) if is_error else style.dim("<- ") + result))
    return "\n".join(lines)


def _assistant_lines(message: dict, text: str, style: Style) -> list[str]:
    lines = []
    reasoning = (message.get("reasoning_content") or "").strip()
    if reasoning:
        lines.append(style.dim("  (thinking) " + reasoning.replace("\n", "\n              ")))
    if text:
        lines.append(style.bold("assistant: ") + text)
    for tool_call in message.get("tool_calls") or []:
        try:
            name, arguments = call_name_and_arguments(tool_call)
        except ValueError:
            name, arguments = str(tool_call.get("function", tool_call).get("name")), {}
        lines.append("    " + style.call("-> " + format_call(name, arguments)))
    if not text and not message.get("tool_calls"):
        lines.append(style.bold("assistant: ") + style.dim("(nothing)"))
    return lines
