"""The instruction registry: every IFEval and IFBench instruction id -> its checker.

A checker is a plain function ``check(response, **kwargs) -> bool`` whose keyword arguments are
the instruction's ``kwargs`` from the benchmark file (``None`` values dropped). Instructions that
botpsy cannot score faithfully offline are registered with a ``skipped`` reason instead of a
checker; scoring counts them as skipped, never as followed or failed.

Example::

    >>> run_check("punctuation:no_comma", "No commas here.", {})
    True
    >>> INSTRUCTIONS["words:start_verb"].skipped is not None
    True
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from botpsy.eval.instructions import ifbench_checks, ifbench_format, ifeval_checks


@dataclass(frozen=True)
class Instruction:
    """One instruction type: its id, its checker, or why it is skipped."""

    id: str
    check: Callable[..., bool] | None
    skipped: str | None = None

    @property
    def description(self) -> str:
        """First line of the checker's docstring, or the skip reason."""
        if self.check is None:
            return f"skipped: {self.skipped}"
        return (self.check.__doc__ or self.id).strip().splitlines()[0]


SKIPPED = {
    "words:start_verb": (
        "needs NLTK's averaged-perceptron POS tagger (a trained model, not available offline); "
        "no rule reproduces its tags for sentence-initial capitalised words"
    ),
}


def _build() -> dict[str, Instruction]:
    table: dict[str, Instruction] = {}
    for checks in (ifeval_checks.CHECKS, ifbench_checks.CHECKS, ifbench_format.CHECKS):
        for instruction_id, check in checks.items():
            if instruction_id in table:
                raise RuntimeError(f"instruction {instruction_id!r} registered twice")
            table[instruction_id] = Instruction(instruction_id, check)
    for instruction_id, reason in SKIPPED.items():
        table[instruction_id] = Instruction(instruction_id, None, reason)
    return table


INSTRUCTIONS: dict[str, Instruction] = _build()


class UnknownInstruction(KeyError):
    """An instruction id that no checker is registered for."""


def clean_kwargs(instruction_id: str, kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """Drop ``None`` values, turn whole floats (IFBench stores ``N: 12.0``) into ints, and
    reject arguments the checker does not take, naming them."""
    cleaned = {}
    for name, value in (kwargs or {}).items():
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        cleaned[name] = value
    instruction = INSTRUCTIONS[instruction_id]
    if instruction.check is not None:
        accepted = set(inspect.signature(instruction.check).parameters) - {"response"}
        unknown = sorted(set(cleaned) - accepted)
        if unknown:
            raise ValueError(f"{instruction_id}: unexpected arguments {unknown}")
    return cleaned


def is_skipped(instruction_id: str) -> bool:
    """True when botpsy registers the instruction but cannot score it offline."""
    if instruction_id not in INSTRUCTIONS:
        raise UnknownInstruction(instruction_id)
    return INSTRUCTIONS[instruction_id].check is None


def run_check(instruction_id: str, response: str, kwargs: dict[str, Any] | None) -> bool | None:
    """Whether ``response`` follows the instruction, or None when the instruction is skipped."""
    if instruction_id not in INSTRUCTIONS:
        raise UnknownInstruction(instruction_id)
    instruction = INSTRUCTIONS[instruction_id]
    if instruction.check is None:
        return None
    return bool(instruction.check(response, **clean_kwargs(instruction_id, kwargs)))
