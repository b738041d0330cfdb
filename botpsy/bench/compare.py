"""Cards side by side: ``botpsy bench --compare a/card.json b/card.json --out DIR``.

Each column is one model of one card (so two runs of the same file on two devices sit next to
each other); each row is one headline figure, medians throughout. Context lengths and tool
counts are the union over all cards; a figure a card does not have is "-". Writes
``compare.json`` (``{"schema_version", "columns": [...], "rows": [{"metric", "values"}]}``) and
``compare.md``.

With cards of the same model files (repeated runs, or one file on two devices), ``agreement``
checks each repeated measurement against the noise the cards report. Two kinds of noise:

* the repetitions' own: a figure agrees *strictly* when the runs' ``[min, max]`` ranges overlap
  (there is a value every run could have measured);
* the machine's drift between runs: a shared or virtual machine runs faster or slower from one
  run to the next, for reasons outside the bench. Each card records speed probes (a short copy
  and a matrix product, ``roofline.speed_probe``) taken before every model in every round. How
  far their medians moved between the compared cards (``drift``: largest over smallest median,
  minus one, for the probe that moved most) is how much the machine itself changed, and a figure
  *agrees* when the runs' ranges are at most that factor apart: the highest ``min`` is at most
  the lowest ``max`` times ``1 + drift``. Cards without probes give a drift of 0, so the check
  is then the strict one.

Derived single numbers (the roofline fraction, a bandwidth's best) are not checked; the
Stats they come from are.

Example::

    table = compare_cards([("phone", load_card("a.json")), ("laptop", load_card("b.json"))])
    print(compare_markdown(table))
"""

from __future__ import annotations

from typing import Any, Callable

from botpsy.bench.card import SCHEMA_VERSION, md_table

Getter = Callable[[dict[str, Any], dict[str, Any]], Any]


def _find(rows: list[dict[str, Any]], key: str, value: int) -> dict[str, Any] | None:
    return next((r for r in rows if r.get(key) == value and "skipped" not in r), None)


