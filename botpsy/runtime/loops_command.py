"""``botpsy loops``: run the loop guard over a file of generations and report the loop rate.

Examples::

    botpsy loops generations.jsonl            # lines with a loop, bad lines, overall loop rate
    botpsy loops generations.jsonl --json     # every line's findings as JSON
    cat generations.jsonl | botpsy loops -

Each line is one JSON object with a ``text`` string and optionally a ``reasoning`` (or
``reasoning_content``) string; without one, whatever in ``text`` comes before ``</think>``
(after ``<think>``, if there is one) is taken as the reasoning. Each stream gets its own detector. Findings give the
token index (simple word/punctuation splitter, see ``loopguard.split_words``) and the char
offset into the field they were found in. Lines that are not JSON, not objects, or have
no ``text`` string are reported as bad lines with the reason; the other lines are still
scored. Exit code: 0, or 1 when any line was bad (the report is printed either way).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator

from botpsy.config import ConfigError
from botpsy.output import emit, table
from botpsy.runtime.loopguard import LoopEvent, LoopGuardConfig, detect_text

_DEFAULT = LoopGuardConfig()


@dataclass
class LoopsConfig:
    """Run the loop guard over a JSONL file of generations; report per line and the overall loop rate."""

    path: str = field(metadata={"help": "JSONL file, one generation per line ({\"text\": ..., \"reasoning\": ...}); "
                                        "- reads stdin.", "positional": True})
    json: bool = field(default=False, metadata={"help": "Print every line's findings and the summary as JSON."})
    all_lines: bool = field(default=False, metadata={"help": "Human view: list every line, not only loops and bad lines."})
    min_repeats: int = field(default=_DEFAULT.min_repeats, metadata={"help": "Copies back to back that make a loop."})
    min_loop_tokens: int = field(default=_DEFAULT.min_loop_tokens,
                                 metadata={"help": "Tokens a repeated tail must span to be a loop."})
    max_period: int = field(default=_DEFAULT.max_period, metadata={"help": "Longest cycle looked for, in tokens."})
    variation: float = field(default=_DEFAULT.variation,
                             metadata={"help": "Fraction of tokens that may differ between copies."})
    stall_window: int = field(default=_DEFAULT.stall_window,
                              metadata={"help": "Window for stall (no-progress) detection in tokens; 0 disables."})

    def guard_config(self) -> LoopGuardConfig:
        return LoopGuardConfig(min_repeats=self.min_repeats, min_loop_tokens=self.min_loop_tokens,
                               max_period=self.max_period, variation=self.variation, stall_window=self.stall_window)


def main(config: LoopsConfig) -> int:
    guard = config.guard_config()
    with _open(config.path) as handle:
        lines = [scan_line(number, raw, guard) for number, raw in _numbered_lines(handle)]
    report = {"summary": summarise(lines), "lines": lines}
    emit(report, config.json, lambda r: _human(r, config.all_lines))
    return 1 if report["summary"]["bad_lines"] else 0


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise ConfigError(f"generations file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"generations file {path} is a directory") from None


def _numbered_lines(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) of every non-blank line; decoding is per line, so one bad line stays one."""
    for number, raw in enumerate(handle, 1):
        if raw.strip():
            yield number, raw


def scan_line(number: int, raw: bytes, guard: LoopGuardConfig) -> dict[str, Any]:
    """One line's findings, or ``{"line", "error"}`` saying why the line could not be read."""
    record = _parse(raw)
    if isinstance(record, str):
        return {"line": number, "error": record}
    found = {"line": number, "loop": False}
    for name, (stream, base) in zip(("reasoning", "text"), record):
        if stream is None:
            found[name] = None
            continue
        event = detect_text(stream, guard)
        found[name] = _finding(event, base) if event else {"loop": False}
        found["loop"] = found["loop"] or event is not None
    return found


