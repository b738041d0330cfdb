"""The loop guard: notice, token by token, that a generation has fallen into a cycle.

A small model's worst reliability failure is the reasoning loop: it writes a span, then
writes it again, and again, until the token budget runs out. ``LoopDetector`` watches one
token stream (make one for the reasoning and one for the answer) and fires a ``LoopEvent``
when

* **repeat**: the tail of the stream is a span of ``period`` tokens written back to back
  (any period from 1 to ``max_period``), long enough that legitimate repetition is ruled
  out: at least ``min_repeats`` copies *and* at least ``min_loop_tokens`` tokens, so short
  periods need more copies ("ha ha ha" is fine, 64 tokens of it are not). Copies may differ
  in a few substituted tokens (``variation``), so a cycle with an incrementing counter
  ("Attempt 7: ... Attempt 8: ...") still counts;
* **stall**: the stream stops making progress without being exactly periodic (the model
  cycles through a few phrases in a changing order): fewer than ``stall_novelty`` of the
  n-grams in the last ``stall_window`` tokens are new. A long cycle that stalls the
  stream before reaching ``min_repeats`` copies is reported as a repeat, with its period.

How it stays cheap (a few microseconds per token in CPython): each new token's n-gram is
looked up in a dict of where that n-gram last occurred, which proposes candidate periods;
only the periods proposed this way are followed, each with a run counter that is advanced
by one comparison per token. Nothing scans the window per token, and the window is trimmed
so memory stays bounded however long the stream runs.

Example::

    detector = LoopDetector(LoopGuardConfig())
    for token_id in stream:
        event = detector.push(token_id)
        if event:
            print(event.kind, event.period, event.start)
            break

    detect_text("Wait, let me check. " * 40)   # -> LoopEvent(kind='repeat', period=6, start=0, ...)
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

Tokenize = Callable[[str], Sequence[tuple[int, int]]]
"""Text -> [(token_id, char_offset), ...]; pass a real tokenizer's wrapper to ``detect_text``."""


@dataclass
class LoopGuardConfig:
    """How sensitive the loop guard is. Defaults are tuned on the generated labelled set."""

    min_period: int = field(default=1, metadata={"help": "Shortest cycle, in tokens, that counts as a loop."})
    max_period: int = field(default=320, metadata={"help": "Longest cycle, in tokens, the guard looks for."})
    min_repeats: int = field(
        default=3, metadata={"help": "Copies written back to back before a cycle counts as a loop."})
    min_loop_tokens: int = field(
        default=64,
        metadata={"help": "The repeated tail must also span this many tokens, so short periods need more "
                          "copies (legitimate 'ha ha ha' or 'repeat X 20 times' stays below it)."})
    variation: float = field(
        default=0.06,
        metadata={"help": "Fraction of tokens that may differ between copies (substitutions such as an "
                          "incrementing counter) while the cycle still counts as a loop."})
    max_consecutive_mismatches: int = field(
        default=2, metadata={"help": "A cycle is abandoned after this many differing tokens in a row."})
    ngram: int = field(
        default=3, metadata={"help": "Length of the n-grams that propose candidate periods and measure novelty."})
    chain_depth: int = field(
        default=8, metadata={"help": "How many earlier occurrences of the current n-gram propose periods."})
    max_candidates: int = field(
        default=64, metadata={"help": "Most candidate periods followed at once (bounds the cost per token)."})
    stall_window: int = field(
        default=256, metadata={"help": "Tokens over which n-gram novelty is measured for stall detection; 0 disables."})
    stall_novelty: float = field(
        default=0.08,
        metadata={"help": "A stall fires when fewer than this fraction of the window's n-grams are new."})

    def __post_init__(self) -> None:
        if not 1 <= self.min_period <= self.max_period:
            raise ValueError(f"need 1 <= min_period <= max_period, got {self.min_period}, {self.max_period}")
        if self.min_repeats < 2:
            raise ValueError(f"min_repeats must be at least 2, got {self.min_repeats}")
        if not 0.0 <= self.variation < 0.5:
            raise ValueError(f"variation must be in [0, 0.5), got {self.variation}")
        if self.ngram < 1 or self.chain_depth < 1 or self.max_candidates < 1:
            raise ValueError("ngram, chain_depth and max_candidates must be positive")

    def required_span(self, period: int) -> int:
        """Tokens a cycle of ``period`` must cover (all copies together) before it is a loop."""
        return max(self.min_loop_tokens, self.min_repeats * period)