def _stats(record: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    return record[name] if record and name in record else None


def _median(record: dict[str, Any] | None, name: str) -> float | None:
    stats = _stats(record, name)
    return stats["median"] if stats else None


def metrics(cards: list[dict[str, Any]]) -> list[tuple[str, Getter]]:
    """(row name, getter(card, model)) for every figure compared, in display order."""
    models = [m for card in cards for m in card["models"]]
    tools = sorted({t["tools"] for m in models for t in m["ttft"]})
    contexts = sorted({t["context_tokens"] for m in models for t in m["throughput"]})
    rows: list[tuple[str, Getter]] = [
        ("CPU", lambda c, m: c["machine"]["cpu_model"]),
        ("threads used", lambda c, m: c["machine"]["threads_used"]),
        ("memory bandwidth GB/s (best)", lambda c, m: c["machine"]["bandwidth"]["best_gb_per_s"]),
        ("format", lambda c, m: m["format"]),
        ("file MiB", lambda c, m: round(m["file_bytes"] / (1 << 20), 1)),
        ("load ms", lambda c, m: m["load_ms"]["median"]),
        ("RSS loaded MiB", lambda c, m: round(m["memory"]["rss_loaded_bytes"] / (1 << 20), 1)),
        ("peak RSS generating MiB", lambda c, m: round(m["memory"]["peak_rss_generating_bytes"] / (1 << 20), 1)),
    ]
    for count in tools:
        rows.append((f"TTFT cold ms, {count} tools", lambda c, m, n=count: _median(_find(m["ttft"], "tools", n), "cold_ms")))
        rows.append((f"TTFT warm ms, {count} tools", lambda c, m, n=count: _median(_find(m["ttft"], "tools", n), "warm_ms")))
        rows.append((f"TTFT after a restart ms, {count} tools",
                     lambda c, m, n=count: _median(_find(m["ttft"], "tools", n), "restart_ms")))
    for length in contexts:
        rows.append((f"prefill tok/s @ {length}", lambda c, m, n=length: _median(
            _find(m["throughput"], "context_tokens", n), "prefill_tokens_per_s")))
        rows.append((f"decode tok/s @ {length}", lambda c, m, n=length: _median(
            _find(m["throughput"], "context_tokens", n), "decode_tokens_per_s")))
    rows += [
        ("agent turn ms", lambda c, m: _median(m["agent_turn"], "ms")),
        ("whole task ms", lambda c, m: _median(m["task"], "ms")),
        ("decode J/token", lambda c, m: m["energy"] if isinstance(m["energy"], str)
            else m["energy"]["decode_joules_per_token"]["median"]),
        ("decode / roofline", lambda c, m: m["roofline"]["fraction_of_roofline"]),
    ]
    return rows


def stat_figures(cards: list[dict[str, Any]]) -> list[tuple[str, Getter]]:
    """(figure name, getter(card, model) -> Stats or None) for every repeated measurement."""
    models = [m for card in cards for m in card["models"]]
    tools = sorted({t["tools"] for m in models for t in m["ttft"]})
    contexts = sorted({t["context_tokens"] for m in models for t in m["throughput"]})
    figures: list[tuple[str, Getter]] = [("load ms", lambda c, m: m["load_ms"])]
    for count in tools:
        for name in ("cold_ms", "warm_ms", "restart_ms"):
            figures.append((f"TTFT {name[:-3]} ms, {count} tools",
                            lambda c, m, n=count, k=name: _stats(_find(m["ttft"], "tools", n), k)))
    for length in contexts:
        for name in ("prefill_tokens_per_s", "decode_tokens_per_s"):
            figures.append((f"{name.split('_')[0]} tok/s @ {length}",
                            lambda c, m, n=length, k=name: _stats(_find(m["throughput"], "context_tokens", n), k)))
    figures += [("agent turn ms", lambda c, m: _stats(m["agent_turn"], "ms")),
                ("whole task ms", lambda c, m: _stats(m["task"], "ms"))]
    return figures


def ranges_overlap(stats: list[dict[str, Any]], drift: float = 0.0) -> bool:
    """True when one value lies inside every ``[min, max]``, allowing the runs to differ by the
    factor ``1 + drift`` (the highest minimum is at most the lowest maximum times ``1 + drift``).

    >>> ranges_overlap([{"min": 1, "max": 3}, {"min": 2.5, "max": 4}])
    True
    >>> ranges_overlap([{"min": 1, "max": 2}, {"min": 2.5, "max": 4}])
    False
    >>> ranges_overlap([{"min": 1, "max": 2}, {"min": 2.5, "max": 4}], drift=0.2), ranges_overlap(
    ...     [{"min": 1, "max": 2}, {"min": 2.5, "max": 4}], drift=0.25)
    (False, True)
    """
    return max(s["min"] for s in stats) <= min(s["max"] for s in stats) * (1 + drift)


def machine_spread(probes: dict[str, Any]) -> float:
    """Largest over smallest reading, minus one, for the speed probe that moved most.

    >>> machine_spread({"copy_gb_per_s": {"min": 10, "max": 12}, "matmul_gflops": {"min": 40, "max": 42}, "when": "x"})
    0.2
    """
    spreads = [v["max"] / v["min"] - 1 for v in probes.values() if isinstance(v, dict) and v.get("min", 0) > 0]
    return round(max(spreads, default=0.0), 4)


def machine_drift(cards: list[dict[str, Any]]) -> float:
    """How far the machine's typical speed moved between the cards: for each speed probe, the
    largest over the smallest of the cards' *median* readings, minus one; the largest of these
    (0 when a card has no probes).

    Within one card the figures' own [min, max] already span the drift over its rounds; what
    they cannot see is the machine being faster or slower during another run. Medians of a
    dozen readings ignore single jittery probes, so this is the shift between runs.
    """
    probes = [card["machine"].get("speed_probes") for card in cards]
    if not probes or any(p is None for p in probes):
        return 0.0
    kinds = [k for k, v in probes[0].items() if isinstance(v, dict) and all(k in p for p in probes)]
    return machine_spread({k: {"min": min(p[k]["median"] for p in probes), "max": max(p[k]["median"] for p in probes)}
                           for k in kinds})


def agreement(sources: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Repeated measurements of the same model (same file name and format) across the cards."""
    cards = [card for _, card in sources]
    drift = machine_drift(cards)
    keys = [{(m["name"], m["format"]): m for m in card["models"]} for card in cards]
    shared = [k for k in keys[0] if all(k in other for other in keys[1:])]
    figures = []
    for name, fmt in shared:
        same_file = len({other[(name, fmt)]["file_bytes"] for other in keys}) == 1
        for metric, get in stat_figures(cards):
            stats = [get(card, other[(name, fmt)]) for card, other in zip(cards, keys)]
            if any(s is None for s in stats):
                continue
            figures.append({"model": name, "format": fmt, "metric": metric, "same_file_size": same_file,
                            "ranges": [[s["min"], s["max"]] for s in stats], "medians": [s["median"] for s in stats],
                            "agrees_strictly": ranges_overlap(stats), "agrees": ranges_overlap(stats, drift)})
    return {"rule": (f"a figure agrees when the runs' [min, max] ranges are no further apart than the machine's drift "
                     f"between the runs ({drift:.1%}, from the medians of the cards' speed probes)"),
            "drift": drift, "models": [list(k) for k in shared], "compared": len(figures),
            "agreeing": sum(f["agrees"] for f in figures),
            "agreeing_strictly": sum(f["agrees_strictly"] for f in figures), "figures": figures}


def compare_cards(sources: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The comparison table of validated cards, each given with a name for where it came from."""
    cards = [card for _, card in sources]
    columns = [{"card": name, "model": model["name"], "format": model["format"], "created": card["created"]}
               for name, card in sources for model in card["models"]]
    pairs = [(card, model) for card in cards for model in card["models"]]
    rows = [{"metric": metric, "values": [get(card, model) for card, model in pairs]} for metric, get in metrics(cards)]
    return {"schema_version": SCHEMA_VERSION, "columns": columns, "rows": rows, "agreement": agreement(sources)}


def compare_markdown(table: dict[str, Any]) -> str:
    header = ["metric"] + [f"{c['model']} ({c['card']})" for c in table["columns"]]
    cells = [[row["metric"]] + ["-" if v is None else str(v) for v in row["values"]] for row in table["rows"]]
    return "\n".join(["# Device cards compared", "", *md_table(header, cells), "", *agreement_lines(table.get("agreement")), ""])


def agreement_lines(result: dict[str, Any] | None) -> list[str]:
    if not result or not result["models"]:
        return ["No model file appears in every card, so no repeated measurement is checked for agreement."]
    lines = ["## Agreement of repeated measurements", "",
             f"{result['agreeing']} of {result['compared']} figures agree ({result['rule']}), over "
             + ", ".join(f"{name} ({fmt})" for name, fmt in result["models"]) + "."]
    lines += ["", f"Without the drift allowance (ranges as measured): {result['agreeing_strictly']} of "
              f"{result['compared']} agree."]
    differing = [f for f in result["figures"] if not f["same_file_size"]]
    if differing:
        lines.append("Files of the same name differ in size between the cards: "
                     + ", ".join(sorted({f["model"] for f in differing})) + " (not the same model).")
    misses = [f for f in result["figures"] if not f["agrees"]]
    if misses:
        lines += ["", "Figures further apart than the drift allows:", ""]
        lines += md_table(["model", "figure", "ranges [min, max]"],
                          [[f"{f['model']} ({f['format']})", f["metric"], "; ".join(f"{a:g}-{b:g}" for a, b in f["ranges"])]
                           for f in misses])
    return lines
