"""Throughput benchmark: decode tokens/s of ``generate()`` (loop guard on) vs a bare llama_cpp loop.

    .venv/bin/python bench/runtime_throughput.py               # writes bench_out/runtime_throughput.json
    .venv/bin/python bench/runtime_throughput.py --model runs/speedrun/gguf/model-q4_k_m.gguf --threads 4

Both run the same GGUF, prompt, thread count and sampling settings:

* **bare**: ``BareLlamaLoop``, what a llama_cpp user writes: ``Llama.generate`` and
  ``detokenize`` per token, stop at end of generation;
* **botpsy**: ``generate()`` on a ``LlamaBackend``, with everything the agent runs per token:
  incremental UTF-8 decoding, the chat stream parser, the two loop detectors (policy
  ``observe``, so a firing would be recorded, not acted on) and the tool-call constraint for
  ten offered device-world tools (``botpsy.chat.constrain``; it checks every token, and masks
  the logits only inside a call).

Decode speed is tokens after the first divided by the time from the first token to the last
(prefill excluded), measured twice: in wall-clock time and in this process's CPU time. On a
shared machine other processes steal the CPU at random and the wall-clock rates scatter by
tens of percent between identical runs; CPU time counts only the work done, so the target is
judged on it (with one thread there is no spin-waiting to blur it). Rounds alternate the two
loops; the median of each is compared. Target: botpsy >= 0.95 x bare. The driver's own cost
per token (parser and guards, without the model) is also measured on the generated text,
re-split by the scripted backend, and so is the constraint's cost per token inside a call
(finding the allowed tokens and masking the logits, on a real call's tokens), which the
free-running tiny model rarely opens.

The default model is the tiny default-spec Qwen3.5 (4 layers, hybrid), built by
``bench/tiny_gguf.py`` on first use.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from botpsy.config import parse_config
from botpsy.output import write_benchmark
from botpsy.runtime.backend import BackendOptions, SamplingConfig
from botpsy.runtime.generate import Finished, GenerateConfig, chat_prompt, generate, generate_stream
from botpsy.runtime.llama_backend import BareLlamaLoop, LlamaBackend, mask_outside
from botpsy.runtime.scripted import ScriptedBackend
from botpsy.world.registry import REGISTRY

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_gguf import tiny_gguf  # noqa: E402

TARGET_RATIO = 0.95
TOOLS = [REGISTRY[name].spec() for name in ("set_alarm", "list_alarms", "delete_alarm", "start_timer", "set_wifi",
                                            "set_brightness", "open_app", "send_message", "search_contacts",
                                            "create_event")]
CALL = {"name": "create_event", "arguments": {"title": "Dentist", "date": "2026-03-02", "start_time": "09:30"}}
MESSAGES = [{"role": "system", "content": "You are a helpful on-device assistant."},
            {"role": "user", "content": "Plan my morning: alarm at 7, weather, then a message to Alice."}]


@dataclass
class ThroughputBenchConfig:
    """Decode speed of botpsy's generation loop against a bare llama_cpp loop."""

    model: str = field(default="", metadata={"help": "GGUF file (default: the tiny default-spec model, built on first use)."})
    tokens: int = field(default=512, metadata={"help": "Tokens generated per run."})
    rounds: int = field(default=7, metadata={"help": "Alternating runs of each loop."})
    threads: int = field(default=1, metadata={"help": "llama.cpp threads (the same for both)."})
    n_ctx: int = field(default=2048, metadata={"help": "Context size."})
    temperature: float = field(default=0.8, metadata={"help": "Sampling temperature (seeded; the untrained "
                                                                 "default model only repeats one token when greedy)."})
    out: str = field(default="bench_out/runtime_throughput.json", metadata={"help": "Where to write the JSON results."})
    json: bool = field(default=False, metadata={"help": "Print the JSON results instead of the summary."})


def driver_cost_us(text: str, prompt: str, config: GenerateConfig) -> float:
    """Microseconds per token that ``generate()`` adds on top of a backend, on a generated text."""
    backend = ScriptedBackend([text] * 2)
    ids = backend.tokenize(text)
    began = time.perf_counter()
    list(backend.stream(prompt, config.sampling, len(ids)))
    bare = time.perf_counter() - began
    began = time.perf_counter()
    generate(backend, prompt, config, tools=TOOLS)
    return 1e6 * (time.perf_counter() - began - bare) / len(ids)


def constraint_cost_us(backend: LlamaBackend) -> float:
    """Microseconds per token to find the allowed tokens and mask a vocabulary-sized logits
    array, over the tokens of a real call (every one of them is inside the call)."""
    import numpy as np

    from botpsy.chat.constrain import CallConstraint
    from botpsy.chat.template import render_tool_call

    constraint = CallConstraint(TOOLS, backend.token_table())
    ids = backend.tokenize(render_tool_call(CALL["name"], CALL["arguments"]))
    logits = np.zeros(backend.n_vocab, dtype=np.float32)
    began, text = time.perf_counter(), ""
    for token in ids:
        allowed = constraint.allowed_ids(text)
        if allowed:
            mask_outside(logits, allowed)
        text += backend.detokenize([token])
    return 1e6 * (time.perf_counter() - began) / len(ids)


