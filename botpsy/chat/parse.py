"""Parse raw Qwen3.5 model output into reasoning, content, tool calls and errors for the model.

The inverse of ``template.render_completion``. A turn looks like::

    {reasoning}\\n</think>\\n\\n{content}\\n\\n<tool_call>\\n<function=NAME>\\n
    <parameter=ARG>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>

Tool calls may also come in the older Hermes form ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
XML parameter values are text; given the tools, they are converted to the JSON-schema type each
parameter declares. Without a schema (no tools, unknown tool or parameter) a value becomes a
JSON number, ``true``/``false``/``null``, array or object when its text is exactly one of those
(Python's ``True``/``False``/``None`` too), and stays the verbatim string otherwise: ``"007"`` and
``"5 apples"`` stay strings, ``"7"`` becomes ``7``, and a JSON-quoted ``"Paris"`` keeps its quotes.

Nothing here raises: whatever cannot be read becomes a ``ParseError`` whose message is written to
be fed back to the model, and a call that cannot be built always leaves an error behind.
Text after the first ``<|im_end|>`` / ``<|endoftext|>`` is not part of the turn and is ignored.

Example::

    botpsy format parse output.txt --tools tools.json

    >>> out = parse_output("Wake up early.\\n</think>\\n\\n<tool_call>\\n<function=set_alarm>\\n"
    ...                    "<parameter=hour>\\n7\\n</parameter>\\n</function>\\n</tool_call><|im_end|>")
    >>> out.reasoning, out.tool_calls
    ('Wake up early.', [ToolCall(name='set_alarm', arguments={'hour': 7})])
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from botpsy.chat.template import (
    ENDOFTEXT,
    IM_END,
    IM_START,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
)
from botpsy.chat.types import ParsedOutput, ParseError, ToolCall

END_MARKERS = (IM_END, ENDOFTEXT)
FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"
PARAMETER_OPEN, PARAMETER_CLOSE = "<parameter=", "</parameter>"
# Tags that mean something only inside reasoning or a tool call; seen in plain content they
# are almost always a format slip the model should hear about.
STRAY_TAGS = (
    TOOL_CALL_CLOSE, FUNCTION_OPEN, FUNCTION_CLOSE, PARAMETER_OPEN, PARAMETER_CLOSE,
    THINK_OPEN, THINK_CLOSE, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE, IM_START,
)
_STRAY_RE = re.compile("|".join(re.escape(tag) for tag in STRAY_TAGS))
_FUNCTION_TAG_RE = re.compile(r"\s*<function=([^>\n]*)>")
_JSON_NAME_RE = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_INT_RE = re.compile(r"[-+]?\d+")
_FLOAT_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
RAW_LIMIT = 200  # characters of offending text kept in ParseError.raw
VALUE_LIMIT = 80  # characters of a bad value quoted back to the model
LITERAL_LIMIT = 20_000  # longer text is not handed to ast.literal_eval (cost grows fast)
CALL_FORMAT = (
    "<tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>"
)


# --------------------------------------------------------------------------- the turn


def parse_output(text: str, tools: list[dict] | None = None, *, thinking: bool = True) -> ParsedOutput:
    """Split one generated assistant turn into reasoning, content, tool calls and errors.

    ``thinking=True`` means the prompt ended with ``<think>\\n`` (``generation_prompt(True)``), so
    ``text`` starts inside the reasoning; a ``text`` that itself opens with ``<think>`` is accepted
    either way. ``tools`` (OpenAI-style) supply the schemas that XML parameter values convert to.
    """
    return parse_with_schemas(text, tool_schemas(tools), thinking=thinking)


def parse_with_schemas(text: str, schemas: dict[str, dict], *, thinking: bool = True) -> ParsedOutput:
    """``parse_output`` with the tools already indexed by ``tool_schemas``, for callers that parse many
    turns against the same tools."""
    out = ParsedOutput()
    text = cut_at_end_marker(text if isinstance(text, str) else str(text))
    reasoning, rest, closed = split_reasoning(text, thinking)
    out.reasoning = reasoning.strip()
    if not closed:
        out.errors.append(unclosed_think_error(reasoning))
        return out
    pieces: list[str] = []
    pos = 0
    while True:
        start = rest.find(TOOL_CALL_OPEN, pos)
        piece = rest[pos:] if start < 0 else rest[pos:start]
        pieces.append(piece)
        out.errors.extend(stray_tag_errors(piece))
        if start < 0:
            break
        body_start = start + len(TOOL_CALL_OPEN)
        close = rest.find(TOOL_CALL_CLOSE, body_start)
        reopen = rest.find(TOOL_CALL_OPEN, body_start)
        if close < 0 or 0 <= reopen < close:
            end = reopen if reopen >= 0 else len(rest)
            out.errors.append(truncated_error(rest[body_start:end]))
            pos = end
            continue
        call, errors = parse_call_block(rest[body_start:close], schemas)
        if call is not None:
            out.tool_calls.append(call)
        out.errors.extend(errors)
        pos = close + len(TOOL_CALL_CLOSE)
    out.content = "".join(pieces).strip()
    return out


def cut_at_end_marker(text: str) -> str:
    """The text before the first end-of-turn marker (all of it when there is none)."""
    cut = len(text)
    for marker in END_MARKERS:
        index = text.find(marker, 0, cut)
        if index >= 0:
            cut = index
    return text[:cut]


def split_reasoning(text: str, thinking: bool) -> tuple[str, str, bool]:
    """(reasoning, rest, closed); ``closed`` is False when reasoning began but ``</think>`` never came."""
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        body = stripped[len(THINK_OPEN):]
    elif thinking:
        body = text
    else:
        return "", text, True
    end = body.find(THINK_CLOSE)
    if end < 0:
        return body, "", False
    return body[:end], body[end + len(THINK_CLOSE):], True


def tool_schemas(tools: list[dict] | None) -> dict[str, dict]:
    """Tool name -> its parameters' ``properties`` (``{}`` when it declares none); odd entries skipped."""
    index: dict[str, dict] = {}
    for tool in tools if isinstance(tools, (list, tuple)) else []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, dict) else None
        index[fn["name"]] = props if isinstance(props, dict) else {}
    return index


