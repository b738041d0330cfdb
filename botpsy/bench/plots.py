"""The card's plots (matplotlib, Agg: no display needed), one PNG each, written beside ``card.json``.

* ``speed.png``: prefill and decode tokens/s against context length, one line per model file;
* ``ttft.png``: time to first token against the number of tools, cold (solid), with the
  tools prefix cached (dashed) and after a restart with the prefix read from disk (dotted), one
  colour per model file;
* ``memory.png``: file size, the runtime's estimate, RSS once loaded and peak RSS while
  generating, grouped by model file.

Example::

    paths = write_plots(card, "bench_out/card")    # [.../speed.png, .../ttft.png, .../memory.png]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display and in tests
    import matplotlib.pyplot as plt

    return plt


def label(model: dict[str, Any]) -> str:
    return f"{model['name']} ({model['format']})"


def speed_plot(card: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for model in card["models"]:
        rows = [t for t in model["throughput"] if "skipped" not in t]
        contexts = [t["context_tokens"] for t in rows]
        axes[0].plot(contexts, [t["prefill_tokens_per_s"]["median"] for t in rows], marker="o", label=label(model))
        axes[1].plot(contexts, [t["decode_tokens_per_s"]["median"] for t in rows], marker="o", label=label(model))
    for axis, title in zip(axes, ("prefill", "decode")):
        axis.set(title=f"{title} speed (median)", xlabel="context tokens", ylabel="tokens/s")
        axis.set_xscale("log", base=2)
        axis.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    return _save(fig, plt, path)


def ttft_plot(card: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(6, 4))
    for index, model in enumerate(card["models"]):
        rows = [t for t in model["ttft"] if "skipped" not in t]
        tools = [t["tools"] for t in rows]
        colour = f"C{index % 10}"
        axis.plot(tools, [t["cold_ms"]["median"] for t in rows], "-o", color=colour, label=f"{label(model)} cold")
        axis.plot(tools, [t["warm_ms"]["median"] for t in rows], "--s", color=colour, label=f"{label(model)} warm")
        restarted = [t for t in rows if "restart_ms" in t]  # absent in cards before 2026-12-07
        if restarted:
            axis.plot([t["tools"] for t in restarted], [t["restart_ms"]["median"] for t in restarted], ":^",
                      color=colour, label=f"{label(model)} after a restart (prefix from disk)")
    axis.set(title="time to first token (median)", xlabel="tools in the prompt", ylabel="ms (log scale)")
    axis.set_yscale("log")  # warm TTFT is tens of times below cold; a linear axis flattens it to zero
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    return _save(fig, plt, path)


def memory_plot(card: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(max(6, 2 + 1.6 * len(card["models"])), 4))
    series = {"file": lambda m: m["file_bytes"], "estimate": lambda m: m["memory"]["estimate"]["total_bytes"],
              "RSS loaded": lambda m: m["memory"]["rss_loaded_bytes"],
              "peak RSS generating": lambda m: m["memory"]["peak_rss_generating_bytes"]}
    width = 0.8 / len(series)
    for offset, (name, value) in enumerate(series.items()):
        xs = [i + (offset - (len(series) - 1) / 2) * width for i in range(len(card["models"]))]
        axis.bar(xs, [value(m) / (1 << 20) for m in card["models"]], width, label=name)
    axis.set_xticks(range(len(card["models"])), [label(m) for m in card["models"]], fontsize=7, rotation=15)
    axis.set(title="memory by model file", ylabel="MiB")
    axis.legend(fontsize=8)
    return _save(fig, plt, path)


def _save(fig, plt, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(card: dict[str, Any], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [speed_plot(card, out / "speed.png"), ttft_plot(card, out / "ttft.png"),
            memory_plot(card, out / "memory.png")]
