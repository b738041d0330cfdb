"""Render conversations into the Qwen3.5 wire format, exactly as its chat template does.

The rules, from the official template (``Qwen3.5-4B.jinja``):

* ChatML turns ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; every message's content is
  stripped of surrounding whitespace.
* With tools, one system turn: the tools block (one JSON object per line inside
  ``<tools>``), the calling instructions, then the caller's system prompt (if any).
* Assistant turns after the last real user query keep their reasoning as
  ``<think>\\n{reasoning}\\n</think>\\n\\n``; earlier ones drop it.
* Calls are ``<tool_call>\\n<function=NAME>\\n<parameter=ARG>\\nVALUE\\n</parameter>\\n...``;
  objects and lists are JSON, other values ``str()`` (so ``True`` renders as ``True``).
* Tool results go inside a user turn as ``<tool_response>`` blocks; consecutive results
  share one turn. A user turn made only of tool responses does not count as a query.

Example::

    >>> render([{"role": "user", "content": "hi"}], enable_thinking=False)
    '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n'
"""

from __future__ import annotations

import json
from typing import Any, Iterable

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
ENDOFTEXT = "<|endoftext|>"

TOOLS_HEADER = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
TOOLS_INSTRUCTIONS = (
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
    "block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
    "specified\n- You may provide optional reasoning for your function call in natural language "
    "BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
    "question like normal with your current knowledge and do not tell the user about function "
    "calls\n</IMPORTANT>"
)


class RenderError(ValueError):
    """A conversation that the Qwen3.5 format cannot express (the message says why)."""


def to_json(value: Any) -> str:
    """JSON the way transformers' ``tojson`` filter writes it: non-ASCII kept, no HTML escaping."""
    return json.dumps(value, ensure_ascii=False)


def content_text(content: Any) -> str:
    """Message content as text: a string, a list of ``{"type": "text", "text": ...}`` parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if not isinstance(item, dict) or "text" not in item:
                raise RenderError(f"only text content parts are supported, got {item!r:.80}")
            parts.append(str(item["text"]))
        return "".join(parts)
    raise RenderError(f"message content must be a string or a list of parts, got {type(content).__name__}")


def render_tools_system(tools: list[dict], system: str) -> str:
    """The system turn that declares the tools, followed by the caller's system prompt."""
    lines = "".join("\n" + to_json(tool) for tool in tools)
    text = TOOLS_HEADER + lines + "\n</tools>" + TOOLS_INSTRUCTIONS
    if system:
        text += "\n\n" + system
    return f"{IM_START}system\n{text}{IM_END}\n"


def format_parameter_value(value: Any) -> str:
    """Objects and lists as JSON; everything else as Python's ``str`` (as Jinja's ``string``)."""
    if isinstance(value, (dict, list, tuple)):
        return to_json(value)
    return str(value)


def call_name_and_arguments(call: dict) -> tuple[str, dict]:
    """Accept ``{"function": {...}}`` or a bare ``{"name", "arguments"}``; arguments may be JSON text."""
    fn = call.get("function", call)
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise RenderError(f"tool call without a function name: {call!r:.120}")
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise RenderError(f"tool call {name!r} has arguments that are not valid JSON: {exc}") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise RenderError(f"tool call {name!r} arguments must be an object, got {type(args).__name__}")
    return name, args


def render_tool_call(name: str, arguments: dict) -> str:
    params = "".join(
        f"<parameter={key}>\n{format_parameter_value(value)}\n</parameter>\n" for key, value in arguments.items()
    )
    return f"{TOOL_CALL_OPEN}\n<function={name}>\n{params}</function>\n{TOOL_CALL_CLOSE}"


def split_reasoning(message: dict, content: str) -> tuple[str, str]:
    """(reasoning, content): ``reasoning_content`` if given, else a ``<think>`` block inside content."""
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        return reasoning.strip(), content
    if THINK_CLOSE in content:
        reasoning = content.split(THINK_CLOSE)[0].rstrip("\n").split(THINK_OPEN)[-1].lstrip("\n")
        content = content.split(THINK_CLOSE)[-1].lstrip("\n")
        return reasoning.strip(), content
    return "", content


