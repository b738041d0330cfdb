"""Constrained tool calls: keep a call's function and parameter names to what the prompt offers.

A small model often writes a well-formed call to a tool that was not offered, or closes a call
before a required parameter. ``CallConstraint`` reads the text generated so far in a turn and,
while a tool call is open, allows only the tokens that keep the call valid for the offered tools:

* after ``<tool_call>``: ``\\n<function``;
* after ``<function``: ``=NAME>`` for an offered tool;
* between parameters: ``\\n<parameter`` while the tool has parameters not yet given, and
  ``\\n</function>`` only once every required one is there;
* after ``<parameter``: ``=NAME>`` for a parameter of the tool not yet given;
* the value of a parameter with an ``enum``: one of its values, and of a ``boolean``: true or false;
* the value of an ``integer`` or ``number`` parameter: digits (a sign, a point, an exponent for
  numbers), then the parameter's close;
* any other value: free text, except a token that opens or closes a tag (``<parameter``,
  ``</function>``, ``<tool_call>``, ``<think>``, an end of turn, ...), and a ``</`` there can only
  go on to ``</parameter>``. Anything else could only leave the call malformed: a small model
  facing unfamiliar tools (BFCL's) often starts the next ``<parameter=`` before closing the
  value, and a value cannot end the turn;
* after ``</function>``: ``\\n</tool_call>``.

Everywhere else (reasoning, plain answers) nothing is constrained, so the model can still answer,
refuse or ask back instead of calling. A turn offered no tools at all gets ``NoCallConstraint``
instead: every token but one that opens a call, spelled out in pieces or not (a model trained
on tool tasks otherwise answers an essay request with ``<tool_call>``). Whether to call, and which of the offered tools, stays the
model's choice: the constraint only removes the options that could never be valid.

A ``CallGate`` (``GenerateConfig.call_threshold``) adds one decision the model makes with a
probability: whether to open the turn's first call at all. Before that first ``<tool_call>``, it
is allowed only where the model puts at least the threshold on it among the tokens that are not
whitespace; below it the model answers in text. A small model trained on tool tasks opens a call
for nearly every request, and greedy decoding takes a call it gives 30% over an answer that
spreads the rest over many first words.

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

import functools
import re
from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np

from botpsy.chat.parse import FUNCTION_CLOSE, PARAMETER_CLOSE
from botpsy.chat.template import THINK_CLOSE, TOOL_CALL_CLOSE, TOOL_CALL_OPEN

_PARAMETER_TAG = re.compile(r"<parameter=([^>\n]*)>")
_TRAILING = ("\n", "\n\n", " ")  # whitespace a token may carry past the end of a target
# Text no token of a free value may contain: tags of the call format and of the chat turn.
TAG_MARKS = ("<parameter", "<function", "</function", "<tool_call", "</tool_call", "<think", "</think",
             "<|im_start|>", "<|im_end|>", "<|endoftext|>")
# A number as the whole text of a value, and what may precede the end of one being written.
_NUMBER = {"integer": re.compile(r"-?\d+"), "number": re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")}
_NUMBER_SO_FAR = {"integer": re.compile(r"-?\d*"), "number": re.compile(r"-?\d*\.?\d*([eE][-+]?\d*)?")}
_CALL_MARK = TOOL_CALL_OPEN.rstrip(">")
_NUMBER_CHARS = set("-+.0123456789eE\n ") | set(PARAMETER_CLOSE)  # a number, then its close
_CLOSED = {PARAMETER_CLOSE + extra for extra in _TRAILING}  # a value's close, with what a token may carry past it


class TokenTable:
    """Every token's text, indexed by text, so the tokens matching a string are found by lookup."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = list(pieces)
        self._by_text: dict[str, list[int]] = defaultdict(list)
        self._call_free_after: dict[str, frozenset[int]] = {}  # call_free_ids_after, per started prefix
        for token, text in enumerate(self.pieces):
            if text:
                self._by_text[text].append(token)

    def ids(self, text: str) -> list[int]:
        return self._by_text.get(text, [])

    @functools.cached_property
    def free_value_ids(self) -> frozenset[int]:
        """Tokens a free-text value may use: every token without a tag in it (one shared set)."""
        return frozenset(i for i, text in enumerate(self.pieces) if text and not any(m in text for m in TAG_MARKS))

    @functools.cached_property
    def call_free_ids(self) -> frozenset[int]:
        """Every token that does not open a tool call (one shared set)."""
        return frozenset(i for i, text in enumerate(self.pieces) if _CALL_MARK not in text)

    def call_free_ids_after(self, started: str) -> frozenset[int]:
        """Tokens that do not finish a call opening whose first characters, ``started`` (a proper
        prefix of ``<tool_call``), end the text so far; one set per prefix, built on first use."""
        if started not in self._call_free_after:
            finishing = {i for i, text in enumerate(self.pieces) if _CALL_MARK in started + text}
            self._call_free_after[started] = self.call_free_ids - finishing
        return self._call_free_after[started]

    @functools.cached_property
    def space_ids(self) -> np.ndarray:
        """Tokens made only of whitespace (a call gate leaves them out of its odds)."""
        return np.array([i for i, text in enumerate(self.pieces) if text and not text.strip()], dtype=np.int64)

    @functools.cached_property
    def number_candidates(self) -> list[int]:
        """Tokens made only of characters a number value and its close can have."""
        return [i for i, text in enumerate(self.pieces) if text and set(text) <= _NUMBER_CHARS]

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "TokenTable":
        """From a Hugging Face tokenizer (special tokens as their text)."""
        return cls([tokenizer.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
                    for i in range(len(tokenizer))])


