"""Reading a run folder for the report: every file through one place that knows who wrote it.

A file that is absent becomes a "not run" line saying which command makes it; a file that is
not valid JSON becomes a problem line naming the file (also collected in ``problems``), so one
broken stage never stops the rest of the report.

Example::

    run = RunFolder(Path("runs/speedrun"))
    meta, note = run.read("sft/meta.json")   # (dict, []) or (None, ["_Not run — ..._"])
    print(run.source("sft/meta.json"))       # _From `botpsy sft` → runs/speedrun/sft/meta.json_
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Run-folder path (a file, or a top-level folder) -> (the command that writes it, its run step).
PRODUCERS: dict[str, tuple[str, str | None]] = {
    "speedrun.json": ("botpsy speedrun", None),
    "speedrun_config.json": ("botpsy speedrun", None),
    "student.json": ("botpsy student", None),
    "student_config.json": ("botpsy student", None),
    "bases": ("botpsy models --pull", "bases"),
    "eval-quant": ("botpsy eval", "eval"),
    "eval-stages": ("botpsy eval", "stages-eval"),
    "tasks": ("botpsy tasks", "tasks"),
    "data": ("botpsy data", "data"),
    "tokenizer": ("botpsy tokenizer", "tokenizer"),
    "base": ("botpsy init", "init"),
    "sft": ("botpsy sft", "sft"),
    "gguf/parity.json": ("botpsy parity", "parity"),
    "gguf": ("botpsy export", "export"),
    "agent": ("botpsy solve", "agent"),
    "eval": ("botpsy eval", "eval"),
    "bench": ("botpsy bench", "bench"),
}


def producer(rel: str) -> tuple[str | None, str]:
    """The command that writes ``rel`` (None for a stage this report does not know) and its step name.

    >>> producer("gguf/parity.json"), producer("sft/curves.jsonl"), producer("mopd/meta.json")
    (('botpsy parity', 'parity'), ('botpsy sft', 'sft'), (None, 'mopd'))
    """
    top = rel.split("/")[0]
    command, step = PRODUCERS.get(rel) or PRODUCERS.get(top) or (None, top)
    return command, step or top


def run_kind(root: Path) -> str:
    """``student`` for a folder `botpsy student` made (the pretrained student), else ``speedrun``."""
    return "student" if any((root / f"student{suffix}").is_file() for suffix in (".json", "_config.json")) else "speedrun"


def steps_of(kind: str) -> list:
    """The steps of the command that makes a run folder of this kind."""
    if kind == "student":
        from botpsy.student import STEPS
    else:
        from botpsy.speedrun import STEPS
    return STEPS


class RunFolder:
    """One run folder; ``problems`` collects every file that could not be read.

    ``kind`` says which command made it (``speedrun``: the tiny recipe; ``student``: the pretrained
    student), which decides the run summary's files, the parts shown and how a missing stage is made.
    """

    def __init__(self, root: Path):
        self.root = root
        self.kind = run_kind(root)
        self.steps = steps_of(self.kind)
        self.problems: list[str] = []
        self.missing: list[str] = []  # run-folder paths reported as "not run"
        self.touched: list[str] = []  # files read since the last reset, named when a section fails
        self._read: dict[str, tuple[Any, list[str]]] = {}

    def path(self, rel: str) -> Path:
        return self.root / rel

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read(self, rel: str) -> tuple[Any, list[str]]:
        """``(data, [])`` for a readable JSON / JSONL file, else ``(None, [the line that says why])``."""
        self.touched.append(str(self.path(rel)))
        if rel not in self._read:  # each file is read (and a broken one reported) once
            self._read[rel] = self._load(rel)
        return self._read[rel]

    def _load(self, rel: str) -> tuple[Any, list[str]]:
        path = self.path(rel)
        if not path.is_file():
            return None, [self.not_run(rel)]
        try:
            text = path.read_text()
            data = [json.loads(line) for line in text.splitlines() if line.strip()] if rel.endswith(".jsonl") \
                else json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:  # json.JSONDecodeError is a ValueError
            return None, [self.problem(f"{path} is not valid JSON ({exc})", rel)]
        if rel.endswith(".json") and not isinstance(data, dict):
            return None, [self.problem(f"{path} holds a JSON {type(data).__name__}, not an object", rel)]
        return data, []

    def problem(self, message: str, rel: str | None = None) -> str:
        """Record ``message`` and return the report line for it (with how to rewrite the file)."""
        self.problems.append(message)
        again = f"; rerun `{self.how_to_make(rel)}` to rewrite it" if rel else ""
        return f"**Problem:** {message}{again}."

    def not_run(self, rel: str) -> str:
        if rel not in self.missing:
            self.missing.append(rel)
        return f"_Not run — produce it with `{self.how_to_make(rel)}` ({self.path(rel)} is absent)._"

    def how_to_make(self, rel: str) -> str:
        command, step = producer(rel)
        if step in {s.name for s in self.steps}:
            return f"botpsy {self.kind} --run {self.root} --only {step}"
        return command or f"the {step} stage"

    def source(self, *rels: str) -> str:
        """``_From `botpsy sft` → RUN/sft/meta.json; ..._``: which command wrote the files a part shows."""
        groups: dict[str, list[str]] = {}
        for rel in rels:
            command, _ = producer(rel)
            who = f"`{command}`" if command else f"the `{rel.rsplit('/', 1)[0]}` stage"
            groups.setdefault(who, []).append(str(self.path(rel)))
        return "_From " + "; ".join(f"{who} → {', '.join(paths)}" for who, paths in groups.items()) + "_"