# --------------------------------------------------------------------------- one call


def parse_call_block(body: str, schemas: dict[str, dict]) -> tuple[ToolCall | None, list[ParseError]]:
    """The text between ``<tool_call>`` and ``</tool_call>`` -> (call, []) or (None, errors)."""
    head = body.lstrip()
    if head.startswith("{"):
        return parse_json_call(body, schemas)
    if head.startswith(FUNCTION_OPEN):
        return parse_xml_call(body, schemas)
    function_at = body.find(FUNCTION_OPEN)
    if function_at >= 0:
        before = clip(body[:function_at].strip(), VALUE_LIMIT)
        problem = f"has text before `{FUNCTION_OPEN}`: `{before}`"
        return None, [malformed_error(call_name_hint(body[function_at:]), problem, body)]
    return None, [ParseError(
        "missing_function",
        f"A <tool_call> block has no <function=NAME> tag. Write each call as:\n{CALL_FORMAT}",
        clip(body),
    )]


def parse_xml_call(body: str, schemas: dict[str, dict]) -> tuple[ToolCall | None, list[ParseError]]:
    match = _FUNCTION_TAG_RE.match(body)
    if match is None:
        return None, [malformed_error("", "has a `<function=` tag that is not closed with `>`", body)]
    name = match.group(1).strip()
    if not name:
        return None, [ParseError("missing_function", "A tool call has an empty function name in "
                                 f"<function=>. Write each call as:\n{CALL_FORMAT}", clip(body))]
    raw_args, kind, problem = read_parameters(body, match.end())
    if kind == "duplicate_parameter":
        return None, [call_error(kind, name, problem, body)]
    if kind:
        return None, [malformed_error(name, problem, body)]
    props = schemas.get(name, {})
    arguments: dict[str, Any] = {}
    errors = []
    for key, raw in raw_args.items():
        try:
            arguments[key] = convert_value(raw, props.get(key))
        except BadValue as bad:
            errors.append(call_error(
                bad.kind, name, f"has parameter `{key}`=`{clip(raw, VALUE_LIMIT)}`, which is not {bad.expected}", body))
    if errors:
        return None, errors
    return ToolCall(name, arguments), []