@functools.lru_cache(maxsize=4)
def outside(allowed: frozenset[int], size: int) -> np.ndarray:
    """Index array of the tokens of a ``size``-token vocabulary outside a shared allowed set, built
    once. A free tool-call value, or a turn without tools, allows nearly the whole vocabulary; a
    frozenset keeps its hash, so each token after the first is a lookup, and masking writes only
    the few dropped entries (about 1 us instead of 0.3 ms for Qwen's 151,936 tokens).

    >>> outside(frozenset({0, 2}), 4).tolist()
    [1, 3]
    """
    keep = np.zeros(size, dtype=bool)
    keep[np.fromiter((i for i in allowed if i < size), dtype=np.int64)] = True
    return np.flatnonzero(~keep)


class CallConstraint:
    """Allowed next tokens inside a tool call, for one prompt's offered ``tools`` (see the module docstring)."""

    def __init__(self, tools: Iterable[dict], table: TokenTable, gate: "CallGate | None" = None) -> None:
        self.table = table
        self.gate = gate
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
        bound.table, bound.tools, bound.gate, bound.written = self.table, self.tools, self.gate, self.written + written
        return bound

    written = ""  # text of the turn generated before the stream this constraint is handed to

    def gate_at(self, text: str) -> "CallGate | None":
        """The call gate, when it decides the next token after the turn's generated ``text``."""
        return self.gate if self.gate is not None and self.gate.active(self.written + text) else None

    def allowed_ids(self, text: str) -> set[int] | None:
        """Token ids that may come next after the turn's generated ``text``; None when unconstrained."""
        state = self.targets(self.written + text)
        if state is None:
            return None
        tail, targets = state
        if targets == FREE_VALUE:
            return self.table.free_value_ids
        if isinstance(targets, str):  # a number type
            return {i for i in self.table.number_candidates if number_prefix(tail + self.table.pieces[i], targets)} or None
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

    def targets(self, text: str) -> tuple[str, list[str] | str] | None:
        """(text already written towards the next piece, the complete pieces it may become, or what
        ``value_targets`` names for a value that is not a fixed choice), or None."""
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
            value = body[body.index(">", last) + 1:]
            targets = value_targets(properties.get(used[-1]) if used else None)
            if targets == FREE_VALUE and value.endswith("</"):  # a closing tag split into pieces: only this one
                return "</", [PARAMETER_CLOSE]
            return value, targets
        tail = body[body.rfind(PARAMETER_CLOSE) + len(PARAMETER_CLOSE):] if last >= 0 else body
        options = ["\n<parameter"] if any(p not in used for p in properties) else []
        if all(p in used for p in schema.get("required") or []):
            options.append("\n" + FUNCTION_CLOSE)
        return tail, options


class NoCallConstraint:
    """For a turn offered no tools: any token except one that opens a tool call, whether the
    opening is the call token itself or spelled out in pieces (``<tool`` then ``_call>``).

    >>> table = TokenTable(["<tool_call>", "Hello", " world", "<", "tool", "_call>"])
    >>> sorted(NoCallConstraint(table).allowed_ids("Hello"))
    [1, 2, 3, 4, 5]
    >>> sorted(NoCallConstraint(table).after("Hello <").allowed_ids("tool"))  # "_call>" would finish it
    [1, 2, 3, 4]
    """

    def __init__(self, table: TokenTable, written: str = "") -> None:
        self.table = table
        self.written = written[-len(_CALL_MARK):]  # only an unfinished opening can reach past a stream's start

    def after(self, written: str) -> "NoCallConstraint":
        return NoCallConstraint(self.table, written)

    def allowed_ids(self, text: str) -> frozenset[int]:
        tail = (self.written + text)[-len(_CALL_MARK):]
        start = tail.rfind("<")
        started = tail[start:] if start >= 0 else ""
        if not started or len(started) == len(_CALL_MARK) or not _CALL_MARK.startswith(started):
            return self.table.call_free_ids
        return self.table.call_free_ids_after(started)


