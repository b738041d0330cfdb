"""Constrained tool calls: keep a call's function and parameter names to what the prompt offers.

A small model often writes a well-formed call to a tool that was not offered, or closes a call
before a required parameter. ``CallConstraint`` reads the text generated so far in a turn and,
while a tool call is open, allows only the tokens that keep the call valid for the offered tools:

* after ``<tool_call>``: ``\\n<function``;
* after ``<function``: ``=NAME>`` for an offered tool;
* between parameters: ``\\n<parameter`` while the tool has parameters not yet given, and
  ``\\n</function>`` only once every required one is there;
* after ``<parameter``: ``=NAME>`` for a parameter of the tool not yet given;
* the value of a parameter with an ``enum``: one of its values;
* after ``</function>``: ``\\n</tool_call>``.

Everywhere else (reasoning, plain answers, free-text values) nothing is constrained, so the model
can still answer, refuse or ask back instead of calling. Whether to call, and which of the offered
tools, stays the model's choice: the constraint only removes the options that could never be valid.

It works on text, so one object serves every backend whose vocabulary can be listed as strings:
``allowed_ids(text)`` gives the token ids allowed next (``None``: no constraint), which a backend
turns into a logits mask before it samples. With a Qwen-style pre-tokenizer, tokens never cross
the boundaries that matter here (``<function`` | ``=name`` | ``>``), so extending a prefix token
by token reaches every valid name.

Example::

    >>> tools = [{"type": "function", "function": {"name": "set_alarm", "parameters": {
    ...     "type": "object", "properties": {"time": {"type": "string"}}, "required": ["time"]}}}]
    >>> vocab = TokenTable(["<function", "=set", "_alarm", "=get", ">\\n", "\\n", "<parameter", "=time",
    ...                     "</function>", "hello"])
    >>> c = CallConstraint(tools, vocab)
    >>> c.allowed_ids("I'll set it.") is None        # not inside a call: free
    True
    >>> [vocab.pieces[i] for i in sorted(c.allowed_ids("<tool_call>\\n<function"))]
    ['=set']
    >>> [vocab.pieces[i] for i in sorted(c.allowed_ids("<tool_call>\\n<function=set_alarm>\\n"))]
    ['<parameter']
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable, Sequence

from botpsy.chat.parse import FUNCTION_CLOSE, PARAMETER_CLOSE
from botpsy.chat.template import TOOL_CALL_CLOSE, TOOL_CALL_OPEN

_PARAMETER_TAG = re.compile(r"<parameter=([^>\n]*)>")
_TRAILING = ("\n", "\n\n", " ")  # whitespace a token may carry past the end of a target


class TokenTable:
    """Every token's text, indexed by text, so the tokens matching a string are found by lookup."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = list(pieces)
        self._by_text: dict[str, list[int]] = defaultdict(list)
        for token, text in enumerate(self.pieces):
            if text:
                self._by_text[text].append(token)

    def ids(self, text: str) -> list[int]:
        return self._by_text.get(text, [])

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "TokenTable":
        """From a Hugging Face tokenizer (special tokens as their text)."""
        return cls([tokenizer.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
                    for i in range(len(tokenizer))])


class CallConstraint:
    """Allowed next tokens inside a tool call, for one prompt's offered ``tools`` (see the module docstring)."""

    def __init__(self, tools: Iterable[dict], table: TokenTable) -> None:
        self.table = table
        self.tools: dict[str, dict] = {}
        for tool in tools or []:
            fn = tool.get("function", tool)
            if fn.get("name"):
                self.tools[fn["name"]] = fn.get("parameters") or {}

    def after(self, written: str) -> "CallConstraint":
        """The same constraint for a stream that continues ``written`` (text of this turn already generated)."""
        if not written:
            return self
        bound = CallConstraint.__new__(CallConstraint)
        bound.table, bound.tools, bound.written = self.table, self.tools, self.written + written
        return bound

    written = ""  # text of the turn generated before the stream this constraint is handed to

    def allowed_ids(self, text: str) -> set[int] | None:
        """Token ids that may come next after the turn's generated ``text``; None when unconstrained."""
        state = self.targets(self.written + text)
        if state is None:
            return None
        tail, targets = state
        allowed: set[int] = set()
        for target in targets:
            if not target.startswith(tail):
                continue
            rest = target[len(tail):]
            for end in range(1, len(rest) + 1):
                allowed.update(self.table.ids(rest[:end]))
            for extra in _TRAILING:
                allowed.update(self.table.ids(rest + extra))
        return allowed or None  # nothing fits (an unusual tokenizer): better free than stuck

    def targets(self, text: str) -> tuple[str, list[str]] | None:
        """(text already written towards the next piece, the complete pieces it may become), or None."""
        opened = text.rfind(TOOL_CALL_OPEN)
        if opened < 0 or not self.tools:
            return None
        block = text[opened + len(TOOL_CALL_OPEN):]
        if TOOL_CALL_CLOSE in block:
            return None
        at = block.find("<function")
        if at < 0:
            return block, ["\n<function"]
        head = block[at + len("<function"):]
        if ">" not in head:
            return head, [f"={name}>" for name in self.tools]
        name, body = head[1:head.index(">")], head[head.index(">") + 1:]
        if not head.startswith("=") or name not in self.tools:
            return None
        if FUNCTION_CLOSE in body:
            return body[body.index(FUNCTION_CLOSE) + len(FUNCTION_CLOSE):], ["\n" + TOOL_CALL_CLOSE]
        schema = self.tools[name]
        properties = schema.get("properties") or {}
        used = _PARAMETER_TAG.findall(body)
        last = body.rfind("<parameter")
        if last >= 0 and ">" not in body[last:]:  # writing a parameter's name
            return body[last + len("<parameter"):], [f"={p}>" for p in properties if p not in used]
        if last >= 0 and PARAMETER_CLOSE not in body[last:]:  # inside a value
            enum = (properties.get(used[-1]) or {}).get("enum") if used else None
            value = body[body.index(">", last) + 1:]
            return (value, [f"\n{_enum_text(v)}\n{PARAMETER_CLOSE}" for v in enum]) if enum else None
        tail = body[body.rfind(PARAMETER_CLOSE) + len(PARAMETER_CLOSE):] if last >= 0 else body
        options = ["\n<parameter"] if any(p not in used for p in properties) else []
        if all(p in used for p in schema.get("required") or []):
            options.append("\n" + FUNCTION_CLOSE)
        return tail, options


def _enum_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