def timed_botpsy(backend: LlamaBackend, prompt: str, config: GenerateConfig):
    """(result, wall seconds, CPU seconds) from the first streamed event to the end of ``generate``."""
    first_wall = first_cpu = None
    for event in generate_stream(backend, prompt, config, tools=TOOLS):
        if first_wall is None:
            first_wall, first_cpu = time.perf_counter(), time.process_time()
        if isinstance(event, Finished):
            return event.result, time.perf_counter() - first_wall, time.process_time() - first_cpu
    raise RuntimeError("generate_stream ended without a result")


def run(cfg: ThroughputBenchConfig) -> dict:
    model = Path(cfg.model) if cfg.model else tiny_gguf()
    sampling = SamplingConfig(temperature=cfg.temperature, top_k=40, top_p=0.95, min_p=0.05, seed=1)
    config = GenerateConfig(max_tokens=cfg.tokens, sampling=sampling, on_loop="observe")
    backend = LlamaBackend(model, BackendOptions(threads=cfg.threads, n_ctx=cfg.n_ctx, prefix_cache_mb=0))
    bare = BareLlamaLoop(model, cfg.threads, cfg.n_ctx)
    prompt, _ = chat_prompt(MESSAGES)
    prompt_ids = backend.tokenize(prompt)
    wall: dict[str, list[float]] = {"bare": [], "botpsy": []}
    cpu: dict[str, list[float]] = {"bare": [], "botpsy": []}
    loops, text = 0, ""
    for _ in range(cfg.rounds):
        ids, seconds, cpu_seconds = bare.run(prompt_ids, cfg.tokens, sampling)
        wall["bare"].append((len(ids) - 1) / seconds)
        cpu["bare"].append((len(ids) - 1) / cpu_seconds)
        backend.reset()
        result, seconds, cpu_seconds = timed_botpsy(backend, prompt, config)
        wall["botpsy"].append((result.completion_tokens - 1) / seconds)
        cpu["botpsy"].append((result.completion_tokens - 1) / cpu_seconds)
        loops += result.loop_detected
        text = result.text
    medians = {clock: {kind: statistics.median(values) for kind, values in rates.items()}
               for clock, rates in (("cpu", cpu), ("wall", wall))}
    ratios = {clock: m["botpsy"] / m["bare"] for clock, m in medians.items()}
    return {
        "bench": asdict(cfg), "model": str(model), "backend": backend.describe(), "sampling": asdict(sampling),
        "tokens_per_cpu_s": cpu, "tokens_per_wall_s": wall, "median_tokens_per_s": medians,
        "botpsy_over_bare": ratios["cpu"], "botpsy_over_bare_wall": ratios["wall"],
        "driver_us_per_token": driver_cost_us(text, prompt, config),
        "constraint_us_per_call_token": constraint_cost_us(backend),
        "decode_us_per_token": 1e6 / medians["cpu"]["botpsy"], "loops_detected": loops,
        "target": TARGET_RATIO, "meets_target": ratios["cpu"] >= TARGET_RATIO,
    }


def human(result: dict) -> str:
    cpu, wall = result["median_tokens_per_s"]["cpu"], result["median_tokens_per_s"]["wall"]
    verdict = "ok" if result["meets_target"] else "MISSED"
    return "\n".join([
        f"model {result['model']}  threads {result['backend']['threads']}  {result['bench']['tokens']} tokens x "
        f"{result['bench']['rounds']} rounds",
        f"median decode, CPU time   bare llama_cpp {cpu['bare']:.0f} tok/s   botpsy generate() {cpu['botpsy']:.0f} tok/s",
        f"median decode, wall clock bare llama_cpp {wall['bare']:.0f} tok/s   botpsy generate() {wall['botpsy']:.0f} tok/s",
        f"botpsy / bare = {result['botpsy_over_bare']:.3f} CPU time  (target >= {TARGET_RATIO})  {verdict}"
        f"   [wall clock {result['botpsy_over_bare_wall']:.3f}]",
        f"driver cost (parser + loop guards) {result['driver_us_per_token']:.1f} us/token of "
        f"{result['decode_us_per_token']:.0f} us/token decode; loops detected: {result['loops_detected']}",
        f"tool-call constraint inside a call: {result['constraint_us_per_call_token']:.1f} us/token",
    ])


def main(cfg: ThroughputBenchConfig) -> int:
    result = run(cfg)
    write_benchmark(result, cfg.out, cfg.json, human)
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main(parse_config(ThroughputBenchConfig, prog="bench/runtime_throughput.py")))
