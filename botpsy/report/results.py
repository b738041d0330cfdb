"""The report's results parts: evaluation, the device report card and the agent run.

Same contract as ``sections.py``: each function ``(page) -> list[str]`` names the command and
file its numbers come from and prints only numbers read from them. The evaluation tables reuse
the rows ``botpsy/eval/report.py`` defines for ``eval/table.md``.

Example::

    page = Page(RunFolder(Path("runs/speedrun")), Path("runs/speedrun/report"))
    print("\\n".join(evaluation(page)))
"""

from __future__ import annotations

from pathlib import Path

from typing import Any

from botpsy.bench.card import CardError, load_card, md_table, mib, stat
from botpsy.eval import report as eval_report
from botpsy.eval.report import Row, dig, num, pct
from botpsy.report import plots
from botpsy.report.sections import Page, fmt

# The figures the recipe watches most, models as columns (as in eval/table.md).
KEY_ROWS: list[Row] = [
    ("device: success", lambda e: dig(e, "suites", "device", "success_rate"), "pct"),
    ("device: partial credit (mean score)", lambda e: dig(e, "suites", "device", "mean_score"), "num"),
    ("loop rate (reasoning loops, observed)", lambda e: dig(e, "metrics", "loop_rate"), "pct"),
    ("cap-hit rate", lambda e: dig(e, "metrics", "cap_hit_rate"), "pct"),
    ("device: assistant turns per task", lambda e: dig(e, "suites", "device", "turns"), "num"),
    ("assistant turns per solved multi-turn task", lambda e: dig(e, "metrics", "multi_turn_solved", "assistant_turns"), "num"),
]


# ---- 5. evaluation --------------------------------------------------------------------------------


def is_release_file(entry: dict) -> bool:
    """A shipped release format (RUN/gguf/model-*.gguf); stage models are evaluated from bf16 exports elsewhere."""
    path = Path(str(entry.get("model", "")))
    return path.suffix == ".gguf" and path.parent.name == "gguf"


# Evaluations a run kind keeps beside eval/: (title, folder). The student run evaluates its release
# formats side by side (the quantization gate) and every later stage beside SFT, on the device tasks.
EXTRA_EVALS: dict[str, list[tuple[str, str]]] = {
    "student": [("Quantization gate: the release formats on the device tasks", "eval-quant"),
                ("Stages beside SFT on the device tasks", "eval-stages")],
}


def evaluation(page: Page) -> list[str]:
    lines = eval_folder(page, "eval")
    for title, folder in EXTRA_EVALS.get(page.run.kind, []):
        lines += ["", f"### {title}", ""] + eval_folder(page, folder)
    return lines


def eval_folder(page: Page, folder: str) -> list[str]:
    """One ``botpsy eval`` output folder: key figures, a plot, every figure per model group, quantization deltas."""
    run = page.run
    summary, note = run.read(f"{folder}/summary.json")
    lines = [run.source(f"{folder}/summary.json"), ""]
    if note:
        return lines + note
    labels = list(summary["models"])
    plot = "eval_device.png" if folder == "eval" else f"{folder.replace('-', '_')}_device.png"
    lines += ["Key figures:", ""] + figure_table(summary, labels, KEY_ROWS) + [""] + eval_plot(page, summary, labels, plot)
    all_rows = eval_report.suite_rows(summary) + eval_report.METRIC_ROWS
    if folder == "eval":  # the main evaluation: models and release formats apart
        checkpoints = [label for label in labels if not is_release_file(summary["models"][label])]
        formats = [label for label in labels if is_release_file(summary["models"][label])]
        groups = [("By model (checkpoints, bases, stages)", checkpoints), ("By release format (GGUF files)", formats)]
    else:  # a side-by-side folder (the gate, the stages) stays one table, in its own order
        groups = [("Every figure", labels)]
    for title, group in groups:
        if group:
            lines += [f"#### {title}", ""] + figure_table(summary, group, all_rows) + [""]
    lines += eval_report.quant_lines(summary) + eval_report.left_out_lines(summary)
    if run.exists(f"{folder}/table.md"):
        lines += ["", f"All models in one table: [{folder}/table.md]({page.link(run.path(f'{folder}/table.md'))})."]
    return lines


def figure_table(summary: dict, labels: list[str], rows: list[Row]) -> list[str]:
    """Figures as rows, the ``labels`` models as columns, then reasoning tokens per correct answer."""
    entries = [summary["models"][label] for label in labels]
    body = [[name] + [(pct if kind == "pct" else num)(figure(entry)) for entry in entries] for name, figure, kind in rows]
    body += eval_report.reasoning_rows(summary, labels)
    return md_table(["figure"] + labels, body)


