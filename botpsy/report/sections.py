"""The report's parts about how the run was made: timings, data, training curves, release formats.

Each section is a function ``(page) -> list[str]`` of markdown lines. It opens with the line
naming the command and file its numbers come from, prints only numbers read from those files
(shares, totals and means are computed from them), and shows a "not run" line where a file is
absent. The results parts (evaluation, device card, agent) are in ``results.py``.

Example::

    page = Page(RunFolder(Path("runs/speedrun")), Path("runs/speedrun/report"))
    print("\\n".join(run_summary(page)))
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botpsy.bench.card import md_table
from botpsy.eval.report import dig, pct
from botpsy.report import plots
from botpsy.report.folder import RunFolder

# Training stages in recipe order; any other folder holding a curves.jsonl follows them.
STAGE_ORDER = ["sft", "teachers", "mopd", "rl1", "rl1-nopenalty", "rl2"]
SPLIT_ORDER = ["train", "dev", "test"]


@dataclass
class Page:
    """What the sections share: the run folder, and the folder of report.md, where plots go."""

    run: RunFolder
    out_dir: Path
    plots: list[Path] = field(default_factory=list)

    def link(self, path: Path) -> str:
        """``path`` relative to the report, for markdown links."""
        return Path(os.path.relpath(path, self.out_dir)).as_posix()

    def image(self, path: Path, alt: str) -> str:
        self.plots.append(path)
        return f"![{alt}]({self.link(path)})"


def fmt(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits, "-" for none.

    >>> fmt(0.9007826745400066), fmt(1079952), fmt(None)
    ('0.9008', '1079952', '-')
    """
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def show_value(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)


# ---- 1. run summary ------------------------------------------------------------------------------


def run_summary(page: Page) -> list[str]:
    run = page.run
    times, settings = f"{run.kind}.json", f"{run.kind}_config.json"
    lines = [run.source(times, settings), ""]
    timings, note = run.read(times)
    lines += note or timing_table(timings) + untimed_lines(run, timings)
    config, note = run.read(settings)
    lines += ["", f"{run.kind.capitalize()} config (as of the last `botpsy {run.kind}` call on this folder):", ""]
    lines += note or md_table(["setting", "value"], [[f"`{k}`", show_value(v)] for k, v in config.items()])
    return lines


def timing_table(timings: dict[str, dict]) -> list[str]:
    total = sum(t["seconds"] for t in timings.values())
    rows = [[name, f"{t['seconds']:.1f}", pct(t["seconds"] / total) if total else "-"]
            for name, t in timings.items()]
    rows.append(["**total (stages timed here)**", f"{total:.1f}", "100%" if total else "-"])
    return md_table(["stage", "seconds", "share of total"], rows)


def untimed_lines(run: RunFolder, timings: dict[str, dict]) -> list[str]:
    """Stages whose output is in the folder but that ``<kind>.json`` has no time for."""
    lines = [f"- `{step.name}`: its output {run.path(step.output)} is here, but `{run.kind}.json` has no time for it "
             f"(it ran outside `botpsy {run.kind}`)" for step in run.steps
             if step.name not in timings and step.name != "report" and run.exists(step.output)]
    return ["", "Not timed:", ""] + lines if lines else []


# ---- 2. data ------------------------------------------------------------------------------------------


def data_summary(page: Page) -> list[str]:
    run = page.run
    meta, note = run.read("data/meta.json")
    lines = [run.source("data/meta.json"), ""] + (note or split_table(meta["splits"]))
    lines += [""] + task_lines(run)
    # The pretrained student keeps its base's tokenizer; only the tiny recipe trains one.
    return lines + ([""] + tokenizer_lines(run) if run.kind == "speedrun" else [])


def ordered_splits(names) -> list[str]:
    return [s for s in SPLIT_ORDER if s in names] + sorted(s for s in names if s not in SPLIT_ORDER)


def split_table(splits: dict[str, dict]) -> list[str]:
    """Examples per kind (rows) and split (columns), the totals and the share with thinking on."""
    names = ordered_splits(splits)
    kinds = sorted({kind for split in splits.values() for kind in split.get("kinds", {})})
    rows = [[kind] + [fmt(splits[s].get("kinds", {}).get(kind)) for s in names] for kind in kinds]
    rows.append(["**examples**"] + [fmt(splits[s]["examples"]) for s in names])
    rows.append(["thinking on"] + [thinking(splits[s]) for s in names])
    return md_table(["kind"] + names, rows)


def thinking(split: dict) -> str:
    on, total = split.get("thinking_on"), split.get("examples")
    if on is None:
        return "-"
    return f"{on} ({pct(on / total)})" if total else str(on)


