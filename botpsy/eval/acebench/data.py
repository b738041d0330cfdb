"""ACEBench's English data as botpsy items: categories, gold answers, tools and prompts.

An item is one data line, except in normal multi_turn (user_adjust, user_switch), where the
lines of one conversation (``..._<conversation>_<turn>``) form one item: ACEBench scores such
a conversation as right only when every turn is right.

The prompts are botpsy's own wording of ACEBench's instructions; the functions go to the model
as tools (``to_tool``), so each model sees them in its own chat format.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

NORMAL = ("normal_atom_bool", "normal_atom_enum", "normal_atom_number", "normal_atom_list",
          "normal_atom_object_short", "normal_atom_object_deep", "normal_single_turn_single_function",
          "normal_single_turn_parallel_function", "normal_multi_turn_user_adjust", "normal_multi_turn_user_switch",
          "normal_similar_api", "normal_preference")
SPECIAL = ("special_incomplete", "special_error_param", "special_irrelevant")
AGENT = ("agent_multi_step", "agent_multi_turn")
CATEGORIES = NORMAL + SPECIAL + AGENT
MULTI_TURN_NORMAL = ("normal_multi_turn_user_adjust", "normal_multi_turn_user_switch")


@dataclass
class AceItem:
    """One scored unit: ``entries`` are the data lines (several for a normal multi-turn
    conversation), ``golds`` their gold answers, ``milestones`` an agent item's gold process."""

    id: str
    category: str
    entries: list[dict]
    golds: list[Any]
    milestones: list = field(default_factory=list)

    @property
    def group(self) -> str:
        return self.category.split("_", 1)[0]


def group_of(category: str) -> str:
    return category.split("_", 1)[0]


def load_items(folder: Path) -> dict[str, list[AceItem]]:
    """Every category's items, in file order."""
    if not (folder / "data_normal_atom_bool.json").is_file():
        raise FileNotFoundError(f"ACEBench data not found in {folder} (set --data-dir or $BOTPSY_DATA_DIR "
                                "to a folder holding acebench/)")
    return {category: category_items(folder, category) for category in CATEGORIES}


def category_items(folder: Path, category: str) -> list[AceItem]:
    entries = read_lines(folder / f"data_{category}.json")
    answers = {a["id"]: a for a in read_lines(folder / "possible_answer" / f"data_{category}.json")}
    missing = [e["id"] for e in entries if e["id"] not in answers]
    if missing:
        raise ValueError(f"ACEBench {category}: no gold answer for {missing[:5]}")
    if category in MULTI_TURN_NORMAL:
        conversations: dict[str, list[dict]] = {}
        for entry in entries:
            conversations.setdefault(entry["id"].rsplit("_", 1)[0], []).append(entry)
        return [AceItem(cid, category, turns, [answers[t["id"]]["ground_truth"] for t in turns])
                for cid, turns in conversations.items()]
    return [AceItem(e["id"], category, [e], [answers[e["id"]]["ground_truth"]],
                    answers[e["id"]].get("mile_stone") or []) for e in entries]


@lru_cache(maxsize=None)
def _read_text(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in _read_text(str(path)).splitlines() if line.strip()]


def share_out(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """How many items each category gives to a sample of ``limit``: one per category in turn
    (so a small sample has every category), none beyond a category's size; 0 = all.

    >>> share_out({"a": 5, "b": 1, "c": 5}, 6)
    {'a': 3, 'b': 1, 'c': 2}
    """
    if limit <= 0:
        return dict(sizes)
    taken = {name: 0 for name in sizes}
    while sum(taken.values()) < min(limit, sum(sizes.values())):
        for name in sizes:
            if taken[name] < sizes[name] and sum(taken.values()) < limit:
                taken[name] += 1
    return taken


# ---- tools ----------------------------------------------------------------------------------

_JSON_TYPES = {"dict": "object", "list": "array", "tuple": "array", "float": "number", "int": "integer",
               "str": "string", "bool": "boolean", "any": "string"}


def to_tool(function: dict) -> dict:
    """An ACEBench function spec as an OpenAI-style tool: its parameters (written under
    ``parameters`` or ``arguments``) as JSON schema, Python type names (dict, list) mapped, and
    required names that are not parameters dropped (a few specs list misspelt ones)."""
    parameters = function.get("parameters") or function.get("arguments") or {}
    schema = json_schema(parameters if isinstance(parameters, dict) else {})
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return {"type": "function", "function": {"name": function["name"], "description": function.get("description", ""),
                                             "parameters": schema}}


def json_schema(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out = copy.deepcopy(schema)
    declared = schema.get("type")
    if isinstance(declared, str):
        out["type"] = _JSON_TYPES.get(declared, declared)
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: json_schema(v) for k, v in schema["properties"].items()}
        if isinstance(schema.get("required"), list):
            out["required"] = [r for r in schema["required"] if r in out["properties"]]
    if isinstance(schema.get("items"), dict):
        out["items"] = json_schema(schema["items"])
    return out


# ---- prompts --------------------------------------------------------------------------------

NORMAL_PROMPT = """You are an assistant that acts by calling the functions you are given. Read the conversation \
between the user and the system below and make the function call or calls that should come next.
- Pass every parameter the user mentioned; leave out optional parameters the user did not mention, and never \
invent parameter names.
- Where a parameter's description asks for no particular format, use the user's own words as its value.
- If the request needs several calls, make all of them."""

PROFILE_PROMPT = """
Values the user leaves unsaid may come from the user's profile:
{profile}"""

SPECIAL_PROMPT = """You are an assistant that acts by calling the functions you are given. Read the conversation \
below and decide which case applies, in this order:
1. A value the user gave does not fit the function's definition (wrong type, form or range). Do not call a \
function; answer: There is incorrect value (<value>) for the parameters (<parameter>) in the conversation history.
2. The user left out details that a function requires. Do not call a function; answer: Missing necessary \
parameters (<parameter1>, <parameter2>, ...) for the api (<function name>)
3. No function can do what the user asks. Do not call a function; answer: Due to the limitations of the \
function, I cannot solve this problem.
4. Otherwise the request is clear and complete: call the function or functions that serve it, using the \
user's own words for values whose format is not specified."""

CONVERSATION = "The conversation so far:\n{question}"


def single_turn_messages(entry: dict, category: str) -> list[dict]:
    """System and user messages for one normal or special data line."""
    system = SPECIAL_PROMPT if category.startswith("special") else NORMAL_PROMPT
    if entry.get("profile"):
        system += PROFILE_PROMPT.format(profile=entry["profile"])
    if entry.get("time"):
        system += "\n\n" + entry["time"]
    return [{"role": "system", "content": system},
            {"role": "user", "content": CONVERSATION.format(question=entry["question"].strip())}]


def tools_of(entry: dict) -> list[dict]:
    return [to_tool(f) for f in entry.get("function") or []]
