"""Function calls written as text, ``[ApiName(key='value', n=2)]``: ACEBench's answer format.

ACEBench asks models to write their calls this way and writes its gold milestones this way too.
botpsy's suite offers the functions as tools instead, so models answer in their own chat format;
this module reads the text form wherever it turns up: a model that wrote its call into the
answer text, and the milestones the agent category's process score is matched against.

The milestones are not always valid Python (``merchant_name='Domino's'``), so the reader is a
small parser of its own rather than ``ast``: a quote only closes a string when what follows it
can end a value (``,`` ``)`` ``]`` ``}`` ``:`` or the end), so an apostrophe inside a word stays
part of the word.

>>> parse_calls("[send_message(sender_name='Eve', message='It's 5 o'clock'), turn_on_wifi()]")
[('send_message', {'sender_name': 'Eve', 'message': "It's 5 o'clock"}), ('turn_on_wifi', {})]
>>> render_calls([("delete_message", {"message_id": 3})])
'[delete_message(message_id=3)]'
"""

from __future__ import annotations

import re
from typing import Any

Call = tuple[str, dict[str, Any]]

_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_CONSTANTS = {"True": True, "False": False, "true": True, "false": False, "None": None, "null": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class CallSyntaxError(ValueError):
    """Text that is not a list of calls."""


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise CallSyntaxError(f"expected {char!r} at {self.pos} in {self.text[:120]!r}")
        self.pos += 1

    def name(self) -> str:
        self.skip()
        match = _NAME.match(self.text, self.pos)
        if not match:
            raise CallSyntaxError(f"expected a name at {self.pos} in {self.text[:120]!r}")
        self.pos = match.end()
        return match.group()

    def calls(self) -> list[Call]:
        self.expect("[")
        out: list[Call] = []
        while self.peek() != "]":
            out.append(self.call())
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                raise CallSyntaxError(f"expected ',' or ']' at {self.pos}")
        self.pos += 1
        return out

    def call(self) -> Call:
        name = self.name()
        self.expect("(")
        args: dict[str, Any] = {}
        while self.peek() != ")":
            key = self.name()
            self.expect("=")
            args[key] = self.value()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != ")":
                raise CallSyntaxError(f"expected ',' or ')' at {self.pos}")
        self.pos += 1
        return name, args

    def value(self) -> Any:
        char = self.peek()
        if char in "'\"":
            return self.string(char)
        if char in "[(":
            return self.sequence("]" if char == "[" else ")")
        if char == "{":
            return self.mapping()
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            number = match.group()
            return float(number) if any(c in number for c in ".eE") else int(number)
        word = self.name()
        if word in _CONSTANTS:
            return _CONSTANTS[word]
        return word  # a bare name: ACEBench's reader keeps it as text too

    def string(self, quote: str) -> str:
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\" and self.pos + 1 < len(self.text):
                nxt = self.text[self.pos + 1]
                out.append(_ESCAPES.get(nxt, nxt))
                self.pos += 2
                continue
            if char == quote and self._closes(self.pos + 1):
                self.pos += 1
                return "".join(out)
            out.append(char)
            self.pos += 1
        raise CallSyntaxError("unterminated string")

    def _closes(self, pos: int) -> bool:
        rest = self.text[pos:].lstrip()
        return not rest or rest[0] in ",)]}:"

    def sequence(self, close: str) -> list:
        self.pos += 1
        out = []
        while self.peek() != close:
            out.append(self.value())
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != close:
                raise CallSyntaxError(f"expected ',' or {close!r} at {self.pos}")
        self.pos += 1
        return out

    def mapping(self) -> dict:
        self.pos += 1
        out = {}
        while self.peek() != "}":
            key = self.value()
            self.expect(":")
            out[str(key)] = self.value()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "}":
                raise CallSyntaxError(f"expected ',' or '}}' at {self.pos}")
        self.pos += 1
        return out


def parse_calls(text: str) -> list[Call]:
    """The calls in ``[f(a=1), g()]`` (the brackets may be left out); raises ``CallSyntaxError``."""
    body = text.strip()
    if not body.startswith("["):
        body = f"[{body}]"
    reader = _Reader(body)
    calls = reader.calls()
    if reader.peek():
        raise CallSyntaxError(f"text after the calls: {body[reader.pos:reader.pos + 40]!r}")
    return calls


def outermost_brackets(text: str) -> str | None:
    """The first balanced ``[...]`` in ``text`` (where ACEBench looks for an answer's calls)."""
    start, depth = -1, 0
    for i, char in enumerate(text):
        if char == "[":
            start = i if depth == 0 else start
            depth += 1
        elif char == "]" and depth:
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


def calls_in_text(text: str, known: set[str]) -> list[Call]:
    """Calls a model wrote into its answer text as ``[f(a=1)]``, if every name is one of ``known``;
    otherwise none (prose with brackets in it is prose).

    >>> calls_in_text("Sure: [get_products(merchant_name='Heytea')]", {"get_products"})
    [('get_products', {'merchant_name': 'Heytea'})]
    >>> calls_in_text("[Missing necessary parameters (a) for the api (f)]", {"f"})
    []
    """
    snippet = outermost_brackets(text or "")
    if not snippet:
        return []
    try:
        calls = parse_calls(snippet)
    except CallSyntaxError:
        return []
    return calls if calls and all(name in known for name, _ in calls) else []


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{k}': {render_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def render_calls(calls: list[Call]) -> str:
    """Calls in ACEBench's text form (how the records show the agent's process)."""
    return "[" + ", ".join(f"{name}(" + ", ".join(f"{k}={render_value(v)}" for k, v in args.items()) + ")"
                           for name, args in calls) + "]"
