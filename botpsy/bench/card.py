"""The device report card: one versioned JSON schema, its markdown rendering, and reading cards back.

``card.json`` (``schema_version`` 1) holds::

    schema_version   1
    created          ISO time (UTC) the card was written
    settings         the bench settings (threads, reps, quick, contexts, tool counts, ...)
    machine          cpu_model, physical_cores, logical_cores, threads_used, memory_bytes, os, python,
                     load_average (1, 5, 15 min, at start: a busy machine slows everything),
                     caches {level name: bytes}, last_level_cache_bytes, llama_cpp {llama_cpp_python,
                     system_info}, bandwidth {gb_per_s: Stats, best_gb_per_s, buffer_bytes, threads, method},
                     energy_source: the RAPL domains read, or "not available here",
                     speed_probes {copy_gb_per_s: Stats, matmul_gflops: Stats, spread, when} (optional: readings
                     of the machine's speed before every model in every round; ``spread`` is the largest over
                     the smallest reading minus one, for the probe that moved most)
    models: [        one entry per GGUF file, in the order given
      name, path, format (llama.cpp file type, e.g. "Q4_K_M"), architecture, file_bytes,
      speaks_botpsy_format (its vocabulary has <|im_start|> and <tool_call> as single tokens),
      n_ctx           the context the model was loaded with (bench setting capped by the model's own)
      load_ms         Stats
      memory          {estimate: the runtime's MemoryEstimate.to_dict(), rss_before_load_bytes,
                       rss_loaded_bytes, peak_rss_generating_bytes}
      ttft            [{tools, prompt_tokens, prefix_tokens, cold_ms: Stats, warm_ms: Stats, warm_over_cold,
                        warm_cache_hits, restart_ms: Stats, restart_cache_hits, state_file_bytes}
                       or {tools, skipped: reason}]
                      (cold: nothing cached; warm: the tools prefix restored from memory; restart: a new
                      process's first turn, the prefix state read from its file on disk (optional: absent
                      in cards before 2026-12-07); the hit counts count the recorded runs that restored it)
      throughput      [{context_tokens, decode_tokens, prefill_tokens_per_s: Stats, decode_tokens_per_s: Stats}
                       or {context_tokens, skipped: reason}]
      agent_turn      {ms: Stats, completion_tokens, tool_calls, prompt_tokens} or {skipped: reason}
      task            {ms: Stats, task_id, kind, model_turns, completion_tokens, success} or {skipped: reason}
      energy          {decode_joules_per_token: Stats, prefill_joules_per_token: Stats, domains} or
                      "not available here"
      roofline        {bytes_per_token, bytes_model, output_tied, bandwidth_gb_per_s, allowed_decode_tokens_per_s,
                       measured_decode_tokens_per_s, fraction_of_roofline, context_tokens,
                       fits_in_last_level_cache, note}
    ]
    plots            the PNG file names written beside card.json

``Stats`` is ``{min, median, max, n, values}`` over the repetitions (warm-up runs are not counted;
``values`` may be absent in cards from older versions). With ``--rounds R`` the whole sweep over
every model runs R times, one after the other, and each Stats pools the values of all rounds, so
its range also covers the machine's drift over the run, not only back-to-back repetitions.
Cards from different machines or runs share this schema, so ``compare.py`` can put them side
by side; ``validate_card`` checks one against ``CARD_SCHEMA`` (``jsonschema``).

Example::

    card = load_card("bench_out/card/card.json")     # raises CardError if it does not match the schema
    print(card_markdown(card))
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Sequence

SCHEMA_VERSION = 1
NOT_AVAILABLE = "not available here"

_NUMBER = {"type": "number"}
_INT = {"type": "integer", "minimum": 0}
STATS_SCHEMA = {"type": "object", "required": ["min", "median", "max", "n"],
                "properties": {"min": _NUMBER, "median": _NUMBER, "max": _NUMBER, "n": {"type": "integer", "minimum": 1}}}
_SKIPPED = {"type": "object", "required": ["skipped"], "properties": {"skipped": {"type": "string"}}}


def _one_of(measured: dict) -> dict:
    return {"oneOf": [measured, _SKIPPED]}


_TTFT = {"type": "object", "required": ["tools", "prompt_tokens", "prefix_tokens", "cold_ms", "warm_ms", "warm_over_cold"],
         "properties": {"tools": _INT, "prompt_tokens": _INT, "prefix_tokens": _INT, "cold_ms": STATS_SCHEMA,
                        "warm_ms": STATS_SCHEMA, "warm_over_cold": _NUMBER, "restart_ms": STATS_SCHEMA,
                        "restart_cache_hits": _INT, "state_file_bytes": _INT}}
_TTFT_SKIPPED = {"type": "object", "required": ["tools", "skipped"], "additionalProperties": False,
                 "properties": {"tools": _INT, "skipped": {"type": "string"}}}
_THROUGHPUT = {"type": "object", "required": ["context_tokens", "decode_tokens", "prefill_tokens_per_s",
                                              "decode_tokens_per_s"],
               "properties": {"context_tokens": _INT, "decode_tokens": _INT, "prefill_tokens_per_s": STATS_SCHEMA,
                              "decode_tokens_per_s": STATS_SCHEMA}}
_THROUGHPUT_SKIPPED = {"type": "object", "required": ["context_tokens", "skipped"], "additionalProperties": False,
                       "properties": {"context_tokens": _INT, "skipped": {"type": "string"}}}
_ENERGY = {"oneOf": [{"const": NOT_AVAILABLE},
                     {"type": "object", "required": ["decode_joules_per_token", "prefill_joules_per_token", "domains"],
                      "properties": {"decode_joules_per_token": STATS_SCHEMA, "prefill_joules_per_token": STATS_SCHEMA,
                                     "domains": {"type": "array", "items": {"type": "string"}}}}]}
_ROOFLINE = {"type": "object", "required": ["bytes_per_token", "bandwidth_gb_per_s", "allowed_decode_tokens_per_s",
                                            "measured_decode_tokens_per_s", "fraction_of_roofline", "context_tokens"],
             "properties": {"bytes_per_token": _INT, "bandwidth_gb_per_s": _NUMBER,
                            "allowed_decode_tokens_per_s": _NUMBER, "measured_decode_tokens_per_s": _NUMBER,
                            "fraction_of_roofline": {"type": ["number", "null"]}, "context_tokens": _INT}}
_MEMORY = {"type": "object", "required": ["estimate", "rss_before_load_bytes", "rss_loaded_bytes",
                                          "peak_rss_generating_bytes"],
           "properties": {"estimate": {"type": "object", "required": ["total_bytes", "fits"]},
                          "rss_before_load_bytes": _INT, "rss_loaded_bytes": _INT, "peak_rss_generating_bytes": _INT}}
MODEL_SCHEMA = {
    "type": "object",
    "required": ["name", "path", "format", "architecture", "file_bytes", "speaks_botpsy_format", "n_ctx", "load_ms",
                 "memory", "ttft", "throughput", "agent_turn", "task", "energy", "roofline"],
    "properties": {
        "name": {"type": "string"}, "path": {"type": "string"}, "format": {"type": "string"},
        "architecture": {"type": "string"}, "file_bytes": _INT, "speaks_botpsy_format": {"type": "boolean"},
        "n_ctx": _INT, "load_ms": STATS_SCHEMA, "memory": _MEMORY,
        "ttft": {"type": "array", "items": {"oneOf": [_TTFT, _TTFT_SKIPPED]}},
        "throughput": {"type": "array", "items": {"oneOf": [_THROUGHPUT, _THROUGHPUT_SKIPPED]}},
        "agent_turn": _one_of({"type": "object", "required": ["ms", "completion_tokens", "tool_calls"],
                               "properties": {"ms": STATS_SCHEMA}}),
        "task": _one_of({"type": "object", "required": ["ms", "task_id", "kind", "model_turns", "success"],
                         "properties": {"ms": STATS_SCHEMA, "success": {"type": "boolean"}}}),
        "energy": _ENERGY, "roofline": _ROOFLINE,
    },
}
MACHINE_SCHEMA = {
    "type": "object",
    "required": ["cpu_model", "physical_cores", "logical_cores", "threads_used", "memory_bytes", "os", "llama_cpp",
                 "bandwidth", "energy_source"],
    "properties": {"cpu_model": {"type": "string"}, "physical_cores": _INT, "logical_cores": _INT,
                   "threads_used": {"type": "integer", "minimum": 1}, "memory_bytes": _INT, "os": {"type": "string"},
                   "llama_cpp": {"type": "object", "required": ["llama_cpp_python", "system_info"]},
                   "bandwidth": {"type": "object", "required": ["gb_per_s", "best_gb_per_s", "buffer_bytes"],
                                 "properties": {"gb_per_s": STATS_SCHEMA, "best_gb_per_s": _NUMBER}},
                   "energy_source": {"type": ["string", "array"]},
                   "speed_probes": {"type": "object", "required": ["copy_gb_per_s", "matmul_gflops", "spread"],
                                    "properties": {"copy_gb_per_s": STATS_SCHEMA, "matmul_gflops": STATS_SCHEMA,
                                                   "spread": {"type": "number", "minimum": 0}}}},
}
CARD_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "botpsy device report card",
    "type": "object",
    "required": ["schema_version", "created", "settings", "machine", "models"],
    "properties": {"schema_version": {"const": SCHEMA_VERSION}, "created": {"type": "string"},
                   "settings": {"type": "object"}, "machine": MACHINE_SCHEMA,
                   "models": {"type": "array", "items": MODEL_SCHEMA}},
}


class CardError(ValueError):
    """A card file that cannot be read or does not match the schema; the message says where."""


def summarize(values: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """``{min, median, max, n}`` of repeated measurements.

    The recorded values are kept (rounded) so that rounds of a bench can be pooled.

    >>> summarize([3.0, 1.0, 2.0])
    {'min': 1.0, 'median': 2.0, 'max': 3.0, 'n': 3, 'values': [3.0, 1.0, 2.0]}
    """
    if not values:
        raise ValueError("no measurements to summarize")
    return {"min": round(min(values), digits), "median": round(statistics.median(values), digits),
            "max": round(max(values), digits), "n": len(values), "values": [round(v, digits) for v in values]}


def is_stats(value: Any) -> bool:
    return isinstance(value, dict) and {"min", "median", "max", "n"} <= value.keys()


def pool(records: list[Any]) -> Any:
    """One record from the same record measured in several rounds: Stats pooled over every value.

    Dicts and lists are pooled item by item; a Stats (with its ``values``) becomes the Stats of
    all rounds' values; peak memory is the largest; counts of cache hits add up; anything else
    is taken from the first round.

    >>> pool([{"ms": summarize([1.0, 2.0]), "tokens": 7}, {"ms": summarize([4.0]), "tokens": 7}])["ms"]
    {'min': 1.0, 'median': 2.0, 'max': 4.0, 'n': 3, 'values': [1.0, 2.0, 4.0]}
    """
    first = records[0]
    if is_stats(first) and all(is_stats(r) and "values" in r for r in records):
        return summarize([v for r in records for v in r["values"]], 12)  # the values are rounded already
    if isinstance(first, dict) and all(isinstance(r, dict) for r in records):
        pooled = {}
        for key, value in first.items():
            others = [r.get(key) for r in records]
            if key == "peak_rss_generating_bytes":
                pooled[key] = max(v for v in others if v is not None)
            elif key in ("warm_cache_hits", "restart_cache_hits"):
                pooled[key] = sum(v or 0 for v in others)
            else:
                pooled[key] = pool(others) if all(v is not None for v in others) else value
        return pooled
    if isinstance(first, list) and all(isinstance(r, list) and len(r) == len(first) for r in records):
        return [pool(list(items)) for items in zip(*records)]
    return first


def validate_card(card: Any, source: str = "card") -> dict[str, Any]:
    """``card`` if it matches ``CARD_SCHEMA``, else ``CardError`` naming the first mismatch and where."""
    import jsonschema

    if isinstance(card, dict) and card.get("schema_version") not in (None, SCHEMA_VERSION):
        raise CardError(f"{source} has schema_version {card['schema_version']!r}; this botpsy reads {SCHEMA_VERSION}")
    try:
        jsonschema.validate(card, CARD_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise CardError(f"{source} does not match the card schema at {where}: {exc.message}") from None
    return card


def load_card(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CardError(f"card file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CardError(f"card file {path} is not JSON: {exc}") from None
    return validate_card(data, str(path))


def write_card(card: dict[str, Any], out_dir: str | Path) -> Path:
    """Validate ``card`` and write ``card.json`` and ``card.md`` into ``out_dir``; returns the JSON path."""
    validate_card(card)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    (out / "card.md").write_text(card_markdown(card))
    return out / "card.json"


# ---- markdown ----------------------------------------------------------------------------------


def mib(n: int | float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def stat(s: dict[str, Any] | None, digits: int = 1) -> str:
    """A Stats cell: ``median (min-max)``."""
    if not s:
        return "-"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def machine_lines(machine: dict[str, Any]) -> list[str]:
    bandwidth = machine["bandwidth"]
    energy = machine["energy_source"]
    lines = [
        f"- CPU: {machine['cpu_model']}, {machine['physical_cores']} cores / {machine['logical_cores']} threads; "
        f"bench used {machine['threads_used']} threads; load average at start {machine.get('load_average', '?')}",
        f"- Memory: {machine['memory_bytes'] / (1 << 30):.1f} GiB; last-level cache "
        f"{mib(machine.get('last_level_cache_bytes') or 0)}",
        f"- OS: {machine['os']}; llama-cpp-python {machine['llama_cpp']['llama_cpp_python']}",
        f"- llama.cpp: `{machine['llama_cpp']['system_info']}`",
        f"- Memory bandwidth (streaming copy, {mib(bandwidth['buffer_bytes'])}, {bandwidth.get('threads', 1)} threads): "
        f"best {bandwidth['best_gb_per_s']:.2f} GB/s, median {bandwidth['gb_per_s']['median']:.2f}",
        f"- Energy: {', '.join(energy) if isinstance(energy, list) else energy}",
    ]
    probes = machine.get("speed_probes")
    if probes:
        copy, matmul = probes["copy_gb_per_s"], probes["matmul_gflops"]
        lines.append(f"- Machine speed over the run ({copy['n']} probes, {probes.get('when', '')}): copy "
                     f"{copy['min']:.1f}-{copy['max']:.1f} GB/s, matrix product {matmul['min']:.1f}-{matmul['max']:.1f} "
                     f"GFLOP/s; spread {probes['spread']:.1%} (drift of the machine itself, not of the models)")
    return lines


def model_lines(model: dict[str, Any]) -> list[str]:
    memory, roof = model["memory"], model["roofline"]
    lines = [f"### {model['name']} ({model['format']}, {model['architecture']})", "",
             f"- File {mib(model['file_bytes'])}, n_ctx {model['n_ctx']}, load {stat(model['load_ms'])} ms, "
             f"botpsy tool format: {'yes' if model['speaks_botpsy_format'] else 'no'}",
             f"- Memory: estimate {mib(memory['estimate']['total_bytes'])}; RSS loaded {mib(memory['rss_loaded_bytes'])} "
             f"(+{mib(memory['rss_loaded_bytes'] - memory['rss_before_load_bytes'])} over the process before loading); "
             "peak while generating "
             f"{mib(memory['peak_rss_generating_bytes'])}",
             f"- Roofline at {roof['context_tokens']} tokens: {roof['bytes_per_token'] / 1e6:.1f} MB read per token, "
             f"bandwidth {roof['bandwidth_gb_per_s']:.2f} GB/s allows {roof['allowed_decode_tokens_per_s']:.1f} tok/s; "
             f"measured {roof['measured_decode_tokens_per_s']:.1f} tok/s = **{roof['fraction_of_roofline']}** "
             f"of the limit ({roof.get('note', '')})", ""]
    ttft_rows = [[str(t["tools"]), "-", "skipped: " + t["skipped"], "-", "-", "-"] if "skipped" in t else
                 [str(t["tools"]), str(t["prompt_tokens"]), stat(t["cold_ms"]), stat(t["warm_ms"]),
                  f"{t['warm_over_cold']:.3f}", stat(t["restart_ms"]) if "restart_ms" in t else "-"]
                 for t in model["ttft"]]
    lines += md_table(["tools", "prompt tokens", "TTFT cold ms", "TTFT warm ms", "warm/cold",
                       "TTFT after a restart ms (prefix from disk)"], ttft_rows) + [""]
    speed_rows = [[str(t["context_tokens"]), "skipped: " + t["skipped"], "-"] if "skipped" in t else
                  [str(t["context_tokens"]), stat(t["prefill_tokens_per_s"]), stat(t["decode_tokens_per_s"])]
                  for t in model["throughput"]]
    lines += md_table(["context tokens", "prefill tok/s", "decode tok/s"], speed_rows) + [""]
    lines.append(f"- Agent turn: {_timed(model['agent_turn'])}")
    lines.append(f"- Whole task: {_timed(model['task'])}")
    energy = model["energy"]
    lines.append("- Energy per token: " + (energy if isinstance(energy, str) else
                 f"decode {stat(energy['decode_joules_per_token'], 4)} J, prefill {stat(energy['prefill_joules_per_token'], 5)} J"))
    return lines + [""]


def _timed(record: dict[str, Any]) -> str:
    if "skipped" in record:
        return "skipped: " + record["skipped"]
    extra = ", ".join(f"{k} {v}" for k, v in record.items() if k != "ms")
    return f"{stat(record['ms'])} ms ({extra})"


def card_markdown(card: dict[str, Any]) -> str:
    settings = card["settings"]
    reps, rounds = settings.get("resolved", settings).get("reps", "?"), settings.get("rounds", 1)
    runs = f"{rounds} rounds of {reps} repetitions (values pooled)" if rounds > 1 else f"{reps} repetitions"
    lines = ["# Device report card", "", f"Written by `botpsy bench` at {card['created']} "
             f"(schema {card['schema_version']}). Numbers: median (min-max) over {runs}, "
             "each after a warm-up.", "", "## Machine", ""]
    lines += machine_lines(card["machine"]) + ["", "## Models", ""]
    for model in card["models"]:
        lines += model_lines(model)
    plots = card.get("plots") or []
    if plots:
        lines += ["## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots] + [""]
    return "\n".join(lines)
