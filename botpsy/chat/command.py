"""``botpsy format``: render a conversation to Qwen3.5 prompt text, or parse raw model output.

Examples::

    botpsy format render conversation.json            # {"messages": [...], "tools": [...]}
    botpsy format render conversation.json --no-think # generation prompt with thinking off
    botpsy format parse output.txt --tools tools.json # -> {"reasoning", "content", "tool_calls", "errors"}
    cat output.txt | botpsy format parse              # "-" (the default) reads stdin

``render`` prints the exact prompt text, generation prompt included (``--json`` wraps it as
``{"prompt": ...}``). ``parse`` always prints JSON; parse errors are data in that JSON, so the exit
code is 0. Input files that are missing, not JSON or the wrong shape exit with code 2 and one line.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from botpsy.chat.parse import parse_output
from botpsy.chat.template import render
from botpsy.config import ConfigError
from botpsy.output import emit


@dataclass
class FormatConfig:
    """Render a conversation to the Qwen3.5 prompt text, or parse raw model output into JSON."""

    action: str = field(metadata={"help": "render: conversation JSON -> prompt text; parse: raw model output -> JSON.",
                                  "positional": True, "choices": ["render", "parse"]})
    input: str = field(default="-", metadata={"help": "Input file, or - for stdin.", "positional": True})
    think: bool = field(default=True, metadata={
        "help": "Thinking on: render ends the prompt inside <think>; parse reads the output as starting in reasoning."})
    tools: str | None = field(default=None, metadata={
        "help": "JSON file with a list of OpenAI-style tools (or {\"tools\": [...]}): schemas for parse's "
                "type conversion; for render it replaces the conversation's own tools."})
    json: bool = field(default=False, metadata={
        "help": "render: print {\"prompt\": ...} as JSON. parse always prints JSON."})


def main(config: FormatConfig) -> int:
    tools = load_tools(config.tools) if config.tools else None
    if config.action == "render":
        messages, file_tools = load_conversation(config.input)
        prompt = render(messages, tools if tools is not None else file_tools,
                        add_generation_prompt=True, enable_thinking=config.think)
        if config.json:
            emit({"prompt": prompt}, as_json=True)
        else:
            sys.stdout.write(prompt)
        return 0
    text = read_text(config.input, "model output")
    emit(parse_output(text, tools, thinking=config.think).to_dict(), as_json=True)
    return 0


def read_text(path: str, what: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{what} file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} file {path} is a directory") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str, what: str) -> Any:
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} file {path} is not valid JSON: {exc}") from None


def load_tools(path: str) -> list[dict]:
    """A tools file: a JSON list of tools, or an object with a ``tools`` list."""
    data = read_json(path, "tools")
    tools = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise ConfigError(f"tools file {path} must hold a list of tool objects (or {{\"tools\": [...]}})")
    return tools


def load_conversation(path: str) -> tuple[list[dict], list[dict]]:
    """``{"messages": [...], "tools": [...]}`` -> (messages, tools), shape-checked so rendering cannot crash."""
    data = read_json(path, "conversation")
    where = "stdin" if path == "-" else path
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ConfigError(f"conversation {where} must be a JSON object with a \"messages\" list")
    messages, tools = data["messages"], data.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise ConfigError(f"conversation {where}: \"tools\" must be a list of tool objects")
    for index, message in enumerate(messages):
        problem = message_problem(message)
        if problem:
            raise ConfigError(f"conversation {where}: message {index} {problem}")
    return messages, tools


def message_problem(message: Any) -> str:
    """What is wrong with one message's shape ('' when nothing is)."""
    if not isinstance(message, dict):
        return f"must be an object, found {type(message).__name__}"
    if not isinstance(message.get("role"), str):
        return "needs a \"role\" string"
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        return "has \"tool_calls\" that is not a list"
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("function", call), dict):
            return "has a tool call that is not an object with a \"function\" object"
    return ""
