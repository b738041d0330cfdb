"""Cards side by side: ``botpsy bench --compare a/card.json b/card.json --out DIR``.

Each column is one model of one card (so two runs of the same file on two devices sit next to
each other); each row is one headline figure, medians throughout. Context lengths and tool
counts are the union over all cards; a figure a card does not have is "-". Writes
``compare.json`` (``{"schema_version", "columns": [...], "rows": [{"metric", "values"}]}``) and
``compare.md``.

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


def _median(record: dict[str, Any] | None, name: str) -> float | None:
    return record[name]["median"] if record and name in record else None


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


def compare_cards(sources: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The comparison table of validated cards, each given with a name for where it came from."""
    cards = [card for _, card in sources]
    columns = [{"card": name, "model": model["name"], "format": model["format"], "created": card["created"]}
               for name, card in sources for model in card["models"]]
    pairs = [(card, model) for card in cards for model in card["models"]]
    rows = [{"metric": metric, "values": [get(card, model) for card, model in pairs]} for metric, get in metrics(cards)]
    return {"schema_version": SCHEMA_VERSION, "columns": columns, "rows": rows}


def compare_markdown(table: dict[str, Any]) -> str:
    header = ["metric"] + [f"{c['model']} ({c['card']})" for c in table["columns"]]
    cells = [[row["metric"]] + ["-" if v is None else str(v) for v in row["values"]] for row in table["rows"]]
    return "\n".join(["# Device cards compared", "", *md_table(header, cells), ""])
