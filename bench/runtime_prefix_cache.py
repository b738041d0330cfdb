"""Prefix-cache benchmark: time to first token of a turn whose ~2k-token tools prefix is cached vs cold.

    .venv/bin/python bench/runtime_prefix_cache.py              # writes bench_out/prefix_cache.json
    .venv/bin/python bench/runtime_prefix_cache.py --model runs/speedrun/gguf/model-q4_k_m.gguf --json

The prompt is what the agent renders: a system turn declaring device-world tools (as many as
it takes to reach ``--prefix-tokens``) and a user request. Each round runs, on one
``LlamaBackend``:

* **cold**: the context and the prefix cache cleared, the whole prompt prefilled (no prefix given);
* **first**: cleared again, the prefix given: it is prefilled, its state saved (a miss), then the rest;
* **cached**: the context cleared but the cache kept, a different user request: the saved
  state is restored and only the request is prefilled.

TTFT is ``GenerationResult.ttft_ms`` (tokenizing, prefill and the first sampled token). Rounds
alternate the three kinds so a busy machine slows them alike; medians are reported. As a
correctness check, the cached and cold turns of the same request must produce the same tokens
(seeded sampling, ``--check-tokens`` of them). Target: cached TTFT <= 0.2 x cold TTFT.

The default model is the tiny default-spec Qwen3.5 (4 layers, hybrid), built by
``bench/tiny_gguf.py`` on first use.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from botpsy.config import parse_config
from botpsy.output import write_benchmark
from botpsy.runtime.backend import BackendOptions, SamplingConfig
from botpsy.runtime.generate import GenerateConfig, chat_prompt, generate
from botpsy.runtime.llama_backend import LlamaBackend

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_gguf import device_tools, tiny_gguf  # noqa: E402

TARGET_RATIO = 0.2
SYSTEM = "You are a helpful on-device assistant. Use the tools to act on the user's device."
REQUESTS = ["Set an alarm for 7:30 tomorrow called gym.", "Turn off Wi-Fi.", "What is on my calendar today?",
            "Send Alice a message saying I'll be late.", "Lower the brightness to 40 percent.",
            "Add milk to my shopping list.", "Call mom.", "What's the weather tomorrow?"]


@dataclass
class PrefixBenchConfig:
    """Time to first token with and without the tools-prefix cache."""

    model: str = field(default="", metadata={"help": "GGUF file (default: the tiny default-spec model, built on first use)."})
    prefix_tokens: int = field(default=2048, metadata={"help": "Declare tools until the system turn has this many tokens."})
    rounds: int = field(default=7, metadata={"help": "Rounds of cold / first / cached turns."})
    threads: int = field(default=2, metadata={"help": "llama.cpp threads."})
    n_ctx: int = field(default=4096, metadata={"help": "Context size."})
    check_tokens: int = field(default=16, metadata={"help": "Tokens compared between cached and cold turns."})
    out: str = field(default="bench_out/prefix_cache.json", metadata={"help": "Where to write the JSON results."})
    json: bool = field(default=False, metadata={"help": "Print the JSON results instead of the summary."})


def tools_for(backend: LlamaBackend, target_tokens: int) -> list[dict]:
    """The first device tools whose declarations make the system turn at least ``target_tokens`` long."""
    tools = device_tools()
    for count in range(1, len(tools) + 1):
        _, prefix = chat_prompt([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "x"}], tools[:count])
        if len(backend.tokenize(prefix)) >= target_tokens:
            return tools[:count]
    return tools


def turn(backend: LlamaBackend, tools: list[dict], request: str, config: GenerateConfig, use_prefix: bool):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": request}]
    prompt, prefix = chat_prompt(messages, tools)
    return generate(backend, prompt, config, tools=tools, cache_prefix=prefix if use_prefix else "")


def run(cfg: PrefixBenchConfig) -> dict:
    model = Path(cfg.model) if cfg.model else tiny_gguf()
    backend = LlamaBackend(model, BackendOptions(threads=cfg.threads, n_ctx=cfg.n_ctx))
    tools = tools_for(backend, cfg.prefix_tokens)
    config = GenerateConfig(max_tokens=cfg.check_tokens, on_loop="observe",
                            sampling=SamplingConfig(temperature=0.8, top_k=40, seed=3))
    times: dict[str, list[float]] = {"cold": [], "first": [], "cached": []}
    same_tokens, prompt_tokens = [], 0
    for index in range(cfg.rounds):
        request = REQUESTS[index % len(REQUESTS)]
        backend.reset(clear_prefix_cache=True)
        cold = turn(backend, tools, request, config, use_prefix=False)
        backend.reset(clear_prefix_cache=True)
        first = turn(backend, tools, REQUESTS[(index + 1) % len(REQUESTS)], config, use_prefix=True)
        backend.reset()  # keep the saved prefix, drop the live context
        cached = turn(backend, tools, request, config, use_prefix=True)
        assert cached.cache_hit and not first.cache_hit and not cold.cache_hit
        times["cold"].append(cold.ttft_ms)
        times["first"].append(first.ttft_ms)
        times["cached"].append(cached.ttft_ms)
        same_tokens.append(cached.text == cold.text)
        prompt_tokens = cold.prompt_tokens
    prefix_tokens = len(backend.tokenize(chat_prompt([{"role": "system", "content": SYSTEM},
                                                      {"role": "user", "content": "x"}], tools)[1]))
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    ratio = medians["cached"] / medians["cold"]
    return {
        "bench": asdict(cfg), "model": str(model), "backend": backend.describe(),
        "tools": len(tools), "prefix_tokens": prefix_tokens, "prompt_tokens": prompt_tokens,
        "saved_state_bytes": backend.prefix_cache.stats().bytes, "ttft_ms": times, "median_ttft_ms": medians,
        "cached_over_cold": ratio, "target": TARGET_RATIO, "meets_target": ratio <= TARGET_RATIO,
        "cached_equals_cold_tokens": all(same_tokens),
    }


def human(result: dict) -> str:
    m = result["median_ttft_ms"]
    verdict = "ok" if result["meets_target"] else "MISSED"
    return "\n".join([
        f"model {result['model']}  threads {result['backend']['threads']}",
        f"prefix {result['prefix_tokens']} tokens ({result['tools']} tools), prompt {result['prompt_tokens']} tokens, "
        f"saved state {result['saved_state_bytes'] / 2**20:.1f} MiB",
        f"median TTFT  cold {m['cold']:.1f} ms   first (miss + save) {m['first']:.1f} ms   cached {m['cached']:.1f} ms",
        f"cached / cold = {result['cached_over_cold']:.3f}  (target <= {TARGET_RATIO})  {verdict}",
        f"cached turns produce the cold turns' tokens: {result['cached_equals_cold_tokens']}",
    ])


def main(cfg: PrefixBenchConfig) -> int:
    result = run(cfg)
    write_benchmark(result, cfg.out, cfg.json, human)
    return 0 if result["meets_target"] and result["cached_equals_cold_tokens"] else 1


if __name__ == "__main__":
    raise SystemExit(main(parse_config(PrefixBenchConfig, prog="bench/runtime_prefix_cache.py")))
