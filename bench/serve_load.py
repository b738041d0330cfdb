"""Load test of ``botpsy serve`` beside llama-cpp-python's own server, same GGUF, loopback only.

    .venv/bin/python bench/serve_load.py                      # writes bench_out/serve_load.json
    .venv/bin/python bench/serve_load.py --model M.gguf --clients 1 --clients 4 --clients 32

Both servers run as their own processes on 127.0.0.1 with one llama.cpp thread and the same
context, and are sent the same streamed ``/v1/completions`` requests (greedy, ``max_tokens``
fixed): prompts rendered the way botpsy renders them (a system turn with ten device tools, then
one of eight user requests). botpsy's loop guard runs on every token but only observes (the
untrained tiny model writes line breaks forever, and both servers must write the same number
of tokens). llama-cpp-python's server is started through this script so that it loads the
model with the same llama.cpp settings as botpsy (``new_llama``: no extra buffer types on AMX
machines, where they crash the tiny models), and with ``--interrupt_requests False``: by default
it ends a running stream whenever a new request arrives, which no concurrent client survives.

For each number of concurrent clients, a fixed number of requests is sent by that many client
threads, each reading its stream as it comes:

* **TTFT**: request sent to first token received (queueing and prefill included), p50 and p95;
* **aggregate tokens/s**: every token received over the level's wall time;
* **decode tokens/s** at one client: tokens after the first over first-to-last token time, per
  request, median over alternating one-client rounds; the target is botpsy >= 0.95 x
  llama-cpp-python. Wall-clock rates scatter on a shared machine, so the same ratio is also
  taken from the servers' process CPU time per generated token on a two-word prompt (decoding
  with next to no prefill); with the tools prompt, CPU per token (prefill included) is reported too;
* **integrity**: every request must end with a finish reason and ``[DONE]``, carry exactly
  ``max_tokens`` tokens (or end at the model's end of turn), and its text must equal what the
  same prompt gave when sent alone (no dropped, cut or mixed-up streams).

botpsy's ``/v1/chat/completions`` is loaded the same way at the largest client count (messages
and tools instead of a rendered prompt), checked for the same integrity; its tokens are counted
from ``usage`` (the chat parser holds back leading whitespace, which is all the untrained model
writes, so chunks are not tokens there, and its TTFT is the time to that first held-back chunk).

The default model is the tiny default-spec Qwen3.5 (4 layers, hybrid), built by
``bench/tiny_gguf.py`` on first use.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from botpsy.config import parse_config  # noqa: E402
from botpsy.output import table, write_benchmark  # noqa: E402

TARGET_RATIO = 0.95
TOOL_NAMES = ("set_alarm", "list_alarms", "delete_alarm", "start_timer", "set_wifi", "set_brightness", "open_app",
              "send_message", "search_contacts", "create_event")
REQUESTS = ["Set an alarm for 7:30 tomorrow.", "Turn off Wi-Fi.", "Text Alice that I am late.",
            "What is on my calendar on Friday?", "Start a 10 minute timer.", "Make the screen brighter.",
            "Open the camera app.", "Find Bob's number."]


@dataclass
class LoadBenchConfig:
    """Load-test botpsy serve and llama-cpp-python's server on the same GGUF (streamed, loopback)."""

    model: str = field(default="", metadata={"help": "GGUF file (default: the tiny model of bench/tiny_gguf.py)."})
    clients: list[int] = field(default_factory=lambda: [1, 4, 32], metadata={"help": "Concurrent clients per level."})
    requests_per_client: int = field(default=2, metadata={"help": "Requests per client at each level (at least 8 in all)."})
    max_tokens: int = field(default=48, metadata={"help": "Tokens generated per request."})
    n_ctx: int = field(default=4096, metadata={"help": "Context size of both servers."})
    threads: int = field(default=1, metadata={"help": "llama.cpp threads of both servers."})
    rounds: int = field(default=3, metadata={"help": "Alternating rounds of the one-client level (for the decode ratio)."})
    out: str = field(default="bench_out/serve_load.json", metadata={"help": "Where to write the JSON results."})
    json: bool = field(default=False, metadata={"help": "Print the JSON results instead of the table."})


