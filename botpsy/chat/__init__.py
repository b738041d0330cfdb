"""The Qwen3.5 chat wire format: render conversations to prompt text, parse model output back.

``template`` renders (``render``, ``generation_prompt``, ``render_completion``); ``parse`` reads a
whole generated turn (``parse_output``) and ``stream`` the same turn delta by delta
(``StreamParser``); ``types`` holds what crosses the boundary. ``botpsy format`` exposes both
directions on the command line.
"""

from botpsy.chat.parse import parse_output
from botpsy.chat.stream import StreamParser
from botpsy.chat.template import generation_prompt, render, render_completion
from botpsy.chat.types import ParsedOutput, ParseError, ToolCall

__all__ = [
    "render",
    "generation_prompt",
    "render_completion",
    "parse_output",
    "StreamParser",
    "ToolCall",
    "ParseError",
    "ParsedOutput",
]
