"""The measurements behind one model's card entry, each with a warm-up and ``reps`` repetitions.

``bench_model(path, settings, bandwidth, machine, meter)`` loads a GGUF through the runtime's
``LlamaBackend`` and measures, in this order:

* **load**: ``warmup`` + ``reps`` loads (the first one also fills the OS page cache), RSS before
  loading and once loaded;
* **TTFT** for agent prompts: the device world's system prompt, its first ``tools`` tools and a
  user request, rendered in the Qwen3.5 format. *Cold*: context and prefix cache cleared, the
  whole prompt prefilled. *Warm*: the tools prefix was saved by an earlier turn with another
  request, so only the request is prefilled (the runtime's prefix cache). *Restart*: the first
  turn of a new process, the memory cache empty and the prefix state read from the disk tier
  (``--prefix-cache-dir`` of ``chat`` and ``serve``), the file in the OS page cache;
* **throughput** at each context length: that many prompt tokens prefilled from a clean
  context, then ``decode_tokens`` greedy tokens (an end-of-turn token does not stop them);
  energy is read around the shortest context's runs when RAPL is readable;
* **agent turn**: one ``run_agent`` step on a multi-step device-world task (generate, parse,
  execute the calls), with the tools prefix cached as it is in a conversation;
* **task**: the whole task with the simulated user (``solve_task``), only for models that speak
  botpsy's tool format (a foreign model cannot make progress, so its time would mean nothing).

Peak RSS while generating is sampled over the TTFT, throughput and agent measurements.

Example (what ``botpsy bench`` runs for each file)::

    settings = Settings(threads=2, reps=3, warmup=1, n_ctx=8192, contexts=[256, 1024], tool_counts=[10, 25],
                        decode_tokens=64, turn_tokens=128, task_turns=6)
    entry = bench_model(Path("model-q4_k_m.gguf"), settings, bandwidth_gb_per_s=12.5,
                        last_level_cache=32 << 20, meter=RaplMeter.open())
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from botpsy.bench.card import NOT_AVAILABLE, summarize
from botpsy.bench.machine import PeakRss, RaplMeter, rss_bytes
from botpsy.bench.roofline import bytes_per_token, roofline
from botpsy.runtime.backend import BackendError, BackendOptions, SamplingConfig
from botpsy.runtime.generate import GenerateConfig, chat_prompt, generate
from botpsy.runtime.llama_backend import LlamaBackend
from botpsy.runtime.prefix_cache import DiskPrefixStore, PrefixCache

REQUESTS = ["Set an alarm for 7:30 tomorrow called gym.", "Send Alice a message saying I'll be late.",
            "What is on my calendar today?", "Turn off Wi-Fi and lower the brightness to 40 percent."]
BOTPSY_MARKERS = ("<|im_start|>", "<|im_end|>", "<tool_call>")


@dataclass
class Settings:
    """What one bench run measures (``command.BenchConfig`` resolved, quick mode applied)."""

    threads: int
    reps: int
    warmup: int
    n_ctx: int
    contexts: list[int]
    tool_counts: list[int]
    decode_tokens: int
    turn_tokens: int
    task_turns: int


def repeat(run: Callable[[], float], reps: int, warmup: int) -> list[float]:
    """``run()`` ``warmup`` times unrecorded, then ``reps`` times; the values of the recorded runs."""
    for _ in range(warmup):
        run()
    return [run() for _ in range(reps)]


def model_info(path: Path) -> dict[str, Any]:
    """Name, architecture, format (llama.cpp file type) and trained context length from the header.

    A LoRA adapter GGUF is described by its base (format ``<base format>+LoRA``, both files' bytes)."""
    from gguf import GGUFReader, LlamaFileType

    from botpsy.export.lora_gguf import find_adapter

    pair = find_adapter(path)
    if pair is not None:
        info = model_info(pair.base)
        return {**info, "name": path.stem, "path": str(path), "format": f"{info['format']}+LoRA", "base": str(pair.base),
                "file_bytes": info["file_bytes"] + path.stat().st_size, "adapter_bytes": path.stat().st_size}
    reader = GGUFReader(str(path))

    def field(key: str, default: Any = None) -> Any:
        value = reader.fields.get(key)
        return value.contents() if value is not None else default

    arch = str(field("general.architecture", "unknown"))
    file_type = field("general.file_type")
    try:
        fmt = LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (TypeError, ValueError):
        fmt = "unknown"
    return {"name": path.stem, "path": str(path), "format": fmt, "architecture": arch,
            "file_bytes": path.stat().st_size, "trained_context": int(field(f"{arch}.context_length", 0) or 0)}


def load(path: Path, options: BackendOptions, reps: int, warmup: int) -> tuple[LlamaBackend, dict[str, Any]]:
    """The backend to measure, after timing ``warmup`` + ``reps`` loads; its load and memory figures."""
    rss_before = rss_bytes()

    def timed_load() -> float:
        start = time.perf_counter()
        LlamaBackend(path, options).close()
        return (time.perf_counter() - start) * 1000

    times = repeat(timed_load, max(0, reps - 1), warmup)
    start = time.perf_counter()
    backend = LlamaBackend(path, options)
    times.append((time.perf_counter() - start) * 1000)
    return backend, {"load_ms": summarize(times), "rss_before_load_bytes": rss_before, "rss_loaded_bytes": rss_bytes(),
                     "estimate": backend.memory.to_dict()}


def speaks_botpsy_format(backend: LlamaBackend) -> bool:
    """Whether the vocabulary has botpsy's chat and tool-call markers as single tokens."""
    return all(len(backend.tokenize(marker)) == 1 for marker in BOTPSY_MARKERS)


@lru_cache(maxsize=1)
def device_world() -> tuple[str, tuple[dict, ...]]:
    """The device world's system prompt and every tool declaration (seed 0)."""
    from botpsy.world import World
    from botpsy.world.phrasing import system_prompt

    world = World(seed=0)
    try:
        return system_prompt(world.now, world.owner, world.city), tuple(world.tool_specs())
    finally:
        world.close()


def agent_prompt(tools: list[dict], request: str) -> tuple[str, str]:
    system, _ = device_world()
    return chat_prompt([{"role": "system", "content": system}, {"role": "user", "content": request}], tools)


def measure_ttft(backend: LlamaBackend, tool_count: int, settings: Settings) -> dict[str, Any]:
    """TTFT of an agent prompt with ``tool_count`` tools, cold and with the tools prefix cached."""
    tools = list(device_world()[1][:tool_count])
    config = GenerateConfig(max_tokens=1, sampling=SamplingConfig(temperature=0), on_loop="observe")
    prompt, prefix = agent_prompt(tools, REQUESTS[0])
    prompt_tokens = len(backend.tokenize(prompt))
    if prompt_tokens + 2 >= backend.n_ctx:
        return {"tools": tool_count, "skipped": f"the prompt has {prompt_tokens} tokens; n_ctx is {backend.n_ctx}"}

    def cold() -> float:
        backend.reset(clear_prefix_cache=True)
        return generate(backend, prompt, config, tools=tools).ttft_ms

    hits = []

    def warm() -> float:
        backend.reset()  # keeps the saved prefix state
        result = generate(backend, prompt, config, tools=tools, cache_prefix=prefix)
        hits.append(result.cache_hit)
        return result.ttft_ms

    cold_ms = repeat(cold, settings.reps, settings.warmup)
    backend.reset(clear_prefix_cache=True)
    other, _ = agent_prompt(tools, REQUESTS[1])
    generate(backend, other, config, tools=tools, cache_prefix=prefix)  # saves the prefix (a miss)
    warm_ms = repeat(warm, settings.reps, settings.warmup)
    backend.reset(clear_prefix_cache=True)
    record = {"tools": tool_count, "prompt_tokens": prompt_tokens, "prefix_tokens": len(backend.tokenize(prefix)),
              "cold_ms": summarize(cold_ms), "warm_ms": summarize(warm_ms), "warm_over_cold": 0.0,  # see finish_entry
              "warm_cache_hits": sum(hits[settings.warmup:])}
    return {**record, **measure_restart(backend, (prompt, other, prefix), tools, config, settings)}


def measure_restart(backend: LlamaBackend, prompts: tuple[str, str, str], tools: list[dict],
                    config: GenerateConfig, settings: Settings) -> dict[str, Any]:
    """TTFT of a new process's first turn: memory cache empty, the tools prefix read from disk.

    ``prompts`` is (the measured prompt, another request's prompt, the prefix). The other
    request's turn writes the state to a temporary folder; each run then empties the memory
    cache and restores from the file, as ``botpsy chat`` does after a restart.
    """
    prompt, other, prefix = prompts
    kept = backend.prefix_cache
    hits: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="botpsy-bench-states-") as folder:
        backend.prefix_cache = PrefixCache(256 << 20, disk=DiskPrefixStore(folder, backend.state_namespace()))
        try:
            backend.reset()
            generate(backend, other, config, tools=tools, cache_prefix=prefix)  # writes the state file

            def restarted() -> float:
                backend.reset(clear_prefix_cache=True)  # memory only: the file stays
                result = generate(backend, prompt, config, tools=tools, cache_prefix=prefix)
                hits.append(result.cache_hit)
                return result.ttft_ms

            restart_ms = repeat(restarted, settings.reps, settings.warmup)
            state_bytes = backend.prefix_cache.stats().disk_bytes
        finally:
            backend.prefix_cache = kept
            backend.reset(clear_prefix_cache=True)
    return {"restart_ms": summarize(restart_ms), "restart_cache_hits": sum(hits[settings.warmup:]),
            "state_file_bytes": state_bytes}


