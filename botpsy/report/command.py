"""``botpsy report``: stitch a run folder into ``report.md``, with its plots beside it.

Reads what each stage left in the run folder (``speedrun.json``, ``data/meta.json``,
``<stage>/curves.jsonl`` for SFT and any later training stage, ``gguf/parity.json``,
``eval/summary.json``, ``bench/card.json``, ``agent/summary.json``) and writes one markdown
file whose every part names the command and file its numbers come from. A stage that has not
run gets a line saying how to produce it; a file that cannot be read is named in a problem
line (and listed at the top) while the rest of the report still renders. Nothing is
measured or estimated here: every number is read from a file.

Examples::

    botpsy report --run runs/speedrun                 # writes runs/speedrun/report/report.md + PNGs
    botpsy report --run runs/try1 --out /tmp/try1/report.md --json
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from botpsy.output import emit
from botpsy.report import results, sections
from botpsy.report.folder import RunFolder
from botpsy.report.sections import Page


@dataclass
class ReportConfig:
    """Stitch a run folder into report.md with plots (PNG) beside it."""

    run: str = field(default="runs/speedrun", metadata={"help": "Run folder to report on."})
    out: str = field(default="", metadata={"help": "Markdown file to write (default: RUN/report/report.md); plots go beside it."})
    json: bool = field(default=False, metadata={"help": "Print what was written (report, plots, not-run stages, problems) as JSON."})


SECTIONS: list[tuple[str, Callable[[Page], list[str]]]] = [
    ("Run summary", sections.run_summary),
    ("Data", sections.data_summary),
    ("Training curves", sections.training),
    ("Release formats", sections.release),
    ("Evaluation", results.evaluation),
    ("Device report card", results.device_card),
    ("Agent run", results.agent),
]
# Parts a run kind does not have: the student run has no separate agent step (its device tasks are the eval).
LEFT_OUT = {"student": {"Agent run"}}


def sections_for(kind: str) -> list[tuple[str, Callable[[Page], list[str]]]]:
    return [(title, render) for title, render in SECTIONS if title not in LEFT_OUT.get(kind, set())]

# A file that parses but lacks a field, or holds one of another type, surfaces as one of these.
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError)


def render_section(page: Page, title: str, render: Callable[[Page], list[str]]) -> list[str]:
    """The section's lines, or one problem line naming the files it read when they lack what it needs."""
    page.run.touched = []
    try:
        return render(page)
    except SHAPE_ERRORS as exc:
        files = ", ".join(dict.fromkeys(page.run.touched)) or str(page.run.root)
        return [page.run.problem(f"the {title.lower()} section could not be rendered from {files}: a field is missing "
                                 f"or has an unexpected type ({type(exc).__name__}: {exc})")]


def build_report(run: RunFolder, out: Path) -> tuple[str, Page]:
    """The markdown text for ``run``; plots are written into ``out``'s folder as a side effect."""
    page = Page(run, out.parent)
    body: list[str] = []
    for number, (title, render) in enumerate(sections_for(run.kind), 1):
        body += [f"## {number}. {title}", ""] + render_section(page, title, render) + [""]
    head = [f"# botpsy report: `{run.root}`", "",
            (f"Written by `botpsy report` at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}. Every number "
             "below is read from the file named at the top of its part; nothing is measured or estimated here."), ""]
    if run.problems:
        head += ["**Problems found** (the parts that need these files show what they could):", ""]
        head += [f"- {problem}" for problem in run.problems] + [""]
    return "\n".join(head + body).rstrip() + "\n", page


def write_report(run_dir: Path, out: Path) -> dict:
    run = RunFolder(run_dir)
    text, page = build_report(run, out)
    out.write_text(text)
    return {"report": str(out), "plots": [str(p) for p in page.plots], "sections": [title for title, _ in sections_for(run.kind)],
            "not_run": [str(run.path(rel)) for rel in run.missing], "problems": run.problems}


def human(result: dict) -> str:
    lines = [f"wrote {result['report']} with {len(result['plots'])} plots"]
    lines += [f"not run: {path}" for path in result["not_run"]]
    return "\n".join(lines + [f"problem: {problem}" for problem in result["problems"]])


def main(config: ReportConfig) -> int:
    run_dir = Path(config.run)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run folder {run_dir} does not exist; make one with `botpsy speedrun --run {run_dir}` "
                                f"or `botpsy student --run {run_dir}`")
    out = Path(config.out) if config.out else run_dir / "report" / "report.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = write_report(run_dir, out)
    emit(result, config.json, human)
    if result["problems"] and not config.json:
        print(f"botpsy report: {len(result['problems'])} file(s) could not be read; see the top of {out}", file=sys.stderr)
    return 0