def read_parameters(body: str, pos: int) -> tuple[dict[str, str], str, str]:
    """(raw parameter texts, error kind, problem) after ``<function=NAME>``; kind is '' when well formed."""
    args: dict[str, str] = {}
    size = len(body)
    while True:
        while pos < size and body[pos].isspace():
            pos += 1
        if body.startswith(FUNCTION_CLOSE, pos):
            trailing = body[pos + len(FUNCTION_CLOSE):].strip()
            if trailing:
                return args, "malformed_tool_call", (f"has text after </function>: `{clip(trailing, VALUE_LIMIT)}` "
                                                     "(put each call in its own <tool_call> block)")
            return args, "", ""
        if pos >= size:
            return args, "malformed_tool_call", "is missing </function>"
        if not body.startswith(PARAMETER_OPEN, pos):
            outside = clip(body[pos:].strip(), VALUE_LIMIT)
            return args, "malformed_tool_call", f"has text outside its parameters: `{outside}`"
        name_end = body.find(">", pos)
        key = body[pos + len(PARAMETER_OPEN):name_end].strip() if name_end >= 0 else ""
        if name_end < 0 or not key or "\n" in key or "<" in key:
            return args, "malformed_tool_call", "has a <parameter=NAME> tag without a name or a closing `>`"
        value_end = body.find(PARAMETER_CLOSE, name_end)
        if value_end < 0:
            return args, "malformed_tool_call", f"has parameter `{key}` without a closing </parameter>"
        if key in args:
            return args, "duplicate_parameter", f"gives parameter `{key}` more than once"
        args[key] = strip_one_newline(body[name_end + 1:value_end])
        pos = value_end + len(PARAMETER_CLOSE)


def strip_one_newline(value: str) -> str:
    """Undo the renderer's framing: exactly one newline after the open tag and before the close tag."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def parse_json_call(body: str, schemas: dict[str, dict]) -> tuple[ToolCall | None, list[ParseError]]:
    """The Hermes form ``{"name": ..., "arguments": {...} | "<JSON text>"}``."""
    duplicates: list[str] = []
    try:
        obj = json.loads(body, object_pairs_hook=_dict_noting_duplicates(duplicates),
                         parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        return None, [ParseError("bad_json", f"{label(call_name_hint(body))} is not valid JSON ({exc}). "
                                 "Call it again with valid JSON.", clip(body))]
    name = obj.get("name") if isinstance(obj, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None, [ParseError("missing_function", "A JSON tool call needs a \"name\" string. "
                                 f"Write each call as:\n{CALL_FORMAT}", clip(body))]
    name = name.strip()
    if duplicates:
        return None, [call_error("duplicate_parameter", name, f"gives `{duplicates[0]}` more than once", body)]
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, parse_constant=_reject_constant) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            return None, [call_error("bad_json", name, f"has arguments that are not valid JSON ({exc})", body)]
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None, [call_error("bad_json", name, "has arguments that are not a JSON object", body)]
    return coerce_json_arguments(name, arguments, schemas.get(name, {}), body)


def coerce_json_arguments(
    name: str, arguments: dict, props: dict, body: str
) -> tuple[ToolCall | None, list[ParseError]]:
    """JSON values keep their types; a string where the schema wants another type is converted."""
    converted: dict[str, Any] = {}
    errors = []
    for key, value in arguments.items():
        schema = props.get(key) if isinstance(props.get(key), dict) else {}
        enum = schema.get("enum")
        try:
            if isinstance(value, str) and schema:
                value = convert_value(value, schema)
            elif isinstance(enum, list) and not in_enum(value, enum):
                raise BadValue("unknown_enum_value", enum_description(enum))
        except BadValue as bad:
            shown = clip(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), VALUE_LIMIT)
            problem = f"has parameter `{key}`=`{shown}`, which is not {bad.expected}"
            errors.append(call_error(bad.kind, name, problem, body))
            continue
        converted[key] = value
    if errors:
        return None, errors
    return ToolCall(name, converted), []


def _dict_noting_duplicates(duplicates: list[str]):
    def build(pairs: list[tuple[str, Any]]) -> dict:
        result: dict = {}
        for key, value in pairs:
            if key in result:
                duplicates.append(key)
            result[key] = value
        return result
    return build


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


# --------------------------------------------------------------------------- values


class BadValue(Exception):
    """A parameter text that does not fit its schema; ``expected`` completes "which is not ..."."""

    def __init__(self, kind: str, expected: str):
        super().__init__(expected)
        self.kind, self.expected = kind, expected


_MISSING = object()
_TYPE_WORDS = {"integer": "an integer", "number": "a number", "boolean": "true or false", "null": "null",
               "array": "a JSON array", "object": "a JSON object", "string": "a string"}


def convert_value(raw: str, schema: Any) -> Any:
    """Convert a parameter's text to what ``schema`` declares; raises BadValue when it cannot."""
    if not isinstance(schema, dict) or not schema:
        return guess_value(raw)
    enum = schema.get("enum")
    if not isinstance(enum, list):
        return convert_typed(raw, schema)
    if "type" not in schema and "anyOf" not in schema and "oneOf" not in schema and raw.strip() in enum:
        return raw.strip()  # an untyped enum of strings: "1" may be a member as text
    try:
        value = convert_typed(raw, schema)
    except BadValue:
        raise BadValue("unknown_enum_value", enum_description(enum)) from None
    if not in_enum(value, enum):
        raise BadValue("unknown_enum_value", enum_description(enum))
    return value