@dataclass(frozen=True)
class LoopEvent:
    """What the guard found.

    ``start`` is the token index where the cycle's first copy begins, ``fired_at`` the index
    of the token that made the guard fire, ``period`` the cycle length in tokens (for a
    stall: None). The ``*_char`` offsets are
    filled in by ``detect_text``.
    """

    kind: str
    period: int | None
    start: int
    fired_at: int
    start_char: int | None = None
    fired_char: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Run:
    """A candidate period being followed: where its matching run began and how clean it is."""

    __slots__ = ("start", "mismatches", "consecutive")

    def __init__(self, start: int, mismatches: int) -> None:
        self.start = start  # first token i with tokens[i] == tokens[i - period] (up to tolerated mismatches)
        self.mismatches = mismatches
        self.consecutive = 0


class LoopDetector:
    """Incremental loop detector over one token stream; see the module docstring.

    ``push`` returns the event once, when the guard fires, and ``None`` otherwise; after
    firing the detector stays quiet (its ``event`` keeps the finding) until ``reset()``.
    """

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        self.config = config or LoopGuardConfig()
        c = self.config
        # Tokens older than this are never read again: periods and the novelty window are bounded.
        self._keep = max(c.max_period, c.stall_window) + c.ngram + 1
        self.reset()

    def reset(self) -> None:
        self.event: LoopEvent | None = None
        self.count = 0  # tokens pushed so far; also the index of the next token
        self._offset = 0  # absolute index of self._tokens[0]
        self._tokens: list[int] = []
        self._prev: list[int] = []  # per token: previous position of the n-gram ending there, or -1
        self._last: dict[tuple[int, ...], int] = {}
        self._runs: dict[int, _Run] = {}
        self._novel: deque[bool] = deque()
        self._novel_count = 0

    def push(self, token_id: int) -> LoopEvent | None:
        if self.event is not None:
            return None
        t = self.count
        self.count += 1
        self._tokens.append(token_id)
        fired = self._advance_runs(t, token_id)
        prev = self._index_ngram(t)
        if fired is None and prev >= 0:
            fired = self._propose_periods(t, prev)
        if fired is None and self.config.stall_window:
            fired = self._check_stall(t, prev)
        if len(self._tokens) > 2 * self._keep:
            self._trim()
        self.event = fired
        return fired

    def feed(self, token_ids: Iterable[int]) -> LoopEvent | None:
        """Push every token until the guard fires; return the event (or None)."""
        for token_id in token_ids:
            event = self.push(token_id)
            if event is not None:
                return event
        return None

    # -- repeat detection -------------------------------------------------------------------

    def _advance_runs(self, t: int, token_id: int) -> LoopEvent | None:
        c, tokens, off = self.config, self._tokens, self._offset
        best: int | None = None
        for period, run in list(self._runs.items()):
            if tokens[t - period - off] == token_id:
                run.consecutive = 0
                if self._is_loop(t, period, run) and (best is None or period < best):
                    best = period
                continue
            run.mismatches += 1
            run.consecutive += 1
            if run.consecutive > c.max_consecutive_mismatches or run.mismatches > 1 + c.variation * (t - run.start + 1):
                del self._runs[period]
        if best is None:
            return None
        return LoopEvent("repeat", best, self._runs[best].start - best, t)

    def _is_loop(self, t: int, period: int, run: _Run) -> bool:
        matched = t - run.start + 1
        c = self.config
        return (matched + period >= c.min_loop_tokens and matched >= (c.min_repeats - 1) * period
                and run.mismatches <= c.variation * matched)

    def _index_ngram(self, t: int) -> int:
        """Record the n-gram ending at ``t``; return where it last occurred (-1: never, or trimmed)."""
        n = self.config.ngram
        if t + 1 < n:
            self._prev.append(-1)
            return -1
        gram = tuple(self._tokens[-n:])
        prev = self._last.get(gram, -1)
        self._last[gram] = t
        self._prev.append(prev)
        return prev

    def _propose_periods(self, t: int, prev: int) -> LoopEvent | None:
        """Each earlier occurrence of the current n-gram within reach proposes a period."""
        c, off = self.config, self._offset
        j, depth = prev, 0
        while j >= off and t - j <= c.max_period and depth < c.chain_depth:
            period = t - j
            if period >= c.min_period and period not in self._runs and len(self._runs) < c.max_candidates:
                run = self._extend_back(t, period)
                self._runs[period] = run
                if self._is_loop(t, period, run):
                    return LoopEvent("repeat", period, run.start - period, t)
            j = self._prev[j - off]
            depth += 1
        return None

    def _extend_back(self, t: int, period: int) -> _Run:
        """A new candidate's run: the matching n-gram, extended backwards over earlier matches.

        Without this, a cycle whose copies differ in one token (a counter) would be picked up
        only after its last difference, and the loop would be reported late.
        """
        c, tokens, off = self.config, self._tokens, self._offset
        start = t - c.ngram + 1  # the n-gram itself matched its copy one period back
        mismatches = consecutive = pending = 0
        i = start - 1
        while i - period >= off:
            if tokens[i - off] == tokens[i - period - off]:
                start, mismatches, consecutive = i, mismatches + pending, 0
                pending = 0
            else:
                pending += 1
                consecutive += 1
                if consecutive > c.max_consecutive_mismatches or mismatches + pending > 1 + c.variation * (t - i + 1):
                    break
            i -= 1
        return _Run(start, mismatches)

    # -- stall detection --------------------------------------------------------------------

    def _check_stall(self, t: int, prev: int) -> LoopEvent | None:
        c = self.config
        novel = prev < 0 or t - prev > c.stall_window
        self._novel.append(novel)
        self._novel_count += novel
        if len(self._novel) > c.stall_window:
            self._novel_count -= self._novel.popleft()
        if len(self._novel) < c.stall_window or self._novel_count >= c.stall_novelty * c.stall_window:
            return None
        # A stall explained by a long cycle (not yet at min_repeats copies, but repeating for
        # a period or half the window) is reported as the repeat it is, with period and start.
        longest = max(self._runs.items(), key=lambda kv: t - kv[1].start, default=None)
        if longest is not None and t - longest[1].start + 1 >= min(longest[0], c.stall_window // 2):
            period, run = longest
            return LoopEvent("repeat", period, run.start - period, t)
        return LoopEvent("stall", None, t - c.stall_window + 1, t)

    def _trim(self) -> None:
        """Forget tokens no period or window can reach, so memory stays bounded (amortised O(1))."""
        drop = len(self._tokens) - self._keep
        del self._tokens[:drop]
        del self._prev[:drop]
        self._offset += drop
        horizon = self.count - self._keep
        self._last = {g: pos for g, pos in self._last.items() if pos >= horizon}


# -- text without token ids ---------------------------------------------------------------

_WORD = re.compile(r"\w+|[^\w\s]+|\s*\n\s*")
# A run of one character class only becomes several tokens when it is a flood: at least this
# many characters of a unit of at most RUN_UNIT characters ("!!!!", "hahaha", "\n\n\n").
RUN_FLOOD_CHARS = 16
RUN_UNIT = 4
RUN_CHUNK = 4  # flood tokens span at least this many characters, so an 80-character "====" rule stays 20 tokens
NEWLINE_FLOOD = 8  # a whitespace run with this many line breaks is a blank-line flood: one token per break


def flood_tail(run: str, longest: int = RUN_UNIT) -> tuple[int, int]:
    """(where the longest stretch at the end of ``run`` that repeats one unit begins, the unit's length).

    The unit has at most ``longest`` characters; its last copy may be cut short. A run with no
    such stretch of two copies or more gives ``(len(run), 0)``.

    >>> flood_tail("Wowwwwww"), flood_tail("hahahah"), flood_tail("hello")
    ((2, 1), (0, 2), (5, 0))
    """
    best_at, best_period = len(run), 0
    for period in range(1, min(longest, len(run) // 2) + 1):
        at = len(run) - period
        while at > 0 and run[at - 1] == run[at - 1 + period]:
            at -= 1
        if len(run) - at >= 2 * period and at < best_at:
            best_at, best_period = at, period
    return best_at, best_period


def _run_tokens(run: str, offset: int) -> list[tuple[str, int]]:
    """One run of word characters, punctuation or whitespace as tokens (see ``split_words``)."""
    if run.isspace():
        if run.count("\n") < NEWLINE_FLOOD:
            return []  # ordinary spacing separates tokens and is not one
        # One token per break; the spaces around them are spacing, as everywhere else.
        return [("\n", offset + at) for at, ch in enumerate(run) if ch == "\n"]
    if len(run) < RUN_FLOOD_CHARS:
        return [(run, offset)]
    at, period = flood_tail(run)
    if len(run) - at < RUN_FLOOD_CHARS:
        return [(run, offset)]
    chunk = period * -(-RUN_CHUNK // period)
    head = [(run[:at], offset)] if at else []
    return head + [(run[i:i + chunk], offset + i) for i in range(at, len(run), chunk)]


def split_words(text: str) -> list[tuple[str, int]]:
    """The simple deterministic tokenizer: runs of word characters, runs of punctuation.

    Whitespace separates tokens and is dropped, so 'a  b' and 'a\\nb' tokenize alike. Floods,
    which a model writes one token at a time but which are one run here, are split so the
    guard can see them repeat: a run of at least 16 characters repeating a unit of at most 4
    ("!!!!!!...", "hahaha...", "noooooo...": its flood part) becomes tokens of 4 or so characters, and whitespace
    with 8 or more line breaks becomes one token per break ("\\n\\n\\n..."). Words, numbers,
    short runs ("...", "!!!") and ordinary line breaks are as before.
    Returns (token, char_offset) pairs.

    >>> split_words("Wait, let's see...")
    [('Wait', 0), (',', 4), ('let', 6), ("'", 9), ('s', 10), ('see', 12), ('...', 15)]
    >>> [token for token, _ in split_words("no" + "!" * 18)]
    ['no', '!!!!', '!!!!', '!!!!', '!!!!', '!!']
    """
    tokens: list[tuple[str, int]] = []
    for match in _WORD.finditer(text):
        tokens.extend(_run_tokens(match.group(), match.start()))
    return tokens


def word_token_ids(text: str) -> list[tuple[int, int]]:
    """``split_words`` with each distinct token mapped to an id (in order of first appearance)."""
    vocab: dict[str, int] = {}
    return [(vocab.setdefault(word, len(vocab)), offset) for word, offset in split_words(text)]


def detect_text(text: str, config: LoopGuardConfig | None = None,
                tokenize: Tokenize | None = None) -> LoopEvent | None:
    """Run the detector over a finished text (e.g. from logs); char offsets are filled in."""
    pairs = (tokenize or word_token_ids)(text)
    event = LoopDetector(config).feed(token_id for token_id, _ in pairs)
    if event is None:
        return None
    return LoopEvent(event.kind, event.period, event.start, event.fired_at,
                     start_char=pairs[event.start][1], fired_char=pairs[event.fired_at][1])
