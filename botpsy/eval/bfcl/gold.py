"""BFCL's ground truth written as a model would write it: an oracle for tests and benchmarks.

``gold_output(item)`` is a single-turn item's first acceptable answer rendered as Qwen3.5
tool-call text (``template.render_completion``); ``oracle(item)`` is a ``generate`` callback that
answers a multi-turn item turn by turn with that turn's ground-truth calls, then a closing
message. Fed through ``score_item`` / ``run_item`` they must score 100%: any loss is a bug in the
adapter (tools, parsing, conversion or driving), never in the model.

Picking the answer: a parameter whose acceptable values include ``""`` (BFCL: may be omitted) is
left out unless required; otherwise its first value is used. Java and JavaScript values become
source text (``5L``, ``new ArrayList<>(Arrays.asList(...))``, ``{key: value}``), as BFCL asks.

Example::

    python -m pytest -q tests/eval/test_bfcl.py
"""

from __future__ import annotations

import ast
import json
from typing import Any

from botpsy.chat.template import render_completion
from botpsy.eval.bfcl import official
from botpsy.eval.bfcl.items import Item

CLOSING = "All done."
_STRING_ONLY = ("the parameter is declared a string (with string enum values) but the answer is {}; in "
                "Qwen3.5's XML call format a string parameter's value is always text")
# BFCL v4 answers that no output in Qwen3.5's format can match: the official checker rejects the
# answer itself, or the answer's type contradicts the parameter's declared type. Tests check that
# exactly these fail, so a change in the adapter or in bfcl-eval shows up.
UNPASSABLE = {
    "simple_java_36": "ArrayList of `any`: BFCL's Java converter reads every element as a string, the answer has 42 and true",
    "simple_java_65": "ArrayList of `any`: BFCL's Java converter reads every element as a string, the answer has true",
    "simple_java_64": "the answer's HashMap values are bare strings, not lists of accepted values, so the dict "
                      "checker compares the value with single characters",
    "live_simple_106-63-0": "a required parameter whose accepted values are an empty list",
    "live_simple_112-68-0": "a required parameter whose accepted values are an empty list",
    "live_multiple_552-153-1": _STRING_ONLY.format("the boolean true"),
    "live_multiple_731-167-2": _STRING_ONLY.format("the boolean true"),
    "live_multiple_733-167-4": _STRING_ONLY.format("the boolean true"),
    "live_multiple_735-167-6": _STRING_ONLY.format("the boolean true"),
    "live_multiple_595-158-1": _STRING_ONLY.format("the integer 2"),
    "live_multiple_596-158-2": _STRING_ONLY.format("the integer 1"),
    "live_multiple_1038-265-0": _STRING_ONLY.format("None"),
    "live_multiple_862-181-3": "the answer uses a parameter (journey_start_time) the function does not declare",
    "live_multiple_964-207-0": "the answer leaves out a required parameter (statement)",
}


def gold_calls(item: Item) -> list[dict]:
    """The first acceptable ground-truth calls of a single-turn item, ``[{name, arguments}]``."""
    if "irrelevance" in item.category:
        return []
    if "relevance" in item.category:  # any call is right; BFCL ships no answer
        return [placeholder_call(item.entry["function"][0])]
    docs = {f["name"]: f for f in item.entry["function"]}
    calls = []
    for expected in item.ground_truth:
        (name, params), = expected.items()
        schema = docs[name]["parameters"]
        args = {}
        for param, values in params.items():
            picked = pick(values, param in schema.get("required", []))
            if picked is _OMIT:
                continue
            declared = schema["properties"].get(param, {})
            args[param] = pick_nested(picked, declared)
            if item.language != "python":
                args[param] = source_text(args[param], declared, item.language)
        calls.append({"name": name, "arguments": args})
    return calls


def gold_output(item: Item) -> str:
    """A single-turn item's ground truth as the text a model generates after ``<think>\\n``."""
    calls = gold_calls(item)
    if not calls:
        return render_completion("No function fits this request.", "I cannot help with that using these tools.")
    return render_completion("The request maps to these calls.", "", calls)


_OMIT = object()
_PLACEHOLDER = {"integer": 1, "float": 1.0, "number": 1.0, "boolean": True, "array": [], "tuple": [],
                "dict": {}, "object": {}}


