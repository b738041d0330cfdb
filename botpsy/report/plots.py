"""The report's plots (matplotlib, Agg: no display needed), one PNG each, written beside ``report.md``.

* ``curves_<stage>.png``: one panel per figure a stage logged in ``curves.jsonl``: train and
  dev loss together, then reward, KL, loop rate, reasoning tokens (each with its dev line when
  the stage logs one), per-domain dicts (one line per domain), nested evaluations (one panel per
  figure, one line per model and group) and whatever else the stage logs as numbers;
* ``eval_device.png``: device success and loop rate per evaluated model.

Example::

    panels = curve_series(records)                     # {"loss": {"train": ([1, 2], [8.3, 8.0])}, ...}
    curves_plot("sft", panels, Path("runs/speedrun/report/curves_sft.png"))
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

Series = dict[str, dict[str, tuple[list[float], list[float]]]]  # panel -> line -> (steps, values)

# Logged per step but not a training curve (the schedule and the machine's speed).
NOT_CURVES = {"step", "lr", "tokens_per_s", "epoch", "seconds", "elapsed_s"}
FIRST_PANELS = ["loss", "dev", "reward", "kl", "loop_rate", "reasoning_tokens"]
MAX_PANELS = 12


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display and in tests
    import matplotlib.pyplot as plt

    return plt


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_count(name: str) -> bool:
    """How many items a figure was computed over: a table fact, not a curve."""
    return name in ("n", "tasks", "items") or name.endswith("_examples")


def leaves(value: Any, path: tuple[str, ...] = ()):
    """``(path, number)`` for every number in a nested dict (``path`` of keys below the top)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, path + (str(key),))
    elif is_number(value) and path and not is_count(path[-1]):
        yield path, value


def route(key: str, value: Any, top_keys: set[str]):
    """``(panel, line, number)`` for one field of one record.

    A plain number is its own panel; a dict (per domain, per group) is one panel with a line per
    entry, or, nested deeper, one panel per final key with a line per path (``student device``).
    ``dev`` figures join the panel of the training figure of the same name as a "dev" line.
    """
    if key == "loss":
        yield "loss", "train", value
        return
    if not isinstance(value, dict):
        yield key, key, value
        return
    for path, number in leaves(value):
        if key == "dev" and len(path) == 1 and (path[0] == "loss" or path[0] in top_keys):
            yield path[0], "dev", number
        elif len(path) == 1:
            yield key, path[0], number
        else:
            yield f"{key}: {path[-1]}", " ".join(path[:-1]), number


def curve_series(records: list[dict[str, Any]]) -> Series:
    """Every numeric series in a stage's ``curves.jsonl`` records, grouped into panels.

    >>> panels = curve_series([{"step": 1, "loss": 2.0, "lr": 0.1, "reward": 0.5},
    ...                        {"step": 1, "dev": {"loss": 2.5, "reward": 0.25, "parse_rate": 1.0, "call_examples": 24}},
    ...                        {"step": 2, "reward_by_domain": {"device": 0.5, "commerce": 0.25},
    ...                         "eval": {"student": {"device": {"exact": 0.5}}, "teacher": {"device": {"exact": 1.0}}}}])
    >>> panels["loss"], panels["reward"]["dev"], panels["dev"]
    ({'train': ([1], [2.0]), 'dev': ([1], [2.5])}, ([1], [0.25]), {'parse_rate': ([1], [1.0])})
    >>> sorted(panels["reward_by_domain"]), sorted(panels["eval: exact"])
    (['commerce', 'device'], ['student device', 'teacher device'])
    """
    top_keys = {key for record in records for key, value in record.items() if is_number(value)}
    panels: Series = {}
    for record in records:
        step = record.get("step")
        if not is_number(step):
            continue
        for key, value in record.items():
            if key in NOT_CURVES:
                continue
            for panel, line, number in route(key, value, top_keys):
                if is_number(number):
                    steps, values = panels.setdefault(panel, {}).setdefault(line, ([], []))
                    steps.append(step)
                    values.append(number)
    return panels


def ordered(panels: Series) -> list[str]:
    """Panel names: loss, dev, reward, KL, loop rate, reasoning tokens first, then as logged."""
    known = [name for name in FIRST_PANELS if name in panels]
    return known + [name for name in panels if name not in known]


def curves_plot(stage: str, panels: Series, path: Path) -> Path:
    """One figure for a stage: a grid of at most ``MAX_PANELS`` panels, series against step."""
    plt = _pyplot()
    names = ordered(panels)[:MAX_PANELS]
    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for axis, name in zip(axes.flat, names):
        for line, (steps, values) in panels[name].items():
            axis.plot(steps, values, linestyle="-" if len(steps) > 1 else "none",
                      marker="o" if len(steps) <= 20 else None, markersize=4, label=line)
        axis.set(title=f"{stage}: {name.replace('_', ' ')}", xlabel="step")
        axis.grid(alpha=0.3)
        if len(panels[name]) > 1:
            axis.legend(fontsize=7)
    for axis in list(axes.flat)[len(names):]:
        axis.set_visible(False)
    return _save(fig, plt, path)


def eval_bars(labels: list[str], success: list[float | None], loop_rate: list[float | None], path: Path) -> Path:
    """Grouped bars of device success and loop rate (percent) per model; a missing value is left out."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(max(5.0, 1.3 * len(labels) + 2), 3.6))
    width = 0.38
    for offset, (name, values) in enumerate((("device success", success), ("loop rate", loop_rate))):
        xs = [i + (offset - 0.5) * width for i, v in enumerate(values) if v is not None]
        heights = [100 * v for v in values if v is not None]
        bars = axis.bar(xs, heights, width, label=name, color=f"C{offset}")
        axis.bar_label(bars, fmt="%.0f%%", fontsize=7)
    axis.set_xticks(range(len(labels)), labels, fontsize=8)
    axis.set(title="device tasks: success and loop rate per model", ylabel="%", ylim=(0, 110))
    axis.legend(fontsize=8)
    return _save(fig, plt, path)


def _save(fig, plt, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
