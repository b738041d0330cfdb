"""The OpenAI wire format of ``botpsy serve``: request checking, error bodies, response objects.

Requests are checked here before anything reaches the model, and every problem becomes an
``APIError`` whose body has OpenAI's shape (``{"error": {"message", "type", "param",
"code"}}``), so clients show a clear message: bad JSON, a missing or malformed message, a tool
whose ``parameters`` is not a valid JSON schema, a ``tool_choice`` naming a tool that was not
offered, an option botpsy does not support (``n > 1``, ``logprobs``, JSON mode).

Beside the standard fields a request may carry botpsy's own (the ``openai`` client sends them
with ``extra_body``): ``thinking_budget`` (reasoning tokens before the reasoning is closed),
``enable_thinking`` (also read from ``chat_template_kwargs``), ``on_loop`` (what the loop guard
does), ``call_threshold`` (open a first tool call only when the model gives it at least this
probability; 0 = off), ``top_k``, ``min_p``, ``repeat_penalty``.

Example::

    request = parse_chat(json.loads(body), ServeLimits(), defaults)
    chunk = chat_chunk(request_id, created, model, {"content": "Hi"})
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from botpsy.chat.template import RenderError, call_name_and_arguments, content_text
from botpsy.runtime.backend import SamplingConfig
from botpsy.runtime.generate import LOOP_POLICIES

ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MAX_STOPS = 4


class APIError(Exception):
    """A request the server refuses or could not serve, with its HTTP status and OpenAI error body."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


@dataclass
class ServeLimits:
    """What one request may ask for."""

    max_tokens: int = 4096  # largest max_tokens a request may ask for
    max_body_bytes: int = 4 << 20
    max_messages: int = 512


@dataclass
class Defaults:
    """What a request gets for the fields it leaves out (from ``botpsy serve``'s flags)."""

    max_tokens: int = 1024
    thinking_budget: int = 0
    enable_thinking: bool = True
    on_loop: str = "recover"
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    call_threshold: float = 0.0


@dataclass
class ChatRequest:
    """A checked ``/v1/chat/completions`` request."""

    messages: list[dict]
    tools: list[dict]
    tool_choice: str  # "auto" | "none" | "required" | "function"
    forced_tool: str | None  # the named function when tool_choice names one
    stream: bool
    include_usage: bool
    max_tokens: int
    sampling: SamplingConfig
    stop: list[str]
    thinking_budget: int
    enable_thinking: bool
    on_loop: str
    model: str = ""
    call_threshold: float = 0.0


@dataclass
class CompletionRequest:
    """A checked ``/v1/completions`` request: raw prompt text, no chat format applied."""

    prompt: str
    stream: bool
    include_usage: bool
    max_tokens: int
    sampling: SamplingConfig
    stop: list[str]
    on_loop: str
    model: str = ""


# ---- checking requests -----------------------------------------------------------------------


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying what is wrong with it."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body


def parse_chat(body: dict[str, Any], limits: ServeLimits, defaults: Defaults) -> ChatRequest:
    """Check a chat-completions body and fill in defaults; raises ``APIError`` (400) on bad input."""
    _unsupported(body)
    messages = _messages(body.get("messages"), limits)
    tools = _tools(body.get("tools"))
    choice, forced = _tool_choice(body.get("tool_choice"), tools)
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise bad_request("chat_template_kwargs must be an object", param="chat_template_kwargs")
    thinking = body.get("enable_thinking", kwargs.get("enable_thinking", defaults.enable_thinking))
    return ChatRequest(
        messages=messages, tools=tools, tool_choice=choice, forced_tool=forced,
        stream=_bool(body, "stream", False), include_usage=_include_usage(body),
        max_tokens=_max_tokens(body, limits, defaults), sampling=_sampling(body, defaults.sampling),
        stop=_stops(body.get("stop")),
        thinking_budget=_int(body, "thinking_budget", defaults.thinking_budget, low=0),
        enable_thinking=_as_bool(thinking, "enable_thinking"), on_loop=_on_loop(body, defaults),
        model=str(body.get("model") or ""),
        call_threshold=_number(body, "call_threshold", defaults.call_threshold, 0.0, 1.0))


