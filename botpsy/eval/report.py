"""``botpsy eval``'s summary as a markdown table, models as columns (``table.md``), and its terminal view.

Each row is one figure read from ``summary.json``; a figure a model has no data for shows as "-".
Rates print as percentages, token and turn counts as numbers.

Example::

    print(markdown_table(json.loads(Path("runs/speedrun/eval/summary.json").read_text())))
"""

from __future__ import annotations

from typing import Any, Callable

Row = tuple[str, Callable[[dict], Any], str]  # (name, figure from one model's entry, format)


def pct(value: Any) -> str:
    """A rate as a percentage, "-" when there is none.

    >>> pct(0.1234), pct(None)
    ('12.3%', '-')
    """
    return "-" if value is None else f"{100 * value:.1f}%"


def num(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def dig(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...`` or None where a key is missing.

    >>> dig({"a": {"b": 1}}, "a", "b"), dig({"a": None}, "a", "b")
    (1, None)
    """
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def suite_rows(summary: dict) -> list[Row]:
    """The rows of every suite that was run, kinds/domains/categories as they occur in the data."""
    entries = list(summary["models"].values())
    seen = lambda *path: sorted({k for e in entries for k in (dig(e, "suites", *path) or {})})  # noqa: E731
    rows: list[Row] = []
    if "device" in summary["suites"]:
        rows += [("device: success", lambda e: dig(e, "suites", "device", "success_rate"), "pct"),
                 ("device: exact first calls (single and parallel tasks)",
                  lambda e: dig(e, "suites", "device", "first_call", "exact_rate"), "pct"),
                 ("device: partial credit (mean score)", lambda e: dig(e, "suites", "device", "mean_score"), "num"),
                 ("device: wasted calls per task", lambda e: dig(e, "suites", "device", "wasted_calls"), "num"),
                 ("device: assistant turns per task", lambda e: dig(e, "suites", "device", "turns"), "num"),
                 ("device: generated tokens per solved task", lambda e: dig(e, "suites", "device", "generated_tokens_per_solved"), "num"),
                 ("device: median time to first token per turn (ms)", lambda e: dig(e, "suites", "device", "ttft_ms_median"), "num"),
                 ("device: decode tokens/s", lambda e: dig(e, "suites", "device", "decode_tokens_per_s"), "num")]
        for group in ("by_kind", "by_domain"):
            for key in seen("device", group):
                rows.append((f"device {group[3:]} {key}: success",
                             lambda e, g=group, k=key: dig(e, "suites", "device", g, k, "success_rate"), "pct"))
    if "bfcl" in summary["suites"]:
        rows += [("bfcl: accuracy (all items)", lambda e: dig(e, "suites", "bfcl", "accuracy"), "pct"),
                 ("bfcl: overall (offline sections, BFCL weights)", lambda e: dig(e, "suites", "bfcl", "overall_offline"), "pct")]
        for section in ("non_live", "live", "irrelevance", "multi_turn"):
            rows.append((f"bfcl section {section}", lambda e, s=section: dig(e, "suites", "bfcl", "sections", s), "pct"))
        for category in seen("bfcl", "categories"):
            rows.append((f"bfcl {category}", lambda e, c=category: dig(e, "suites", "bfcl", "categories", c, "accuracy"), "pct"))
    for name in ("ifeval", "ifbench"):
        if name in summary["suites"]:
            for figure in ("prompt_strict", "prompt_loose", "instruction_strict", "instruction_loose"):
                rows.append((f"{name}: {figure.replace('_', ' ')}", lambda e, n=name, f=figure: dig(e, "suites", n, f), "pct"))
            rows.append((f"{name}: instructions skipped", lambda e, n=name: dig(e, "suites", n, "instructions_skipped"), "num"))
            for group in seen(name, "by_group"):
                rows.append((f"{name} group {group}: instruction strict",
                             lambda e, n=name, g=group: dig(e, "suites", n, "by_group", g, "strict"), "pct"))
    for name in summary["suites"]:  # the other benchmarks bring their own rows: "table" [[label, value, kind]]
        labels: dict[str, str] = {}
        for entry in entries:
            for label, _value, kind in dig(entry, "suites", name, "table") or []:
                labels.setdefault(label, kind)
        for label, kind in labels.items():
            rows.append((f"{name}: {label}", lambda e, n=name, lab=label: table_value(e, n, lab), kind))
    return rows


def table_value(entry: dict, suite: str, label: str) -> Any:
    return next((value for lab, value, _kind in dig(entry, "suites", suite, "table") or [] if lab == label), None)


METRIC_ROWS: list[Row] = [
    ("generations", lambda e: dig(e, "metrics", "generations"), "num"),
    ("loop rate (reasoning loops, observed)", lambda e: dig(e, "metrics", "loop_rate"), "pct"),
    ("cap-hit rate", lambda e: dig(e, "metrics", "cap_hit_rate"), "pct"),
    ("schema-valid call rate", lambda e: dig(e, "metrics", "schema_valid_call_rate"), "pct"),
    ("assistant turns per solved multi-turn task", lambda e: dig(e, "metrics", "multi_turn_solved", "assistant_turns"), "num"),
    ("tool calls per solved multi-turn task", lambda e: dig(e, "metrics", "multi_turn_solved", "tool_calls"), "num"),
    ("refusal accuracy (no tool fits)", lambda e: dig(e, "metrics", "refusal_accuracy", "all"), "pct"),
    ("special-case accuracy", lambda e: dig(e, "metrics", "special_case_accuracy", "all"), "pct"),
    ("special: incomplete", lambda e: dig(e, "metrics", "special_case_accuracy", "incomplete"), "pct"),
    ("special: wrong value", lambda e: dig(e, "metrics", "special_case_accuracy", "wrong_value"), "pct"),
    ("special: unavailable", lambda e: dig(e, "metrics", "special_case_accuracy", "unavailable"), "pct"),
    ("backend errors", lambda e: dig(e, "metrics", "backend_errors"), "num"),
]


def markdown_table(summary: dict) -> str:
    """The whole summary as one markdown table, plus the quantization deltas and BFCL's left-out list."""
    labels = list(summary["models"])
    entries = [summary["models"][label] for label in labels]
    lines = ["| figure | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for name, figure, kind in suite_rows(summary) + METRIC_ROWS:
        show = pct if kind == "pct" else num
        lines.append(f"| {name} | " + " | ".join(show(figure(e)) for e in entries) + " |")
    lines += ["| " + " | ".join(row) + " |" for row in reasoning_rows(summary, labels)]
    lines += paired_lines(summary) + quant_lines(summary) + left_out_lines(summary)
    return "\n".join(lines)


def paired_lines(summary: dict) -> list[str]:
    """Each pair of models per suite, on the items both ran: who alone got which right, and McNemar's p."""
    rows = [(suite, pair, r) for suite, pairs in (summary.get("paired") or {}).items() for pair, r in pairs.items()]
    if not rows:
        return []
    lines = ["", "Paired on the items both models ran (each record's `correct`; injection: the user task's utility; "
             "right only for the first / only for the second; exact McNemar p):", "",
             "| suite | models | items | first only | second only | p |", "|---|---|---|---|---|---|"]
    return lines + [f"| {suite} | {pair} | {r['items']} | {r['only_a']} | {r['only_b']} | {p_text(r['p_value'])} |"
                    for suite, pair, r in rows]


def p_text(p: float) -> str:
    """A p-value to two significant figures, small ones as a bound.

    >>> p_text(0.4421), p_text(0.0312), p_text(0.00004), p_text(1.0)
    ('0.44', '0.031', '<0.001', '1')
    """
    return "<0.001" if p < 0.001 else f"{p:.2g}"


def spent_cell(result: dict | None) -> str:
    """``reasoning_tokens_spent`` for one model: tokens per correct item, or what went for nothing."""
    if not result or not result["items"]:
        return "-"
    if result["per_correct"] is None:
        return f"none correct ({result['reasoning_tokens']:,} spent)"
    return num(result["per_correct"])


def reasoning_rows(summary: dict, labels: list[str]) -> list[list[str]]:
    """Per suite, two rows: reasoning tokens per correct item on the items every model got right
    (the report's measure), and all reasoning tokens over each model's own correct items."""
    rows = []
    for suite, result in (summary.get("reasoning_tokens_per_correct") or {}).items():
        rows.append([f"reasoning tokens per correct {suite} item ({result['items']} items all got right)"]
                    + [num(result["per_model"].get(label)) for label in labels])
        spent = (summary.get("reasoning_tokens_spent") or {}).get(suite)
        if spent is not None:
            rows.append([f"reasoning tokens spent per correct {suite} item (all items, each model alone)"]
                        + [spent_cell(spent.get(label)) for label in labels])
    return rows


def quant_lines(summary: dict) -> list[str]:
    quant = summary.get("quantization")
    if not quant:
        return []
    lines = ["", f"Quantization deltas against {quant['baseline']} (flagged: a drop over {quant['max_drop']}):", "",
             "| model | metric | delta |", "|---|---|---|"]
    flagged = {(f["model"], f["metric"]) for f in quant["flagged"]}
    for label, deltas in quant["deltas"].items():
        for metric, delta in deltas.items():
            mark = " **FLAGGED**" if (label, metric) in flagged else ""
            lines.append(f"| {label} | {metric} | {delta:+.4f}{mark} |")
    return lines


def left_out_lines(summary: dict) -> list[str]:
    left_out = next((dig(e, "suites", "bfcl", "left_out") for e in summary["models"].values()
                     if dig(e, "suites", "bfcl", "left_out")), None)
    if not left_out:
        return []
    return ["", "BFCL categories left out:"] + [f"- {name}: {why}" for name, why in left_out.items()]


def human(summary: dict) -> str:
    """The terminal view: the table without the markdown rules."""
    return markdown_table(summary)