def convert_typed(raw: str, schema: dict) -> Any:
    options = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(options, list) and options:
        return first_that_converts(raw, [(lambda s=s: convert_value(raw, s)) for s in options],
                                   [describe_schema(s) for s in options])
    declared = schema.get("type")
    if isinstance(declared, list) and declared:
        return first_that_converts(raw, [(lambda t=t: convert_to_type(raw, t)) for t in declared],
                                   [_TYPE_WORDS.get(t, str(t)) for t in declared])
    if isinstance(declared, str):
        return convert_to_type(raw, declared)
    return guess_value(raw)


def first_that_converts(raw: str, attempts: list, descriptions: list[str]) -> Any:
    """Try the alternatives of ``anyOf`` / a type list in order; the first that fits wins."""
    for attempt in attempts:
        try:
            return attempt()
        except BadValue:
            continue
    raise BadValue("bad_parameter_value", " or ".join(dict.fromkeys(descriptions)))


def describe_schema(schema: Any) -> str:
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
        return enum_description(schema["enum"])
    declared = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(declared, list):
        return " or ".join(_TYPE_WORDS.get(t, str(t)) for t in declared)
    return _TYPE_WORDS.get(declared, "a valid value")


def enum_description(enum: list) -> str:
    return "one of " + ", ".join(json.dumps(v, ensure_ascii=False, default=str) for v in enum[:20])


def in_enum(value: Any, enum: list) -> bool:
    """Membership that keeps ``True`` apart from ``1``, as JSON does."""
    return any(value == option and isinstance(value, bool) == isinstance(option, bool) for option in enum)


def convert_to_type(raw: str, declared: str) -> Any:
    """One JSON-schema type name; ``string`` keeps the text verbatim, unknown names guess."""
    text = raw.strip()
    if declared == "string":
        return raw
    if declared in ("integer", "number"):
        if _INT_RE.fullmatch(text):
            try:
                return int(text)
            except ValueError:  # more digits than Python converts by default
                raise BadValue("bad_parameter_value", _TYPE_WORDS[declared]) from None
        number = float(text) if _FLOAT_RE.fullmatch(text) else math.nan
        if math.isfinite(number) and (declared == "number" or number.is_integer()):
            return int(number) if declared == "integer" else number
        raise BadValue("bad_parameter_value", _TYPE_WORDS[declared])
    if declared == "boolean":
        if text in ("true", "True"):
            return True
        if text in ("false", "False"):
            return False
        raise BadValue("bad_parameter_value", _TYPE_WORDS[declared])
    if declared == "null":
        if text in ("null", "None", ""):
            return None
        raise BadValue("bad_parameter_value", _TYPE_WORDS[declared])
    if declared in ("array", "object"):
        value = load_structured(text)
        if isinstance(value, list if declared == "array" else dict):
            return value
        raise BadValue("bad_parameter_value", _TYPE_WORDS[declared])
    return guess_value(raw)