def filler_ids(backend: LlamaBackend, count: int) -> list[int]:
    """``count`` prompt tokens of realistic text (tool declarations), repeated as needed."""
    from botpsy.world.world import REGISTRY

    text = "\n".join(json.dumps(tool.spec()) for tool in REGISTRY.values())
    ids = backend.tokenize(text)
    return (ids * (count // max(1, len(ids)) + 1))[:count]


def measure_throughput(backend: LlamaBackend, context: int, settings: Settings,
                       meter: RaplMeter | None) -> tuple[dict[str, Any], dict[str, list[float]] | None]:
    """Prefill and decode tok/s at ``context`` prompt tokens; joules per token when ``meter`` is given."""
    if context + settings.decode_tokens >= backend.n_ctx:
        return {"context_tokens": context, "skipped": f"needs {context + settings.decode_tokens} tokens; "
                                                      f"n_ctx is {backend.n_ctx}"}, None
    ids = filler_ids(backend, context)
    prefill, decode = [], []
    energy: dict[str, list[float]] | None = {"prefill": [], "decode": []} if meter else None
    for rep in range(settings.warmup + settings.reps):
        readings: list[list[int]] = [meter.read()] if meter else []
        prefill_s, decode_s = backend.time_prefill_decode(
            ids, settings.decode_tokens, between=(lambda: readings.append(meter.read())) if meter else None)
        if rep < settings.warmup:
            continue
        prefill.append(context / prefill_s)
        decode.append(settings.decode_tokens / decode_s)
        if meter and energy is not None:
            readings.append(meter.read())
            energy["prefill"].append(meter.joules_between(readings[0], readings[1]) / context)
            energy["decode"].append(meter.joules_between(readings[1], readings[2]) / settings.decode_tokens)
    record = {"context_tokens": context, "decode_tokens": settings.decode_tokens,
              "prefill_tokens_per_s": summarize(prefill, 1), "decode_tokens_per_s": summarize(decode, 2)}
    return record, energy


def bench_task():
    """The multi-step device-world task the agent measurements use (the first of the test split)."""
    from botpsy.world import generate_tasks

    tasks = generate_tasks("test", 60, seed=0)
    return next((t for t in tasks if t.kind == "multi_step"), tasks[0])


def agent_config(settings: Settings):
    from botpsy.agent.loop import AgentConfig

    generation = GenerateConfig(max_tokens=settings.turn_tokens, sampling=SamplingConfig(temperature=0),
                                on_loop="recover", thinking_budget=max(1, settings.turn_tokens // 2))
    return AgentConfig(max_steps=1, token_budget=settings.turn_tokens * settings.task_turns, generation=generation)


def measure_agent_turn(backend: LlamaBackend, settings: Settings) -> dict[str, Any]:
    """One agent step (render, generate, parse, run the calls) on the task's first request."""
    from dataclasses import replace

    from botpsy.agent.loop import run_agent
    from botpsy.world import build_world

    task, config = bench_task(), agent_config(settings)
    last: dict[str, Any] = {}

    def turn() -> float:
        world = build_world(task)
        try:
            steps = list(run_agent(backend, world, list(task.messages), task.tools, replace(config, max_steps=1)))
        finally:
            world.close()
        final = steps[-1]
        last.update(completion_tokens=final.completion_tokens, tool_calls=final.tool_calls,
                    prompt_tokens=final.prompt_tokens, stop_reason=final.stop_reason)
        return final.total_ms

    try:
        times = repeat(turn, settings.reps, settings.warmup)
    except BackendError as exc:
        return {"skipped": f"the backend failed: {exc}"}
    return {"ms": summarize(times), **last, "task_id": task.id, "prefix_cache": "warm after the warm-up turn"}


def measure_task(backend: LlamaBackend, settings: Settings, botpsy_format: bool) -> dict[str, Any]:
    """The whole multi-step task with the simulated user, end to end."""
    if not botpsy_format:
        return {"skipped": "the model does not use botpsy's chat and tool-call tokens, so it cannot act on the "
                           "device world (its agent turn is still timed)"}
    from dataclasses import replace

    from botpsy.agent.solve import solve_task

    task = bench_task()
    config = replace(agent_config(settings), max_steps=settings.task_turns)
    last: dict[str, Any] = {}

    def run() -> float:
        record = solve_task(backend, task, config, settings.task_turns)
        last.update(model_turns=record["stats"]["model_steps"], completion_tokens=record["stats"]["completion_tokens"],
                    success=bool(record["success"]))
        return record["seconds"] * 1000

    times = repeat(run, settings.reps, settings.warmup)
    return {"ms": summarize(times), "task_id": task.id, "kind": task.kind, **last}


def energy_record(energy: dict[str, list[float]] | None, meter: RaplMeter | None) -> dict[str, Any] | str:
    if not energy or not energy["decode"] or meter is None:
        return NOT_AVAILABLE
    return {"decode_joules_per_token": summarize(energy["decode"], 6),
            "prefill_joules_per_token": summarize(energy["prefill"], 7), "domains": meter.names(),
            "note": "whole-package counters: other work on the machine counts too"}


def bench_model(path: Path, settings: Settings, bandwidth_gb_per_s: float, last_level_cache: int | None,
                meter: RaplMeter | None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every measurement of one model file, as its ``models[]`` entry of the card."""
    info = model_info(path)
    n_ctx = min(settings.n_ctx, info.pop("trained_context") or settings.n_ctx)
    options = BackendOptions(threads=settings.threads, n_ctx=n_ctx)
    log(f"{info['name']}: loading ({info['format']}, {info['file_bytes'] / 2**20:.1f} MiB)")
    backend, loaded = load(path, options, settings.reps, settings.warmup)
    try:
        botpsy_format = speaks_botpsy_format(backend)
        with PeakRss() as peak:
            log(f"{info['name']}: time to first token at {settings.tool_counts} tools")
            ttft = [measure_ttft(backend, count, settings) for count in settings.tool_counts]
            log(f"{info['name']}: prefill and decode at {settings.contexts} tokens")
            throughput, energy = [], None
            for context in settings.contexts:
                record, measured_energy = measure_throughput(backend, context, settings, meter)
                throughput.append(record)
                energy = energy or measured_energy  # the shortest measured context's energy
            log(f"{info['name']}: agent turn and task")
            turn = measure_agent_turn(backend, settings)
            task = measure_task(backend, settings, botpsy_format)
    finally:
        backend.close()
    memory = {"estimate": loaded["estimate"], "rss_before_load_bytes": loaded["rss_before_load_bytes"],
              "rss_loaded_bytes": loaded["rss_loaded_bytes"], "peak_rss_generating_bytes": peak.bytes}
    entry = {**info, "speaks_botpsy_format": botpsy_format, "n_ctx": n_ctx, "load_ms": loaded["load_ms"],
             "memory": memory, "ttft": ttft, "throughput": throughput, "agent_turn": turn, "task": task,
             "energy": energy_record(energy, meter)}
    return finish_entry(entry, path, bandwidth_gb_per_s, last_level_cache)


def finish_entry(entry: dict[str, Any], path: Path, bandwidth_gb_per_s: float,
                 last_level_cache: int | None) -> dict[str, Any]:
    """The figures derived from medians (warm/cold ratios, the roofline), (re)computed for ``entry``."""
    for record in entry["ttft"]:
        if "skipped" not in record:
            record["warm_over_cold"] = round(record["warm_ms"]["median"] / max(1e-9, record["cold_ms"]["median"]), 4)
    measured = [t for t in entry["throughput"] if "skipped" not in t]
    decode = measured[0]["decode_tokens_per_s"]["median"] if measured else 0.0
    context = measured[0]["context_tokens"] if measured else 0
    entry["roofline"] = roofline(bytes_per_token(path), bandwidth_gb_per_s, decode, context, last_level_cache)
    return entry