def task_lines(run: RunFolder) -> list[str]:
    files = sorted(run.path("tasks").glob("*.jsonl")) if run.path("tasks").is_dir() else []
    if not files:
        return [run.not_run("tasks/test.jsonl")]
    counts = {f.stem: count_lines(f) for f in files}
    rows = [[split, str(counts[split]), fmt(seed_of(run, split))] for split in ordered_splits(counts)]
    source = run.source(*[f"tasks/{split}.jsonl" for split in ordered_splits(counts)])
    return [source, ""] + md_table(["task split", "tasks", "seed"], rows)


def count_lines(path: Path) -> int:
    with path.open() as handle:
        return sum(1 for line in handle if line.strip())


def seed_of(run: RunFolder, split: str) -> Any:
    rel = f"tasks/config.{split}.json"
    config, _ = run.read(rel) if run.exists(rel) else (None, [])
    return dig(config, "seed")


def tokenizer_lines(run: RunFolder) -> list[str]:
    meta, note = run.read("tokenizer/meta.json")
    if note:
        return [run.source("tokenizer/meta.json"), ""] + note
    return [run.source("tokenizer/meta.json"), "",
            (f"- Tokenizer: vocabulary {fmt(meta.get('vocab_size'))}, {fmt(meta.get('chars_per_token'))} characters "
             f"per token over its corpus of {fmt(meta.get('corpus_lines'))} lines")]


# ---- 3. training ------------------------------------------------------------------------------------


def stage_order(stage: str) -> tuple[int, str]:
    top = stage.split("/")[0]
    return (STAGE_ORDER.index(top) if top in STAGE_ORDER else len(STAGE_ORDER), stage)


def training_stages(run: RunFolder) -> list[str]:
    """Folders with ``curves.jsonl`` (``teachers/<group>`` included), and training stages with a meta.json."""
    found = {p.parent.relative_to(run.root).as_posix()
             for pattern in ("*/curves.jsonl", "*/*/curves.jsonl", "*/meta.json", "teachers/*/meta.json")
             for p in run.root.glob(pattern)}
    return sorted((s for s in found if s.split("/")[0] in STAGE_ORDER or run.exists(f"{s}/curves.jsonl")),
                  key=stage_order)


def training(page: Page) -> list[str]:
    run = page.run
    stages = training_stages(run)
    lines = model_lines(run) + [""]
    if "sft" not in stages:
        lines += [run.not_run("sft/meta.json"), ""]
    for stage in stages:
        lines += stage_curves(page, stage)
    return lines + final_metrics(run, stages)


def model_lines(run: RunFolder) -> list[str]:
    if run.kind == "student":
        return base_lines(run)
    meta, note = run.read("base/meta.json")
    if note:
        return [run.source("base/meta.json"), ""] + note
    spec = meta.get("spec", {})
    line = (f"- Model: preset `{meta.get('preset')}`, `{meta.get('model_type')}`, hidden size "
            f"{fmt(spec.get('hidden_size'))}, {fmt(spec.get('num_hidden_layers'))} layers")
    sft, _ = run.read("sft/meta.json") if run.exists("sft/meta.json") else (None, [])
    if dig(sft, "parameters") is not None:
        line += f"; {sft['parameters']:,} parameters (`sft/meta.json`)"
    return [run.source("base/meta.json"), "", line]


def base_lines(run: RunFolder) -> list[str]:
    """The pulled pretrained bases (student and peer) and the SFT adapter's size."""
    bases, note = run.read("bases/bases.json")
    lines = [run.source("bases/bases.json"), ""]
    if note:
        return lines + note
    lines += [f"- {role}: `{entry.get('name')}` at {entry.get('path')}" for role, entry in bases.items()]
    sft, _ = run.read("sft/meta.json") if run.exists("sft/meta.json") else (None, [])
    if dig(sft, "trainable_parameters") is not None and dig(sft, "parameters") is not None:
        lines.append(f"- SFT adapter: {sft['trainable_parameters']:,} trained parameters of {sft['parameters']:,} "
                     "(`sft/meta.json`)")
    return lines


def stage_curves(page: Page, stage: str) -> list[str]:
    run = page.run
    rel = f"{stage}/curves.jsonl"
    lines = [f"### {stage}", "", run.source(rel), ""]
    if not run.exists(rel):
        return lines + [f"_No curves.jsonl in {run.path(stage)}._", ""]
    records, note = run.read(rel)
    if note:
        return lines + note + [""]
    panels = plots.curve_series(records)
    if not panels:
        return lines + [f"_{run.path(rel)} holds no numeric series._", ""]
    path = plots.curves_plot(stage, panels, page.out_dir / f"curves_{stage.replace('/', '_')}.png")
    return lines + [page.image(path, f"{stage} curves"), ""] + last_values(panels) + [""]