def _parse(raw: bytes) -> tuple[tuple[str | None, int], tuple[str, int]] | str:
    """((reasoning, its char offset), (answer text, its char offset)), or an error message.

    Offsets locate each stream in the field it came from (a reasoning split out of ``text``
    is located in ``text``).
    """
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"not UTF-8 ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(obj, dict):
        return f"not a JSON object (found {type(obj).__name__})"
    text = obj.get("text")
    if not isinstance(text, str):
        return "no \"text\" string" if text is None else f"\"text\" is {type(text).__name__}, not a string"
    reasoning = obj.get("reasoning", obj.get("reasoning_content"))
    if reasoning is not None and not isinstance(reasoning, str):
        return f"\"reasoning\" is {type(reasoning).__name__}, not a string"
    if reasoning is not None:
        return (reasoning, 0), (text, 0)
    reasoning, reasoning_at, answer_at = split_think(text)
    return (reasoning, reasoning_at), (text[answer_at:], answer_at)


def split_think(text: str) -> tuple[str | None, int, int]:
    r"""Reasoning closed by ``</think>`` -> (reasoning, where it starts, where the answer starts).

    The opening ``<think>`` is optional: with thinking on, the prompt itself ends inside it.

    >>> split_think("<think>hmm</think>Hi")
    ('hmm', 7, 18)
    >>> split_think("hmm\n</think>\n\nHi")
    ('hmm\n', 0, 12)
    >>> split_think("Hi")
    (None, 0, 0)
    """
    close_at = text.find("</think>")
    if close_at < 0:
        return None, 0, 0
    open_at = text.find("<think>", 0, close_at)
    begin = open_at + len("<think>") if open_at >= 0 else 0
    return text[begin:close_at], begin, close_at + len("</think>")


def _finding(event: LoopEvent, char_base: int) -> dict[str, Any]:
    return {"loop": True, "kind": event.kind, "period": event.period, "start_token": event.start,
            "fired_at_token": event.fired_at, "start_char": char_base + (event.start_char or 0),
            "fired_at_char": char_base + (event.fired_char or 0)}


def summarise(lines: list[dict[str, Any]]) -> dict[str, Any]:
    valid = [line for line in lines if "error" not in line]
    with_reasoning = [line for line in valid if line["reasoning"] is not None]
    reasoning_loops = sum(line["reasoning"]["loop"] for line in with_reasoning)
    text_loops = sum(line["text"]["loop"] for line in valid)
    looped = sum(line["loop"] for line in valid)
    rate = lambda count, total: count / total if total else None
    return {
        "lines": len(lines),
        "valid_lines": len(valid),
        "bad_lines": len(lines) - len(valid),
        "lines_with_loop": looped,
        "loop_rate": rate(looped, len(valid)),
        "lines_with_reasoning": len(with_reasoning),
        "reasoning_loops": reasoning_loops,
        "reasoning_loop_rate": rate(reasoning_loops, len(with_reasoning)),
        "text_loops": text_loops,
        "text_loop_rate": rate(text_loops, len(valid)),
    }


def _human(report: dict[str, Any], all_lines: bool) -> str:
    rows = []
    for line in report["lines"]:
        if "error" in line:
            continue
        for name in ("reasoning", "text"):
            found = line[name]
            if found and (found["loop"] or all_lines):
                rows.append({"line": line["line"], "field": name, "kind": found.get("kind", "-"),
                             "period": found.get("period", "-"), "token": found.get("start_token", "-"),
                             "char": found.get("start_char", "-")})
    out = [table(rows) if rows else "no loops found"]
    bad = [line for line in report["lines"] if "error" in line]
    if bad:
        out += ["", "bad lines:"] + [f"  line {line['line']}: {line['error']}" for line in bad]
    s = report["summary"]
    pct = lambda value: "n/a" if value is None else f"{100 * value:.1f}%"
    out += ["", f"lines {s['lines']} ({s['valid_lines']} valid, {s['bad_lines']} bad); "
                f"loop in {s['lines_with_loop']} ({pct(s['loop_rate'])}): reasoning {s['reasoning_loops']} of "
                f"{s['lines_with_reasoning']} ({pct(s['reasoning_loop_rate'])}), text {s['text_loops']} of "
                f"{s['valid_lines']} ({pct(s['text_loop_rate'])})"]
    return "\n".join(out)