class CallGate:
    """Open a turn's first tool call only when the model gives it at least ``threshold`` of the
    probability of the tokens that are not whitespace; below, the call token is masked and the
    model answers in text. Once a call is open, or after the reasoning has produced one, later
    calls of the turn (a parallel call) are the model's as usual.

    ``thinking``: the turn opens in reasoning, so the gate waits for ``</think>``. ``vetoes``
    counts the positions where the call was the most likely token and was masked (shared by
    every stream of the turn, as ``CallConstraint.after`` copies keep the same gate).

    >>> table = TokenTable(["<tool_call>", "Sorry", " I", "\\n\\n"])
    >>> gate = CallGate(table, threshold=0.5, thinking=False)
    >>> gate.active(""), gate.active("<tool_call>\\n<function=f>"), gate.active("Hi")
    (True, False, True)
    >>> gate.should_mask(np.log(np.array([0.4, 0.3, 0.3, 1e-9]))), gate.vetoes
    (True, 1)
    >>> gate.should_mask(np.log(np.array([0.3, 0.2, 1e-9, 0.5])))  # 0.3 of the 0.5 that is not whitespace
    False
    """

    def __init__(self, table: TokenTable, threshold: float, thinking: bool) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"a call threshold must be in (0, 1], got {threshold}")
        self.call_ids = np.array(table.ids(TOOL_CALL_OPEN), dtype=np.int64)
        self.space_ids = table.space_ids
        self.threshold, self.thinking = threshold, thinking
        self.vetoes = 0

    def active(self, text: str) -> bool:
        """Whether the next token after the turn's ``text`` may open the turn's first call."""
        if self.thinking:
            if THINK_CLOSE not in text:
                return False
            text = text[text.rindex(THINK_CLOSE):]
        return TOOL_CALL_OPEN not in text and len(self.call_ids) > 0

    def call_share(self, logits: np.ndarray) -> tuple[float, bool] | None:
        """(the call tokens' share of the probability not on whitespace, whether a call token is
        the most likely) at a position with these ``logits`` (a vocabulary-sized array; -inf
        where already masked); None when there is nothing to decide."""
        top = float(np.max(logits))
        if not np.isfinite(top):
            return None
        size = len(logits)
        calls, spaces = self.call_ids[self.call_ids < size], self.space_ids[self.space_ids < size]
        if not len(calls):
            return None
        weights = np.exp(logits.astype(np.float64) - top)
        call = float(weights[calls].sum())
        rest = max(float(weights.sum() - weights[spaces].sum()), 1e-300)
        return call / rest, bool(call > 0 and np.max(logits[calls]) >= top)

    def should_mask(self, logits: np.ndarray) -> bool:
        """Whether the call tokens must be masked at a position with these ``logits``."""
        odds = self.call_share(logits)
        if odds is None or odds[0] >= self.threshold:
            return False
        self.vetoes += odds[1]
        return True


FREE_VALUE = "free"  # ``targets`` of a free-text value: any token without a tag


def value_targets(schema: dict | None) -> list[str] | str:
    """What a parameter's value may be: its complete texts (an enum, a boolean), the name of a
    number type ("integer", "number": checked by ``number_prefix``), or ``FREE_VALUE``."""
    schema = schema or {}
    kind = schema.get("type")
    kind = {"int": "integer", "float": "number"}.get(kind, kind) if isinstance(kind, str) else None
    choices = schema.get("enum") or ([True, False] if kind == "boolean" else None)
    if choices:
        return [f"\n{_enum_text(v)}\n{PARAMETER_CLOSE}" for v in choices]
    return kind if kind in _NUMBER else FREE_VALUE


def number_prefix(value: str, kind: str) -> bool:
    """Whether ``value`` (the text after ``<parameter=NAME>``) can still become ``\\nNUMBER\\n</parameter>``.

    >>> [number_prefix(v, "integer") for v in ("\\n-1", "\\n12\\n</par", "\\n1.5", "\\n\\n</parameter>")]
    [True, True, False, False]
    >>> number_prefix("\\n2.5e-3\\n</parameter>\\n", "number")
    True
    """
    if not value:
        return True
    if not value.startswith("\n"):
        return False
    number, newline, close = value[1:].partition("\n")
    if not newline:
        return _NUMBER_SO_FAR[kind].fullmatch(number) is not None
    complete = PARAMETER_CLOSE.startswith(close) or close in _CLOSED
    return _NUMBER[kind].fullmatch(number) is not None and complete


def _enum_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
