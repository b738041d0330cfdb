"""Strict and loose scoring of one response, and the accuracies of a set of scored items.

Strict: the response as written must follow each instruction. Loose (the official upper bound):
an instruction counts as followed when any of eight variants follows it - the response, and the
response with its first line, its last line or both removed, each with and without ``*``
characters (markdown emphasis that breaks exact checks).

Example::

    >>> record = {"prompt": "...", "instruction_id_list": ["punctuation:no_comma"],
    ...           "kwargs": [{}]}
    >>> score_item(record, "Sure, here it is:\\nNo commas")["follow_all_loose"]
    True
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from botpsy.eval.instructions.registry import is_skipped, run_check


def loose_variants(response: str) -> list[str]:
    """The eight texts the loose score tries, in the official order."""
    lines = response.split("\n")
    without_first = "\n".join(lines[1:]).strip()
    without_last = "\n".join(lines[:-1]).strip()
    without_both = "\n".join(lines[1:-1]).strip()
    variants = [response, response.replace("*", "")]
    variants += [without_first, without_last, without_both]
    variants += [text.replace("*", "") for text in (without_first, without_last, without_both)]
    return variants


def _follows(instruction_id: str, text: str, kwargs: dict, errors: dict[str, str]) -> bool:
    """One check of one text; an empty text never follows, a checker error counts as not
    followed and is recorded (so a bad response cannot stop a whole evaluation)."""
    if not text.strip():
        return False
    try:
        return bool(run_check(instruction_id, text, kwargs))
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as error:
        errors[instruction_id] = f"{type(error).__name__}: {error}"
        return False


def score_item(record: dict[str, Any], response: str) -> dict[str, Any]:
    """Score ``response`` against a benchmark record (``instruction_id_list`` and ``kwargs``).

    Returns per-instruction ``strict`` and ``loose`` verdicts (None for a skipped instruction),
    ``follow_all_strict``/``follow_all_loose`` over the instructions that were scored, the
    ``skipped`` ids and any checker ``errors``.
    """
    ids = record["instruction_id_list"]
    all_kwargs = record.get("kwargs") or [{} for _ in ids]
    errors: dict[str, str] = {}
    strict, loose = [], []
    variants = loose_variants(response)
    for instruction_id, kwargs in zip(ids, all_kwargs):
        if is_skipped(instruction_id):
            strict.append(None)
            loose.append(None)
            continue
        strict.append(_follows(instruction_id, response, kwargs, errors))
        loose.append(any(_follows(instruction_id, text, kwargs, errors) for text in variants))
    skipped = [i for i, verdict in zip(ids, strict) if verdict is None]
    return {
        "instruction_id_list": ids,
        "strict": strict,
        "loose": loose,
        "follow_all_strict": all(v for v in strict if v is not None),
        "follow_all_loose": all(v for v in loose if v is not None),
        "skipped": skipped,
        "errors": errors,
    }


def aggregate(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """Prompt-level and instruction-level strict/loose accuracy.

    Prompt-level accuracy is over the items with no skipped instruction; instruction-level
    accuracy is over the scored instructions. Skipped instructions are counted per id.
    ``by_group`` is the strict instruction-level accuracy per instruction group (the id's part
    before the colon: ``detectable_format``, ``length_constraints``...), which says *what kind* of
    instruction a model stopped following.
    """
    complete = [s for s in scores if not s["skipped"]]
    verdicts = [(st, lo) for s in scores for st, lo in zip(s["strict"], s["loose"]) if st is not None]
    skipped = Counter(i for s in scores for i in s["skipped"])
    grouped: dict[str, list[bool]] = {}
    for s in scores:
        for instruction_id, verdict in zip(s["instruction_id_list"], s["strict"]):
            if verdict is not None:
                grouped.setdefault(instruction_id.split(":")[0], []).append(verdict)

    def share(values: list[bool]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    return {
        "items": len(scores),
        "items_scored": len(complete),
        "instructions_scored": len(verdicts),
        "instructions_skipped": sum(skipped.values()),
        "skipped_by_id": dict(sorted(skipped.items())),
        "prompt_strict": share([s["follow_all_strict"] for s in complete]),
        "prompt_loose": share([s["follow_all_loose"] for s in complete]),
        "instruction_strict": share([st for st, _ in verdicts]),
        "instruction_loose": share([lo for _, lo in verdicts]),
        "by_group": {group: {"instructions": len(v), "strict": share(v)} for group, v in sorted(grouped.items())},
    }