def render_assistant(message: dict, keep_reasoning: bool) -> str:
    content = content_text(message.get("content")).strip()
    reasoning, content = split_reasoning(message, content)
    out = f"{IM_START}assistant\n"
    if keep_reasoning:
        out += f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n\n"
    out += content
    for i, call in enumerate(message.get("tool_calls") or []):
        name, args = call_name_and_arguments(call)
        if i > 0:
            out += "\n"
        elif content.strip():
            out += "\n\n"
        out += render_tool_call(name, args)
    return out + f"{IM_END}\n"


def is_tool_response_only(text: str) -> bool:
    return text.startswith(TOOL_RESPONSE_OPEN) and text.endswith(TOOL_RESPONSE_CLOSE)


def last_query_index(messages: list[dict]) -> int:
    """Index of the last user message that is a real query (not only tool responses)."""
    for index in range(len(messages) - 1, -1, -1):
        msg = messages[index]
        if msg.get("role") == "user" and not is_tool_response_only(content_text(msg.get("content")).strip()):
            return index
    raise RenderError("no user query found in messages")


def render(
    messages: list[dict],
    tools: Iterable[dict] | None = None,
    add_generation_prompt: bool = True,
    enable_thinking: bool = True,
) -> str:
    """Render ``messages`` (and ``tools``) to the exact prompt text Qwen3.5 expects."""
    if not messages:
        raise RenderError("no messages provided")
    tools = list(tools or [])
    out = []
    first_is_system = messages[0].get("role") == "system"
    system = content_text(messages[0].get("content")).strip() if first_is_system else ""
    if tools:
        out.append(render_tools_system(tools, system))
    elif first_is_system:
        out.append(f"{IM_START}system\n{system}{IM_END}\n")
    query = last_query_index(messages)
    for index, msg in enumerate(messages):
        role = msg.get("role")
        if role == "system":
            if index != 0:
                raise RenderError("a system message must be the first message")
        elif role == "user":
            out.append(f"{IM_START}user\n{content_text(msg.get('content')).strip()}{IM_END}\n")
        elif role == "assistant":
            out.append(render_assistant(msg, keep_reasoning=index > query))
        elif role == "tool":
            out.append(render_tool_result(messages, index))
        else:
            raise RenderError(f"unexpected message role {role!r} at position {index}")
    if add_generation_prompt:
        out.append(generation_prompt(enable_thinking))
    return "".join(out)


def render_tool_result(messages: list[dict], index: int) -> str:
    """One ``<tool_response>`` block; opens a user turn after a non-tool and closes before one."""
    out = ""
    if index > 0 and messages[index - 1].get("role") != "tool":
        out += f"{IM_START}user"
    out += f"\n{TOOL_RESPONSE_OPEN}\n{content_text(messages[index].get('content')).strip()}\n{TOOL_RESPONSE_CLOSE}"
    is_last = index == len(messages) - 1
    if is_last or messages[index + 1].get("role") != "tool":
        out += f"{IM_END}\n"
    return out


def generation_prompt(enable_thinking: bool = True) -> str:
    """What follows the conversation when asking the model for its next turn."""
    if enable_thinking:
        return f"{IM_START}assistant\n{THINK_OPEN}\n"
    return f"{IM_START}assistant\n{THINK_OPEN}\n\n{THINK_CLOSE}\n\n"


def render_completion(reasoning: str, content: str, tool_calls: list[dict] | None = None) -> str:
    """The text a model should generate after ``generation_prompt(True)`` for one assistant turn.

    It ends with ``<|im_end|>\n``. Used to build training targets: the rendered conversation
    equals the prompt plus this text, which the tests check.
    """
    full = render_assistant(
        {"role": "assistant", "content": content, "reasoning_content": reasoning, "tool_calls": tool_calls},
        keep_reasoning=True,
    )
    return full[len(f"{IM_START}assistant\n{THINK_OPEN}\n"):]
