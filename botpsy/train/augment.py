"""Value swaps: training copies of a trajectory whose copied values are renamed everywhere.

The device world draws names, queries and texts from short word lists, so a small model can
lower its loss by memorising the frequent ones ("The Amber Spoon") instead of copying what the
request says. A value swap takes each string argument of the gold calls that the user typed
verbatim, invents a new value of the same shape (pseudo-words with the same capitalisation
and word count; an id like ``o1004`` keeps its letters and gets new digits) and replaces it in
every message: the request, the reasoning, the call, the tool results and the answer. The copy
stays self-consistent, and the only way to predict the value is to copy it.

Left alone: enum arguments (their values are fixed by the schema), values that do not start
with a letter (times, dates, phone numbers: they have formats), and values the user did not
type verbatim (conversions such as "this Wednesday" -> a date).

>>> rng = random.Random(0)
>>> messages = [{"role": "user", "content": "Open Headspace."},
...             {"role": "assistant", "content": "", "tool_calls": [
...                 {"type": "function", "function": {"name": "open_app", "arguments": {"name": "Headspace"}}}]},
...             {"role": "tool", "content": '{"opened": "Headspace"}'},
...             {"role": "assistant", "content": "Opening Headspace."}]
>>> tools = [{"type": "function", "function": {"name": "open_app", "parameters": {
...     "type": "object", "properties": {"name": {"type": "string"}}}}}]
>>> swapped, renamed = swap_values(messages, tools, rng)
>>> renamed
{'Headspace': 'Vobipo'}
>>> swapped[0]["content"], swapped[3]["content"]
('Open Vobipo.', 'Opening Vobipo.')
"""

from __future__ import annotations

import random
import re
from typing import Any

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
SWAPPABLE = re.compile(r"^[A-Za-z][A-Za-z0-9 '&.-]*$")
ID_SHAPE = re.compile(r"^([a-z]+)(\d+)$")


def pseudo_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))


def new_value(rng: random.Random, value: str) -> str:
    """A made-up value shaped like ``value``: same words, capitals and digit runs; new letters.

    >>> new_value(random.Random(1), "o1004")[0], len(new_value(random.Random(1), "o1004"))
    ('o', 5)
    >>> new_value(random.Random(2), "The Blue Lemon").count(" ")
    2
    """
    shaped = ID_SHAPE.match(value)
    if shaped:
        return shaped.group(1) + "".join(rng.choice("0123456789") for _ in shaped.group(2))
    words = []
    for word in value.split(" "):
        if word.isdigit():
            words.append("".join(rng.choice("123456789") for _ in word))
        elif word and word[0].isalpha():
            made = pseudo_word(rng, 1 if len(word) <= 3 else rng.choice((2, 3)))
            words.append(made.capitalize() if word[0].isupper() else made)
        else:
            words.append(word)  # "&", "-": kept as they are
    return " ".join(words)


def copied_values(messages: list[dict], tools: list[dict]) -> list[str]:
    """String arguments of the gold calls that a user message contains verbatim (not enums)."""
    schemas = {t["function"]["name"]: t["function"].get("parameters", {}).get("properties", {}) for t in tools}
    said = "\n".join(m.get("content") or "" for m in messages if m["role"] == "user")
    found: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            for key, value in arguments.items():
                if (isinstance(value, str) and SWAPPABLE.match(value) and value not in found
                        and "enum" not in schemas.get(name, {}).get(key, {}) and whole_word(value).search(said)):
                    found.append(value)
    return found


def whole_word(value: str) -> re.Pattern:
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(value) + r"(?![A-Za-z0-9])")


def replace_all(node: Any, patterns: list[tuple[re.Pattern, str]]) -> Any:
    """``node`` (messages, dicts, lists, strings) with every pattern replaced in every string."""
    if isinstance(node, str):
        for pattern, replacement in patterns:
            node = pattern.sub(lambda _: replacement, node)
        return node
    if isinstance(node, list):
        return [replace_all(item, patterns) for item in node]
    if isinstance(node, dict):
        return {key: replace_all(item, patterns) for key, item in node.items()}
    return node


def swap_values(messages: list[dict], tools: list[dict], rng: random.Random) -> tuple[list[dict], dict[str, str]]:
    """A copy of ``messages`` with every copied value renamed, and the renaming (empty: nothing to swap)."""
    values = copied_values(messages, tools)
    # Longest first, so "Notes Plus" is renamed before a shorter value inside it could be.
    renamed = {value: new_value(rng, value) for value in sorted(values, key=len, reverse=True)}
    patterns = []
    for value, replacement in renamed.items():
        patterns.append((whole_word(value), replacement))
        if value[0].islower():  # the same value opening a sentence ("Pasta timer: 9 minutes.")
            patterns.append((whole_word(value[0].upper() + value[1:]), replacement[0].upper() + replacement[1:]))
    return (replace_all(messages, patterns) if renamed else messages), renamed


def with_value_swaps(examples: list[dict], copies: int, seed: int) -> list[dict]:
    """``examples`` followed by up to ``copies`` value-swapped copies of each that has copied values.

    A copy's ``id`` is the original's with ``~swapN`` appended and it records ``swapped`` (old -> new).
    """
    rng = random.Random(seed * 7919 + 17)
    out = list(examples)
    for example in examples:
        for n in range(copies):
            messages, renamed = swap_values(example["messages"], example["tools"], rng)
            if not renamed:
                break
            out.append(dict(example, id=f"{example['id']}~swap{n + 1}", messages=messages, swapped=renamed))
    return out
