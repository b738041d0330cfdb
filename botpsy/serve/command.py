"""``botpsy serve``: an OpenAI-compatible server with streaming tool calls, and a web chat page.

Two modes:

* **model mode** (default): ``/v1/chat/completions`` as any OpenAI endpoint; the client sends
  its tools and runs the calls the model makes. The loop guard, the thinking budget
  (``thinking_budget`` per request), the tool-prefix cache and constrained tool calls apply to
  every request; a loop that stops a turn ends it with ``finish_reason: "loop"``.
* **assistant mode** (``--db device.sqlite``): the server runs botpsy's agent over the device,
  with the device's tools (and any ``--mcp`` server's), streams every step, and holds sensitive
  calls until the person confirms them (the web page's buttons).

Requests take turns on the one model in arrival order (``--max-queue`` waiting at most; more get
429); a prompt longer than the context, a body over ``--max-body-kb`` and malformed input get
clear 4xx errors. The web chat page is at ``/``.

Examples::

    botpsy serve --model runs/speedrun/gguf/model-q4_k_m.gguf --port 8080
    botpsy serve --model M.gguf --db runs/speedrun/device.sqlite --mcp "python notes_server.py"
    python -c "import openai; c = openai.OpenAI(base_url='http://127.0.0.1:8080/v1', api_key='-'); ..."
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from botpsy.config import ConfigError
from botpsy.runtime.backend import BackendOptions, ModelLoadError, SamplingConfig, no_adapter_to_switch
from botpsy.runtime.generate import CALL_THRESHOLD_HELP, LOOP_POLICIES, GenerateConfig
from botpsy.runtime.prefix_cache import PREFIX_DIR_HELP, prefix_state_dir
from botpsy.serve.app import ServerState, create_app
from botpsy.serve.assistant import AssistantSettings
from botpsy.serve.engine import FairSlot
from botpsy.serve.protocol import Defaults, ServeLimits
from botpsy.serve.turns import TurnOptions


@dataclass
class ServeConfig:
    """Serve a model over the OpenAI chat-completions API, with a web chat page (--db: the assistant over a device)."""

    model: str = field(default="runs/speedrun/gguf/model-q4_k_m.gguf", metadata={
        "help": "GGUF file (llama.cpp), checkpoint folder (transformers) or scripted:FILE.json."})
    db: str = field(default="", metadata={
        "help": "Assistant mode: run the agent over this device database (created if new); empty: model mode."})
    mcp: list[str] = field(default_factory=list, metadata={
        "help": "Assistant mode: also offer the tools of this MCP server command (stdio), e.g. 'python notes.py'."})
    host: str = field(default="127.0.0.1", metadata={"help": "Address to listen on."})
    port: int = field(default=8080, metadata={"help": "Port to listen on."})
    model_name: str = field(default="", metadata={"help": "Model id in /v1/models and responses (default: the file name)."})
    threads: int = field(default=0, metadata={"help": "CPU threads (0 = all physical cores)."})
    prefix_cache_dir: str = field(default="auto", metadata={"help": PREFIX_DIR_HELP})
    n_ctx: int = field(default=16384, metadata={"help": "Context size in tokens (all 60 device tools take several thousand)."})
    max_tokens: int = field(default=1024, metadata={"help": "Tokens per turn when a request does not say."})
    max_tokens_limit: int = field(default=8192, metadata={"help": "Largest max_tokens a request may ask for."})
    thinking_budget: int = field(default=0, metadata={"help": "Reasoning tokens before the reasoning is closed, when a request does not say (0 = off)."})
    enable_thinking: bool = field(default=True, metadata={"help": "Let the model reason, when a request does not say."})
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature when a request does not say."})
    on_loop: str = field(default="recover", metadata={
        "help": "What the loop guard does, when a request does not say.", "choices": list(LOOP_POLICIES)})
    constrain_calls: bool = field(default=True, metadata={"help": "Keep tool calls to the offered tools, their parameters and enum values."})
    call_threshold: float = field(default=0.0, metadata={"help": CALL_THRESHOLD_HELP + " When a request does not say."})
    plain_on_base: bool = field(default=False, metadata={
        "help": "Answer requests that offer no tools with the base model alone: the adapter of a LoRA GGUF "
                "(`botpsy export --formats lora`) switched off, the base's own chat template, no reasoning. "
                "Requests with tools, and assistant mode, keep the adapter."})
    max_queue: int = field(default=64, metadata={"help": "Requests that may wait for the model; more get HTTP 429."})
    max_body_kb: int = field(default=4096, metadata={"help": "Largest request body in KiB; larger gets HTTP 413."})
    seed: int = field(default=0, metadata={"help": "Seed of a newly created device database."})
    max_steps: int = field(default=8, metadata={"help": "Assistant mode: most model turns per request."})
    token_budget: int = field(default=4096, metadata={"help": "Assistant mode: most generated tokens per request."})
    confirm_timeout_s: float = field(default=300.0, metadata={"help": "Assistant mode: seconds a sensitive call waits for the person before it is declined."})
    log_level: str = field(default="warning", metadata={"help": "uvicorn's log level.", "choices": ["debug", "info", "warning", "error"]})


def model_id_of(model: str) -> str:
    """The id /v1/models reports for a model source: a file's name without .gguf / .json, else its name.

    >>> model_id_of("runs/x/model-q4_k_m.gguf"), model_id_of("botpsy-0.5b-fn2"), model_id_of("scripted:a/b.json")
    ('model-q4_k_m', 'botpsy-0.5b-fn2', 'b')
    """
    name = Path(model.removeprefix("scripted:").rstrip("/")).name
    return name[:-5] if name.endswith((".gguf", ".json")) else name


def build_state(config: ServeConfig, backend) -> ServerState:
    """The server's shared state from the flags (the device and MCP servers opened in assistant mode)."""
    if config.mcp and not config.db:
        raise ConfigError("--mcp needs assistant mode: give --db (a device database, or :memory:)")
    if config.plain_on_base and not backend.adapter_switchable:
        raise ConfigError(no_adapter_to_switch(config.model))
    host = None
    if config.db:
        from botpsy.agent.chat import open_world
        from botpsy.mcp_tools.client import McpToolSource
        from botpsy.mcp_tools.host import ToolHost

        host = ToolHost(open_world(config.db, config.seed, []), [McpToolSource(cmd) for cmd in config.mcp])
    defaults = Defaults(max_tokens=min(config.max_tokens, config.max_tokens_limit),
                        thinking_budget=config.thinking_budget, enable_thinking=config.enable_thinking,
                        on_loop=config.on_loop, sampling=SamplingConfig(temperature=config.temperature),
                        call_threshold=config.call_threshold)
    return ServerState(
        backend=backend, model_id=config.model_name or model_id_of(config.model),
        slot=FairSlot(config.max_queue), defaults=defaults, options=TurnOptions(
            constrain_calls=config.constrain_calls,
            base_template=backend.base_chat_template() if config.plain_on_base else None),
        limits=ServeLimits(max_tokens=config.max_tokens_limit, max_body_bytes=config.max_body_kb << 10), host=host,
        assistant=AssistantSettings(config.max_steps, config.token_budget, config.confirm_timeout_s))