def eval_plot(page: Page, summary: dict, labels: list[str], name: str = "eval_device.png") -> list[str]:
    entries = [summary["models"][label] for label in labels]
    success = [dig(e, "suites", "device", "success_rate") for e in entries]
    loop_rate = [dig(e, "metrics", "loop_rate") for e in entries]
    if all(v is None for v in success + loop_rate):
        return []
    path = plots.eval_bars(labels, success, loop_rate, page.out_dir / name)
    return [page.image(path, "device success and loop rate per model"), ""]


# ---- 6. device card -------------------------------------------------------------------------------


def device_card(page: Page) -> list[str]:
    run = page.run
    rel = "bench/card.json"
    lines = [run.source(rel), ""]
    run.touched.append(str(run.path(rel)))
    if not run.exists(rel):
        return lines + [run.not_run(rel)]
    try:
        card = load_card(run.path(rel))
    except CardError as exc:
        return lines + [run.problem(str(exc), rel)]
    lines += card_lines(card) + [""]
    if run.exists("bench/card.md"):
        lines += [f"Full card: [bench/card.md]({page.link(run.path('bench/card.md'))}).", ""]
    pngs = [run.path(f"bench/{name}") for name in card.get("plots") or []]
    return lines + [f"![{p.stem}]({page.link(p)})" for p in pngs if p.is_file()]


def card_lines(card: dict[str, Any]) -> list[str]:
    """The card's headline: machine, TTFT cold vs warm, prefill/decode speed, roofline; median (min-max)."""
    machine = card["machine"]
    reps = dig(card, "settings", "resolved", "reps") or dig(card, "settings", "reps")
    head = [(f"- Measured {card['created']} on {machine['cpu_model']} ({machine['threads_used']} threads used, load "
             f"average at start {machine.get('load_average', '?')}), "
             f"memory bandwidth {machine['bandwidth']['best_gb_per_s']:.2f} GB/s (best copy); "
             f"figures are median (min-max) over {fmt(reps)} repetitions"), ""]
    ttft = [[m["name"], str(t["tools"]), "skipped: " + t["skipped"], "", ""] if "skipped" in t else
            [m["name"], str(t["tools"]), stat(t["cold_ms"]), stat(t["warm_ms"]), f"{t['warm_over_cold']:.3f}"]
            for m in card["models"] for t in m["ttft"]]
    speed = [[m["name"], str(t["context_tokens"]), "skipped: " + t["skipped"], ""] if "skipped" in t else
             [m["name"], str(t["context_tokens"]), stat(t["prefill_tokens_per_s"]), stat(t["decode_tokens_per_s"])]
             for m in card["models"] for t in m["throughput"]]
    roof = [[m["name"], m["format"], mib(m["file_bytes"]), f"{m['roofline']['measured_decode_tokens_per_s']:.1f}",
             f"{m['roofline']['allowed_decode_tokens_per_s']:.1f}", fmt(m["roofline"]["fraction_of_roofline"]),
             {True: "yes", False: "no"}.get(m["roofline"].get("fits_in_last_level_cache"), "-")] for m in card["models"]]
    return (head + md_table(["model", "tools", "TTFT cold ms", "TTFT warm ms", "warm/cold"], ttft) + [""]
            + md_table(["model", "context tokens", "prefill tok/s", "decode tok/s"], speed) + [""]
            + md_table(["model", "format", "file", "decode tok/s", "allowed by bandwidth", "fraction of roofline",
                        "fits in last-level cache"], roof))


# ---- 7. agent -------------------------------------------------------------------------------------

AGENT_FIGURES = [("model", "model", str), ("tasks", "tasks", fmt), ("solved", "solved", fmt),
                 ("success rate", "success_rate", pct), ("partial credit (mean score)", "mean_score", fmt),
                 ("loop rate (guard fired)", "loop_rate", pct), ("model turns", "model_turns", fmt),
                 ("completion tokens per task", "tokens_per_task", fmt), ("parse errors", "parse_errors", fmt),
                 ("mean time to first token (ms)", "ttft_ms_mean", fmt), ("seconds", "seconds", fmt)]


def agent(page: Page) -> list[str]:
    run = page.run
    summary, note = run.read("agent/summary.json")
    lines = [run.source("agent/summary.json"), ""]
    if note:
        return lines + note
    rows = [[name, show(summary[key])] for name, key, show in AGENT_FIGURES if key in summary]
    lines += md_table(["figure", "value"], rows)
    kinds = summary.get("by_kind") or {}
    if kinds:
        lines += ["", "By task kind:", ""] + md_table(
            ["kind", "tasks", "solved", "success", "mean score"],
            [[kind, fmt(k.get("tasks")), fmt(k.get("solved")), pct(k.get("success_rate")), fmt(k.get("mean_score"))]
             for kind, k in kinds.items()])
    return lines