def placeholder_call(function: dict) -> dict:
    """A well-formed call of ``function``: required parameters at their default, first enum
    value, or a simple value of their type."""
    schema = function["parameters"]
    args = {}
    for name in schema.get("required", []):
        declared = schema["properties"].get(name, {})
        if "default" in declared:
            args[name] = declared["default"]
        elif declared.get("enum"):
            args[name] = declared["enum"][0]
        else:
            args[name] = _PLACEHOLDER.get(declared.get("type"), "placeholder")
    return {"name": function["name"], "arguments": args}


def pick(values: list, required: bool) -> Any:
    if "" in values and not required:
        return _OMIT
    if not any(v != "" for v in values):  # a required parameter whose only answer is "" (or nothing)
        return "" if values else _OMIT
    return next(v for v in values if v != "")


def pick_nested(value: Any, schema: dict) -> Any:
    """Dict parameters hold acceptable values per key (and lists of such dicts): pick in each."""
    declared = schema.get("type")
    if declared in ("dict", "HashMap") and isinstance(value, dict):
        picked = {k: pick(v, False) if isinstance(v, list) else v for k, v in value.items()}
        return {k: v for k, v in picked.items() if v is not _OMIT}
    if declared in ("array", "tuple", "list") and isinstance(value, list) and schema.get("items", {}).get("type") == "dict":
        return [pick_nested(v, schema["items"]) for v in value]
    return value


def source_text(value: Any, schema: dict, language: str) -> str:
    """A Java / JavaScript value as the source text BFCL's type converters read back."""
    declared = schema.get("type", "any")
    nested = schema.get("items", {}).get("type") if isinstance(schema.get("items"), dict) else None
    if language == "java":
        return java_text(value, declared, nested)
    return js_text(value, declared)


def java_text(value: Any, declared: str, nested: str | None = None) -> str:
    if isinstance(value, str):
        return value  # a Java variable or expression (or a string, which BFCL passes unquoted)
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "long":
        return f"{value}L"
    if declared == "float":
        return f"{value}f"
    if declared == "Array":  # BFCL converts typed elements as bare text, untyped ones as literals
        elements = ", ".join(java_text(v, nested) if nested else java_literal(v) for v in value)
        return f"new {nested or 'Object'}[]{{{elements}}}"
    if declared == "ArrayList":  # String elements lose their quotes, others convert as literals
        elements = ", ".join(java_literal(v) if nested in (None, "String", "char") else java_text(v, nested)
                             for v in value)
        return f"new ArrayList<>(Arrays.asList({elements}))"
    if declared == "HashMap":
        puts = " ".join(f'put("{k}", {java_literal(v)});' for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return str(value)


def java_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else str(value)


def js_text(value: Any, declared: str) -> str:
    if isinstance(value, str):
        return value  # a JavaScript variable or expression, or a string BFCL passes unquoted
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "Bigint":
        return f"{value}n"
    if declared in ("array", "dict") or isinstance(value, (list, dict)):
        return js_literal(value)
    return str(value)


def js_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(js_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {js_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


# --------------------------------------------------------------------------- multi-turn


def parse_call_string(text: str, methods: dict) -> dict:
    """``"mv(source='a', destination='b')"`` -> ``{"name", "arguments"}``; positional arguments get
    their names from the backend method's signature."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    name = node.func.id
    params = [p for p in methods[name].parameters if p != "self"]
    args = {params[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
    args.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords})
    return {"name": name, "arguments": args}


def oracle(item: Item):
    """A ``generate(messages, tools)`` that answers each turn with its ground-truth calls (all in
    one step), then closes the turn with a plain message."""
    methods = official.backend_methods(item.entry["involved_classes"])
    per_turn = [[parse_call_string(c, methods) for c in turn] for turn in item.ground_truth]

    def generate(messages: list[dict], tools: list[dict]) -> str:
        turn_index = sum(1 for m in messages if m["role"] == "user") - 1
        if messages[-1]["role"] == "tool" or not per_turn[turn_index]:
            return render_completion("Nothing more to call.", CLOSING)
        return render_completion("Calling the functions for this turn.", "", per_turn[turn_index])

    return generate