def parse_completion(body: dict[str, Any], limits: ServeLimits, defaults: Defaults) -> CompletionRequest:
    """Check a completions body (a single prompt string)."""
    _unsupported(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise bad_request("prompt must be a non-empty string (one prompt per request)", param="prompt")
    return CompletionRequest(
        prompt=prompt, stream=_bool(body, "stream", False), include_usage=_include_usage(body),
        max_tokens=_max_tokens(body, limits, Defaults(max_tokens=min(16, limits.max_tokens))),
        sampling=_sampling(body, defaults.sampling), stop=_stops(body.get("stop")),
        on_loop=_on_loop(body, defaults), model=str(body.get("model") or ""))


def _unsupported(body: dict[str, Any]) -> None:
    if body.get("n", 1) != 1:
        raise bad_request("n must be 1: botpsy serves one choice per request", param="n", code="unsupported")
    if body.get("logprobs") not in (None, False, 0):
        raise bad_request("logprobs are not supported by botpsy serve", param="logprobs", code="unsupported")
    if body.get("frequency_penalty") not in (None, 0, 0.0):
        raise bad_request("frequency_penalty is not supported; use presence_penalty or repeat_penalty",
                          param="frequency_penalty", code="unsupported")
    fmt = body.get("response_format")
    if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") != "text"):
        raise bad_request("only response_format {\"type\": \"text\"} is supported", param="response_format",
                          code="unsupported")


def _messages(messages: Any, limits: ServeLimits) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty list", param="messages")
    if len(messages) > limits.max_messages:
        raise bad_request(f"at most {limits.max_messages} messages per request", param="messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_request(f"{where} must be an object", param=where)
        role = message.get("role")
        if role not in ROLES:
            raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", param=f"{where}.role")
        try:
            content_text(message.get("content"))
            for call in message.get("tool_calls") or []:
                call_name_and_arguments(call)
        except (RenderError, AttributeError) as exc:
            raise bad_request(f"{where}: {exc}", param=where) from None
        message = dict(message, role="system" if role == "developer" else role)
        if message["role"] == "system" and i > 0:
            raise bad_request("a system message may only come first", param=where)
        out.append(message)
    if not any(m["role"] == "user" for m in out):
        raise bad_request("messages need at least one user message", param="messages")
    return out


def _tools(tools: Any) -> list[dict]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise bad_request("tools must be a list", param="tools")
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        fn = tool.get("function") if isinstance(tool, dict) and tool.get("type", "function") == "function" else None
        if not isinstance(fn, dict):
            raise bad_request(f'{where} must be {{"type": "function", "function": {{...}}}}', param=where)
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise bad_request(f"{where}.function.name must be 1-64 letters, digits, '_', '.' or '-', got {name!r}",
                              param=f"{where}.function.name")
        if name in seen:
            raise bad_request(f"tool {name!r} is declared twice", param=f"{where}.function.name")
        seen.add(name)
        _check_schema(fn.get("parameters", {"type": "object", "properties": {}}), f"{where}.function.parameters")
    return tools


def _check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise bad_request(f'{where} must be a JSON schema of type "object"', param=where,
                          code="invalid_function_parameters")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise bad_request(f"{where} is not a valid JSON schema: {exc.message}", param=where,
                          code="invalid_function_parameters") from None


def _tool_choice(choice: Any, tools: list[dict]) -> tuple[str, str | None]:
    if choice is None:
        return "auto", None
    if choice in ("auto", "none", "required"):
        if choice == "required" and not tools:
            raise bad_request('tool_choice "required" needs tools', param="tool_choice")
        return choice, None
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(name, str):
        raise bad_request('tool_choice must be "auto", "none", "required" or {"type": "function", '
                          '"function": {"name": ...}}', param="tool_choice")
    if name not in {t["function"]["name"] for t in tools}:
        raise bad_request(f"tool_choice names {name!r}, which is not among the tools offered", param="tool_choice",
                          code="unknown_tool")
    return "function", name


def _sampling(body: dict[str, Any], base: SamplingConfig) -> SamplingConfig:
    try:
        return SamplingConfig(
            temperature=_number(body, "temperature", base.temperature, 0.0, 2.0),
            top_p=_number(body, "top_p", base.top_p, 0.0, 1.0), top_k=_int(body, "top_k", base.top_k, low=0),
            min_p=_number(body, "min_p", base.min_p, 0.0, 1.0),
            repeat_penalty=_number(body, "repeat_penalty", base.repeat_penalty, 0.0, 10.0),
            presence_penalty=_number(body, "presence_penalty", base.presence_penalty, -2.0, 2.0),
            penalty_last_n=base.penalty_last_n, seed=_int(body, "seed", base.seed))
    except ValueError as exc:
        raise bad_request(str(exc)) from None


def _max_tokens(body: dict[str, Any], limits: ServeLimits, defaults: Defaults) -> int:
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    value = _int(body, key, min(defaults.max_tokens, limits.max_tokens), low=1)
    if value > limits.max_tokens:
        raise bad_request(f"{key} is {value}; this server allows at most {limits.max_tokens}", param=key,
                          code="max_tokens_too_large")
    return value


def _stops(stop: Any) -> list[str]:
    stops = [stop] if isinstance(stop, str) else stop if stop is not None else []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > MAX_STOPS:
        raise bad_request(f"stop must be a string or a list of at most {MAX_STOPS} non-empty strings", param="stop")
    return stops


def _on_loop(body: dict[str, Any], defaults: Defaults) -> str:
    value = body.get("on_loop", defaults.on_loop)
    if value not in LOOP_POLICIES:
        raise bad_request(f"on_loop must be one of {', '.join(LOOP_POLICIES)}", param="on_loop")
    return value


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad_request("stream_options must be an object", param="stream_options")
    return bool(options.get("include_usage", False))


def _bool(body: dict[str, Any], key: str, default: bool) -> bool:
    return _as_bool(body.get(key, default), key)


def _as_bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise bad_request(f"{key} must be true or false", param=key)
    return value


def _int(body: dict[str, Any], key: str, default: int, low: int | None = None) -> int:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        raise bad_request(f"{key} must be an integer" + (f" >= {low}" if low is not None else ""), param=key)
    return value


def _number(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_request(f"{key} must be a number between {low} and {high}", param=key)
    return float(value)


# ---- response objects ------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


def argument_fragments(arguments: dict[str, Any]) -> list[str]:
    """A call's arguments as JSON in pieces, one per parameter, that join to ``json.dumps(arguments)``.

    >>> argument_fragments({"hour": 7, "label": "gym"})
    ['{', '"hour": 7', ', "label": "gym"', '}']
    >>> "".join(argument_fragments({"hour": 7, "label": "gym"})) == json.dumps({"hour": 7, "label": "gym"})
    True
    """
    pieces = [("" if i == 0 else ", ") + json.dumps(key) + ": " + json.dumps(value, ensure_ascii=False)
              for i, (key, value) in enumerate(arguments.items())]
    return ["{", *pieces, "}"]


def tool_call_object(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def chat_chunk(request_id: str, created: int, model: str, delta: dict[str, Any] | None,
               finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """One streamed ``chat.completion.chunk``; ``delta=None`` gives a chunk without choices (usage, events)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    return {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": choices, **extra}


def usage(prompt_tokens: int, completion_tokens: int, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}


def sse(payload: dict[str, Any] | str) -> str:
    """One server-sent event (``data: [DONE]`` for the string ``"[DONE]"``)."""
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n"