def guess_value(raw: str) -> Any:
    """No schema: a JSON number / true / false / null / array / object when the text is exactly
    one (Python's True/False/None too); otherwise the verbatim string."""
    text = raw.strip()
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    if not text:
        return raw
    if text[0] in "[{":
        value = load_structured(text)
        return raw if value is _MISSING else value
    if text[0] in "-0123456789tfn":
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return raw
        if isinstance(value, float) and not math.isfinite(value):
            return raw
        return value
    return raw


def load_structured(text: str) -> Any:
    """JSON, else a Python literal (``['a', True]``) made JSON-like; ``_MISSING`` when neither."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        return value if _finite(value) else _MISSING
    except (ValueError, RecursionError):
        pass
    if len(text) > LITERAL_LIMIT:
        return _MISSING
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _MISSING
    return as_json_value(value)


def _finite(value: Any) -> bool:
    """Whether no float inside ``value`` overflowed to infinity (JSON like ``1e999`` does)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def as_json_value(value: Any, depth: int = 0) -> Any:
    """A Python literal as JSON data (tuples become lists); ``_MISSING`` for sets, bytes, complex..."""
    if depth > 100:
        return _MISSING
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _MISSING
    if isinstance(value, (list, tuple)):
        items = [as_json_value(v, depth + 1) for v in value]
        return _MISSING if any(v is _MISSING for v in items) else items
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return _MISSING
        items = {k: as_json_value(v, depth + 1) for k, v in value.items()}
        return _MISSING if any(v is _MISSING for v in items.values()) else items
    return _MISSING


# --------------------------------------------------------------------------- errors


def clip(text: str, limit: int = RAW_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def label(name: str) -> str:
    return f"The tool call for `{name}`" if name else "A tool call"


def call_error(kind: str, name: str, problem: str, body: str) -> ParseError:
    """An error about one call, phrased for the model: what is wrong and to call again."""
    return ParseError(kind, f"{label(name)} {problem}. Call it again with valid arguments.", clip(body))


def malformed_error(name: str, problem: str, body: str) -> ParseError:
    return ParseError("malformed_tool_call", f"{label(name)} {problem}. Write each call as:\n{CALL_FORMAT}",
                      clip(body))


def call_name_hint(body: str) -> str:
    """The function name a (possibly broken) call body announces, or ''."""
    match = _FUNCTION_TAG_RE.match(body) or _JSON_NAME_RE.match(body)
    if match is None:
        return ""
    name = match.group(1)
    if match.re is _JSON_NAME_RE:
        try:
            name = json.loads(f'"{name}"')
        except ValueError:
            return ""
    return name.strip()


def truncated_error(body: str) -> ParseError:
    return ParseError(
        "truncated_tool_call",
        f"{label(call_name_hint(body))} was cut off before </tool_call>. "
        "Call it again, complete, ending with </tool_call>.",
        clip(body),
    )


def unclosed_think_error(reasoning: str) -> ParseError:
    return ParseError(
        "unclosed_think",
        "Your reasoning never ended with </think>, so no answer or tool call was read. "
        "Keep the reasoning shorter and close it with </think> before answering or calling a tool.",
        clip(reasoning[-RAW_LIMIT:]),
    )


def stray_tag_errors(piece: str) -> list[ParseError]:
    """One error naming the format tags found in plain content (the text itself is kept)."""
    if "<" not in piece:
        return []
    found = list(dict.fromkeys(_STRAY_RE.findall(piece)))
    if not found:
        return []
    tags = ", ".join(f"`{tag}`" for tag in found)
    return [ParseError(
        "stray_tag",
        f"Your answer contains {tags} outside a tool call, so it was read as plain text. Use <think> and "
        f"</think> only around the reasoning at the start, and write each call exactly as:\n{CALL_FORMAT}",
        clip(piece.strip()),
    )]