def last_values(panels: plots.Series) -> list[str]:
    """Per series: points logged, the last value and its step, and the mean of the last ten."""
    rows = []
    for panel in plots.ordered(panels):
        for line, (steps, values) in panels[panel].items():
            name = panel if line == panel else f"{panel}: {line}"
            rows.append([name, str(len(values)), fmt(steps[-1]), fmt(float(values[-1])),
                         fmt(statistics.fmean(values[-10:]))])
    return md_table(["series", "points", "last step", "last value", "mean of last 10"], rows)


SINGLE_CALL = [("parse", "parse_rate"), ("schema-valid", "schema_valid_rate"), ("exact", "exact_call_rate")]


def _choice(test: dict) -> str:
    """Right offered tool picked by likelihood, then with another request swapped in, and chance
    (``dev_eval.tool_choice``)."""
    if test.get("tool_choice_rate") is None:
        return "-"
    return (f"{pct(test['tool_choice_rate'])} / {pct(test.get('tool_choice_rate_other_request'))}"
            f" ({pct(test.get('chance_rate'))})")


def final_metrics(run: RunFolder, stages: list[str]) -> list[str]:
    """Each stage's final dev figures and test single-call accuracy, from its meta.json."""
    rows, sources, notes = [], [], []
    for stage in stages:
        rel = f"{stage}/meta.json"
        meta, note = run.read(rel) if run.exists(rel) else (None, [])
        notes += note
        if meta and ("dev" in meta or "test_single_call" in meta):
            sources.append(rel)
            dev, test = meta.get("dev") or {}, meta.get("test_single_call") or {}
            rows.append([stage, fmt(dev.get("loss")), fmt(dev.get("call_examples"))]
                        + [pct(dev.get(key)) for _, key in SINGLE_CALL]
                        + [fmt(test.get("call_examples"))] + [pct(test.get(key)) for _, key in SINGLE_CALL]
                        + [_choice(test)])
    if not rows:
        return notes
    header = (["stage", "dev loss", "dev calls"] + [f"dev {name}" for name, _ in SINGLE_CALL]
              + ["test single calls"] + [f"test {name}" for name, _ in SINGLE_CALL] + ["test tool choice / with another request (chance)"])
    return (["### Final dev metrics and test single-call accuracy", "", run.source(*sources), ""]
            + md_table(header, rows) + ([""] + notes if notes else []))


# ---- 4. release formats -------------------------------------------------------------------------


def release(page: Page) -> list[str]:
    run = page.run
    parity, note = run.read("gguf/parity.json")
    lines = [run.source("gguf/parity.json"), ""] + (note or parity_lines(parity))
    meta, note = run.read("gguf/meta.json")
    return lines + ["", run.source("gguf/meta.json"), ""] + (note or size_lines(meta))


def parity_lines(parity: dict) -> list[str]:
    rows = []
    for name, result in parity["formats"].items():
        top1, raw = result.get("top1_agreement"), result.get("top1_agreement_raw")
        top1_text = pct(top1) + (f" ({pct(raw)} raw)" if raw is not None and raw != top1 else "")
        rows.append([name, fmt(result.get("positions")), top1_text, f"{result['mean_kl']:.2e}",
                     fmt(result.get("max_abs_logit_diff"), 3), pct(result.get("greedy_identical")),
                     thresholds(result.get("thresholds") or {}), "yes" if result.get("passed") else "**no**"])
    header = ["format", "positions", "top-1", "mean KL", "max abs Δlogit", "greedy identical", "thresholds", "pass"]
    missed = parity.get("missed") or []
    verdict = "all formats passed" if parity.get("passed") else f"**failed**: {'; '.join(map(str, missed)) or 'see the table'}"
    return md_table(header, rows) + ["", f"Parity against `{parity.get('checkpoint')}`: {verdict}."]


def thresholds(limits: dict) -> str:
    """``top-1 >= 99.0%, KL <= 0.001, greedy identical`` from a format's thresholds."""
    parts = []
    if limits.get("min_top1") is not None:
        parts.append(f"top-1 ≥ {pct(limits['min_top1'])}")
    if limits.get("max_kl") is not None:
        parts.append(f"KL ≤ {limits['max_kl']:g}")
    if limits.get("greedy_identical"):
        parts.append("greedy identical")
    return ", ".join(parts) or "-"


def size_lines(meta: dict) -> list[str]:
    rows = [[name, f"`{entry['file']}`", f"{entry['bytes'] / 1e6:.1f} MB", f"{entry['bytes']:,}",
             ", ".join(f"{t} {n}" for t, n in entry.get("tensor_types", {}).items())]
            for name, entry in meta["files"].items()]
    notices = [f"- notice: {n}" for n in meta.get("notices") or []]
    return md_table(["format", "file", "size", "bytes", "tensor types"], rows) + (["", *notices] if notices else [])
