"""BFCL v4 items as botpsy sees them: categories, questions as chat messages, functions as tools.

Each ``Item`` keeps BFCL's own entry (``entry``, what the official checkers read, with the function
docs exactly as published) next to what the model is shown: ``turns`` (OpenAI-style messages per
user turn) and ``tools`` (OpenAI-style function tools). The tools follow what BFCL shows a
function-calling model at generation time: the language hint appended to every description
(Java/JavaScript parameters become strings holding source text, as BFCL asks), BFCL's type names
mapped to JSON schema (``dict`` -> object, ``float`` -> number, ``tuple`` -> array, ``any`` ->
string, unknown or missing -> string) and the float note BFCL adds. Function names keep their dots.

Example::

    >>> items = bfcl_items(["simple_python"], limit=2)
    >>> items[0].tools[0]["function"]["name"], items[0].turns[0][0]["role"]
    ('calculate_triangle_area', 'user')
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from botpsy.chat.parse import tool_schemas
from botpsy.eval.bfcl.official import data_dir

PREFIX = "BFCL_v4_"
NON_LIVE = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
            "parallel_multiple", "irrelevance"]
LIVE = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance"]
MULTI_TURN = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
CATEGORIES = NON_LIVE + LIVE + MULTI_TURN
GROUPS = {"all": CATEGORIES, "non_live": NON_LIVE, "live": LIVE, "multi_turn": MULTI_TURN,
          "simple": ["simple_python", "simple_java", "simple_javascript"]}
LEFT_OUT = {
    "web_search_base": "calls a live web search (SerpAPI, a paid key) and fetches pages: not offline",
    "web_search_no_snippet": "same web search backend as web_search_base: not offline",
    "memory_vector": "its memory backend embeds with a sentence-transformers model from the Hugging Face hub "
                     "(and pulls torch with CUDA and faiss)",
    "memory_kv": "agentic: the model must first run BFCL's memory pre-requisite conversations, which the "
                 "backend persists to disk, and answers are graded on free text; not part of this adapter",
    "memory_rec_sum": "agentic, like memory_kv (pre-requisite conversations, free-text answers)",
    "format_sensitivity": "not scored by BFCL's overall; it varies a prompting model's text call format "
                          "(python/json/xml), which does not apply to Qwen3.5's native tool calls",
}

_HINT = {"java": " Note that the provided function is in Java 8 SDK syntax.",
         "javascript": " Note that the provided function is in JavaScript syntax.",
         "python": " Note that the provided function is in Python 3 syntax."}
_JSON_TYPE = {"integer": "integer", "number": "number", "float": "number", "double": "number",
              "string": "string", "String": "string", "char": "string", "any": "string", "Any": "string",
              "boolean": "boolean", "bool": "boolean", "Boolean": "boolean", "array": "array", "list": "array",
              "tuple": "array", "Array": "array", "ArrayList": "array", "Queue": "array", "Stack": "array",
              "dict": "object", "object": "object", "HashMap": "object", "Hashtable": "object",
              "byte": "integer", "short": "integer", "long": "integer", "Bigint": "integer"}
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"


@dataclass
class Item:
    """One BFCL entry. ``turns[i]`` are the messages of user turn i; ``added_tools[i]`` the tools
    that appear at turn i (BFCL's held-out functions in multi_turn_miss_func)."""

    id: str
    category: str
    turns: list[list[dict]]
    tools: list[dict]
    entry: dict = field(repr=False)
    ground_truth: Any = field(default=None, repr=False)
    added_tools: dict[int, list[dict]] = field(default_factory=dict, repr=False)

    @property
    def multi_turn(self) -> bool:
        return self.category in MULTI_TURN

    @property
    def language(self) -> str:
        return {"simple_java": "java", "simple_javascript": "javascript"}.get(self.category, "python")

    def scoring_schemas(self, turn_index: int = 0) -> dict[str, dict]:
        """Parameter schemas for reading the model's calls when scoring: without enums, and any
        typed value may also be a string, so values reach BFCL's checker as written (BFCL's own
        function-calling path validates nothing; its checker judges values, including variable
        names written in place of a list or a number)."""
        return tool_schemas([relaxed(tool) for tool in self.tools_at(turn_index)])

    @property
    def messages(self) -> list[dict]:
        """The conversation of a single-turn item (its only turn)."""
        return self.turns[0]

    def tools_at(self, turn_index: int) -> list[dict]:
        """The tools offered during turn ``turn_index`` (held-out ones join at their turn and stay)."""
        tools = list(self.tools)
        for index in sorted(self.added_tools):
            if index <= turn_index:
                tools.extend(self.added_tools[index])
        return tools


def expand_categories(names: list[str] | None) -> list[str]:
    """Category names and group names (all, non_live, live, multi_turn, simple) -> categories."""
    out: list[str] = []
    for name in names or ["all"]:
        for category in GROUPS.get(name, [name]):
            if category in LEFT_OUT:
                raise ValueError(f"BFCL category {category!r} is not scored offline: {LEFT_OUT[category]}")
            if category not in CATEGORIES:
                raise ValueError(f"unknown BFCL category {category!r}; known: {', '.join(list(GROUPS) + CATEGORIES)}")
            if category not in out:
                out.append(category)
    return out


def bfcl_items(categories: list[str] | None = None, limit: int | None = None) -> list[Item]:
    """The items of ``categories`` (all offline ones by default). ``limit`` keeps that many per
    category, spread evenly over the category's file so that a sample covers all of it."""
    items: list[Item] = []
    for category in expand_categories(categories):
        entries = _load_jsonl(f"{PREFIX}{category}.json")
        answers = _answers(category)
        picked = spread(len(entries), limit)
        items.extend(make_item(category, entries[i], answers.get(entries[i]["id"])) for i in picked)
    return items


def spread(count: int, limit: int | None) -> list[int]:
    """``limit`` indices spread evenly over ``range(count)`` (all of them without a limit).

    >>> spread(10, 3)
    [0, 3, 6]
    """
    if limit is None or limit >= count:
        return list(range(count))
    return [i * count // limit for i in range(max(limit, 0))]


@lru_cache(maxsize=None)
def _load_jsonl_cached(relative: str) -> tuple[str, ...]:
    return tuple(line for line in (data_dir() / relative).read_text().splitlines() if line.strip())


def _load_jsonl(relative: str) -> list[dict]:
    return [json.loads(line) for line in _load_jsonl_cached(relative)]


def _answers(category: str) -> dict[str, Any]:
    if "irrelevance" in category or "relevance" in category:
        return {}  # graded on whether any call was made; BFCL ships no answer file
    return {a["id"]: a["ground_truth"] for a in _load_jsonl(f"possible_answer/{PREFIX}{category}.json")}


@lru_cache(maxsize=None)
def _multi_turn_docs(class_name: str) -> tuple[str, ...]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    return _load_jsonl_cached(f"multi_turn_func_doc/{MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]}")


def make_item(category: str, entry: dict, ground_truth: Any) -> Item:
    entry = copy.deepcopy(entry)
    language = {"simple_java": "java", "simple_javascript": "javascript"}.get(category, "python")
    added: dict[int, list[dict]] = {}
    turns = [list(turn) for turn in entry["question"]]
    if category in MULTI_TURN:
        functions = [json.loads(doc) for name in entry["involved_classes"] for doc in _multi_turn_docs(name)]
        held = {int(turn): names for turn, names in entry.get("missed_function", {}).items()}
        held_docs = {i: [f for f in functions if f["name"] in names] for i, names in held.items()}
        functions = [f for f in functions if not any(f["name"] in names for names in held.values())]
        # BFCL adds the language hint to the functions offered from the start, not to held-out ones.
        added = {i: [to_tool(f, language, hint=False) for f in docs] for i, docs in held_docs.items()}
        for i in held:
            turns[i] = [{"role": "user", "content": ADDED_FUNCTIONS_PROMPT}]
        entry["function"] = functions + [f for docs in held_docs.values() for f in docs]
    else:
        functions = entry["function"]
    tools = [to_tool(f, language) for f in functions]
    return Item(entry["id"], category, turns, tools, entry, ground_truth, added)


def to_tool(function: dict, language: str = "python", hint: bool = True) -> dict:
    """A BFCL function doc as an OpenAI-style tool (see the module docstring)."""
    function = copy.deepcopy(function)
    description = function.get("description", "") + (_HINT[language] if hint else "")
    parameters = function.get("parameters") or {"type": "dict", "properties": {}}
    properties = parameters.get("properties", {})
    if language != "python":
        properties = {name: as_source_text(schema, language) for name, schema in properties.items()}
    schema = {"type": "object", "properties": {n: to_json_schema(s) for n, s in properties.items()}}
    for key, value in parameters.items():
        if key not in ("type", "properties"):
            schema[key] = value
    tool = {"name": function["name"], "description": description, "parameters": schema}
    return {"type": "function", "function": tool}


def to_json_schema(schema: Any) -> Any:
    """BFCL's type names -> JSON schema, recursively (properties, items)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    declared = schema.get("type")
    out["type"] = _JSON_TYPE.get(declared, "string") if isinstance(declared, str) or declared is None else declared
    if declared == "float":
        out["format"] = "float"  # BFCL tells function-calling models which numbers are floats
        out["description"] = schema.get("description", "") + " This is a float type value."
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: to_json_schema(v) for k, v in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        out["items"] = to_json_schema(schema["items"])
    return out


def as_source_text(schema: dict, language: str) -> dict:
    """A Java/JavaScript parameter as BFCL shows it: a string holding source text, its real type
    in the description (the checker converts the text back with BFCL's type converters)."""
    schema = dict(schema)
    declared = schema.get("type", "any")
    name = "Java" if language == "java" else "JavaScript"
    description = schema.get("description", "")
    if declared == "any":
        description += f" This parameter can be of any type of {name} object in string representation."
    else:
        description += f" This is {name} {declared} type parameter in string representation."
    if declared in ("ArrayList", "Array", "array") and isinstance(schema.get("items"), dict):
        description += f" The list elements are of type {schema['items'].get('type')}; they are not in string representation."
        schema.pop("items")
    if language == "javascript" and declared == "dict" and "properties" in schema:
        description += (" The dictionary entries have the following schema; they are not in string "
                        f"representation. {json.dumps(schema.pop('properties'))}")
    schema.update(type="string", description=description)
    return schema


def relaxed(schema: Any) -> Any:
    """``schema`` with enums dropped and every non-string type also accepting a string."""
    if not isinstance(schema, dict):
        return schema
    out = {k: relaxed(v) if isinstance(v, (dict, list)) else v for k, v in schema.items() if k != "enum"}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: widen(relaxed(v)) for k, v in schema["properties"].items()}
    return out


def widen(schema: Any) -> Any:
    declared = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(declared, str) and declared != "string":
        return {**schema, "type": [declared, "string"]}
    return schema