# ---- the servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    def __init__(self, name: str, argv: list[str], port: int) -> None:
        self.name, self.port = name, port
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 180
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{name} exited: {self.process.stderr.read().decode()[-2000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start") from None
                time.sleep(0.3)

    def cpu_seconds(self) -> float:
        import psutil

        times = psutil.Process(self.process.pid).cpu_times()
        return times.user + times.system

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_botpsy(cfg: LoadBenchConfig, model: str) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "botpsy.cli", "serve", "--model", model, "--port", str(port), "--threads",
            str(cfg.threads), "--n-ctx", str(cfg.n_ctx), "--on-loop", "observe", "--temperature", "0",
            "--max-queue", "256", "--max-tokens-limit", str(max(cfg.max_tokens, 64))]
    return ServerProcess("botpsy serve", argv, port)


def start_llama_cpp(cfg: LoadBenchConfig, model: str) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, str(Path(__file__).resolve()), "--llama-server-child", "--model", model, "--port", str(port),
            "--host", "127.0.0.1", "--n_threads", str(cfg.threads), "--n_threads_batch", str(cfg.threads),
            "--n_ctx", str(cfg.n_ctx), "--verbose", "False",
            "--interrupt_requests", "False"]  # its default cuts a running stream off when the next request comes
    return ServerProcess("llama-cpp-python server", argv, port)


def llama_server_child() -> None:
    """llama-cpp-python's server ``main``, with the model loaded as botpsy's ``new_llama`` loads it."""
    import llama_cpp
    import llama_cpp.server.__main__ as server_main

    from botpsy.runtime.llama_backend import extra_buffer_types_enabled

    if not extra_buffer_types_enabled():
        default = llama_cpp.llama_cpp.llama_model_default_params

        def without_extra_buffer_types():
            params = default()
            params.use_extra_bufts = False
            return params
        llama_cpp.llama_cpp.llama_model_default_params = without_extra_buffer_types
    sys.argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a != "--llama-server-child"]
    server_main.main()


# ---- the clients --------------------------------------------------------------------------------


def prompts() -> tuple[list[str], list[dict], dict]:
    from botpsy.chat.template import render
    from botpsy.world.registry import REGISTRY

    tools = [REGISTRY[name].spec() for name in TOOL_NAMES]
    system = {"role": "system", "content": "You are the on-device assistant."}
    texts = [render([system, {"role": "user", "content": r}], tools, enable_thinking=True) for r in REQUESTS]
    return texts, tools, system