def main(config: ServeConfig) -> int:
    import uvicorn

    from botpsy.agent.backends import open_backend

    GenerateConfig(call_threshold=config.call_threshold)  # a bad value fails before the model loads
    try:
        options = BackendOptions(threads=config.threads, n_ctx=config.n_ctx,
                                 prefix_cache_dir=prefix_state_dir(config.prefix_cache_dir))
        backend = open_backend(config.model, options)
    except ModelLoadError as exc:
        print(f"botpsy serve: {exc}", file=sys.stderr)
        return 2
    state = None
    try:
        state = build_state(config, backend)
        if config.constrain_calls and backend.supports_constraint:
            backend.token_table().call_free_ids  # build the call masks' token table now, not on the first request
        if state.host is not None:
            from botpsy.serve.assistant import prepare

            try:
                ready = prepare(backend, state.host)
            except Exception as exc:  # noqa: BLE001 - the first request prefills it instead
                ready = {"source": "none"}
                print(f"botpsy serve: could not prepare the tools prefix ({exc}); the first request "
                      "will evaluate it", file=sys.stderr, flush=True)
            if ready["source"] != "none":
                print(f"botpsy serve: tools prefix ready ({ready['tokens']} tokens, {ready['source']}, "
                      f"{ready['ms'] / 1000:.1f} s)", file=sys.stderr, flush=True)
        print(f"botpsy serve: {state.mode} mode, {state.model_id} on http://{config.host}:{config.port}/v1 "
              f"(web chat page: http://{config.host}:{config.port}/)", file=sys.stderr, flush=True)
        uvicorn.run(create_app(state), host=config.host, port=config.port, log_level=config.log_level,
                    timeout_graceful_shutdown=5)
        return 0
    finally:
        if state is not None and state.host is not None:
            state.host.close()
        backend.close()


class RunningServer:
    """``app`` served by uvicorn in a background thread on a free port of 127.0.0.1 (tests and benchmarks).

    Example::

        with RunningServer(create_app(state)) as server:
            openai.OpenAI(base_url=server.url + "/v1", api_key="-")
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        self.port = sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)

    def __enter__(self) -> "RunningServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