def stream_request(port: int, path: str, body: dict) -> dict:
    """One streamed request: when it was sent, when each token came, the text, how it ended."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    sent = time.perf_counter()
    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    record = {"status": response.status, "sent": sent, "times": [], "text": "", "finish": None, "done": False,
              "usage_tokens": None}
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            record["done"] = True
            break
        chunk = json.loads(payload)
        if chunk.get("usage"):
            record["usage_tokens"] = chunk["usage"]["completion_tokens"]
        for choice in chunk.get("choices") or []:
            piece = choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content") or \
                (choice.get("delta") or {}).get("reasoning_content")
            if piece:
                record["times"].append(time.perf_counter())
                record["text"] += piece
            record["finish"] = choice.get("finish_reason") or record["finish"]
    connection.close()
    return record


def run_level(server: ServerProcess, clients: int, bodies: list[tuple[int, str, dict]]) -> dict:
    """Send ``bodies`` (prompt index, path, body) from ``clients`` threads; per-request records and totals."""
    records: list[dict | None] = [None] * len(bodies)
    cursor = iter(range(len(bodies)))
    lock = threading.Lock()

    def client() -> None:
        while True:
            with lock:
                index = next(cursor, None)
            if index is None:
                return
            prompt_index, path, body = bodies[index]
            records[index] = {"prompt": prompt_index, **stream_request(server.port, path, body)}

    cpu_before = server.cpu_seconds()
    began = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    return {"records": records, "wall_s": wall, "cpu_s": server.cpu_seconds() - cpu_before}


def summarize(level: dict, clients: int, reference: dict[int, str], max_tokens: int) -> dict:
    records = level["records"]
    ttft = sorted((r["times"][0] - r["sent"]) * 1000 for r in records if r["times"])
    counted = [r["usage_tokens"] if r["usage_tokens"] is not None else len(r["times"]) for r in records]
    tokens = sum(counted)
    decode = [(len(r["times"]) - 1) / (r["times"][-1] - r["times"][0]) for r in records
              if len(r["times"]) > 1 and r["times"][-1] > r["times"][0]]
    problems = []
    for i, r in enumerate(records):
        if r is None or r["status"] != 200 or not r["done"] or r["finish"] is None:
            problems.append(f"request {i}: dropped or unfinished ({r and (r['status'], r['done'], r['finish'])})")
        elif r["finish"] == "length" and counted[i] != max_tokens:
            problems.append(f"request {i}: {counted[i]} tokens, expected {max_tokens}")
        elif r["prompt"] in reference and r["text"] != reference[r["prompt"]]:
            problems.append(f"request {i}: text differs from the same prompt sent alone")
    return {"clients": clients, "requests": len(records), "tokens": tokens, "wall_s": round(level["wall_s"], 3),
            "ttft_ms_p50": round(percentile(ttft, 50), 1), "ttft_ms_p95": round(percentile(ttft, 95), 1),
            "aggregate_tokens_per_s": round(tokens / level["wall_s"], 1),
            "decode_tokens_per_s_median": round(statistics.median(decode), 1) if decode else None,
            "server_cpu_ms_per_token": round(1000 * level["cpu_s"] / tokens, 3) if tokens else None,
            "problems": problems}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    k = (len(values) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# ---- the benchmark ------------------------------------------------------------------------------


def completion_bodies(texts: list[str], count: int, max_tokens: int) -> list[tuple[int, str, dict]]:
    return [(i % len(texts), "/v1/completions", {"model": "m", "prompt": texts[i % len(texts)], "max_tokens": max_tokens,
                                                 "temperature": 0, "stream": True}) for i in range(count)]


def chat_bodies(tools: list[dict], system: dict, count: int, max_tokens: int) -> list[tuple[int, str, dict]]:
    return [(i % len(REQUESTS), "/v1/chat/completions", {
        "model": "m", "messages": [system, {"role": "user", "content": REQUESTS[i % len(REQUESTS)]}], "tools": tools,
        "max_tokens": max_tokens, "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
        "on_loop": "observe"}) for i in range(count)]


def reference_texts(server: ServerProcess, bodies: list[tuple[int, str, dict]]) -> dict[int, str]:
    """Each prompt sent alone: what every later copy of it must return."""
    first = {}
    for prompt_index, path, body in bodies:
        if prompt_index not in first:
            first[prompt_index] = stream_request(server.port, path, body)["text"]
    return first


def bench_server(server: ServerProcess, cfg: LoadBenchConfig, texts: list[str]) -> dict:
    reference = reference_texts(server, completion_bodies(texts, len(texts), cfg.max_tokens))
    levels = {}
    for clients in cfg.clients:
        count = max(8, clients * cfg.requests_per_client)
        level = run_level(server, clients, completion_bodies(texts, count, cfg.max_tokens))
        levels[clients] = summarize(level, clients, reference, cfg.max_tokens)
    return {"levels": levels}


SHORT_PROMPT = "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"


def one_client_rounds(servers: list[ServerProcess], cfg: LoadBenchConfig, texts: list[str]) -> dict[str, list[dict]]:
    """The one-client level again, servers alternating, so drift on a shared machine hits both alike.

    Each round also sends a two-word prompt (``short``): with next to no prefill, the server's CPU
    time per token is its decoding cost, which preemption on a shared machine does not inflate.
    """
    out: dict[str, list[dict]] = {s.name: [] for s in servers}
    for _ in range(cfg.rounds):
        for server in servers:
            level = run_level(server, 1, completion_bodies(texts, len(texts), cfg.max_tokens))
            short = run_level(server, 1, completion_bodies([SHORT_PROMPT], 8, cfg.max_tokens))
            out[server.name].append({**summarize(level, 1, {}, cfg.max_tokens),
                                     "short": summarize(short, 1, {}, cfg.max_tokens)})
    return out


def run(cfg: LoadBenchConfig) -> dict:
    from tiny_gguf import tiny_gguf

    model = cfg.model or str(tiny_gguf())
    texts, tools, system = prompts()
    botpsy, llama = start_botpsy(cfg, model), start_llama_cpp(cfg, model)
    try:
        results = {botpsy.name: bench_server(botpsy, cfg, texts), llama.name: bench_server(llama, cfg, texts)}
        rounds = one_client_rounds([botpsy, llama], cfg, texts)
        biggest = max(cfg.clients)
        count = max(8, biggest * cfg.requests_per_client)
        chat_reference = reference_texts(botpsy, chat_bodies(tools, system, len(REQUESTS), cfg.max_tokens))
        chat = summarize(run_level(botpsy, biggest, chat_bodies(tools, system, count, cfg.max_tokens)), biggest,
                         chat_reference, cfg.max_tokens)
    finally:
        botpsy.stop()
        llama.stop()
    return {"bench": asdict(cfg), "model": model, "servers": results, "one_client_rounds": rounds,
            "botpsy_chat_completions": chat, "comparison": compare(rounds, results)}


def compare(rounds: dict[str, list[dict]], results: dict) -> dict:
    ours, theirs = "botpsy serve", "llama-cpp-python server"
    median = lambda name, key: statistics.median(r[key] for r in rounds[name] if r[key] is not None)  # noqa: E731
    decode_ratio = median(ours, "decode_tokens_per_s_median") / median(theirs, "decode_tokens_per_s_median")
    cpu_ratio = median(theirs, "server_cpu_ms_per_token") / median(ours, "server_cpu_ms_per_token")
    short = lambda name: statistics.median(r["short"]["server_cpu_ms_per_token"] for r in rounds[name])  # noqa: E731
    decode_cpu_ratio = short(theirs) / short(ours)
    problems = [p for r in results.values() for level in r["levels"].values() for p in level["problems"]]
    return {"decode_ratio_1_client": round(decode_ratio, 3), "target": TARGET_RATIO,
            "meets_target": decode_ratio >= TARGET_RATIO,
            "decode_cpu_ratio_1_client_short_prompt": round(decode_cpu_ratio, 3),
            "meets_target_cpu": decode_cpu_ratio >= TARGET_RATIO,
            "cpu_per_token_ratio_1_client_prefill_included": round(cpu_ratio, 3), "integrity_problems": problems}


def human(result: dict) -> str:
    rows = []
    for name, entry in result["servers"].items():
        for level in entry["levels"].values():
            rows.append({"server": name, "clients": level["clients"], "requests": level["requests"],
                         "TTFT p50 ms": level["ttft_ms_p50"], "TTFT p95 ms": level["ttft_ms_p95"],
                         "aggregate tok/s": level["aggregate_tokens_per_s"],
                         "decode tok/s": level["decode_tokens_per_s_median"],
                         "server CPU ms/tok": level["server_cpu_ms_per_token"], "problems": len(level["problems"])})
    chat = result["botpsy_chat_completions"]
    rows.append({"server": "botpsy serve (chat)", "clients": chat["clients"], "requests": chat["requests"],
                 "TTFT p50 ms": chat["ttft_ms_p50"], "TTFT p95 ms": chat["ttft_ms_p95"],
                 "aggregate tok/s": chat["aggregate_tokens_per_s"], "decode tok/s": chat["decode_tokens_per_s_median"],
                 "server CPU ms/tok": chat["server_cpu_ms_per_token"], "problems": len(chat["problems"])})
    c = result["comparison"]
    return "\n".join([table(rows), "",
                      f"decode ratio at 1 client (botpsy / llama-cpp-python, median of {result['bench']['rounds']} "
                      f"alternating rounds): wall {c['decode_ratio_1_client']:.3f}, server CPU time per token on a "
                      f"short prompt {c['decode_cpu_ratio_1_client_short_prompt']:.3f} (target >= {c['target']}); "
                      f"server CPU per token with the tools prompt, prefill included: llama-cpp-python / botpsy = "
                      f"{c['cpu_per_token_ratio_1_client_prefill_included']:.2f}",
                      f"integrity problems: {len(c['integrity_problems']) + len(chat['problems'])}"])


def main(cfg: LoadBenchConfig) -> int:
    result = run(cfg)
    write_benchmark(result, cfg.out, cfg.json, human)
    return 0 if not result["comparison"]["integrity_problems"] and not result["botpsy_chat_completions"]["problems"] else 1


if __name__ == "__main__":
    if "--llama-server-child" in sys.argv:
        llama_server_child()
    else:
        raise SystemExit(main(parse_config(LoadBenchConfig, prog="bench/serve_load.py")))
