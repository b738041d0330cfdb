"""Fixtures for ``botpsy serve``: the untrained tiny GGUF behind a real server on 127.0.0.1, and scripted servers.

The GGUF is the untrained two-layer reference model exported by ``botpsy export`` (Q8_0): its
greedy output is deterministic and degenerate (line breaks, again and again), which is what the
tests need from it: real llama.cpp decoding behind the API, a loop the guard must stop, and
tool calls whose shape the call constraint alone decides. What a model says is tested with the
scripted backend instead.
"""

from __future__ import annotations

import json

import pytest

from botpsy.serve.app import ServerState, create_app
from botpsy.serve.command import RunningServer
from botpsy.serve.engine import FairSlot
from botpsy.serve.protocol import Defaults, ServeLimits
from botpsy.runtime.backend import SamplingConfig


@pytest.fixture(scope="session")
def serve_gguf(tmp_path_factory, tiny_checkpoint):
    from botpsy.export.command import ExportConfig, export_checkpoint

    out = tmp_path_factory.mktemp("serve_gguf")
    export_checkpoint(ExportConfig(checkpoint=str(tiny_checkpoint), out=str(out), formats="q8_0", threads=1))
    return out / "model-q8_0.gguf"


@pytest.fixture(scope="session")
def llama_model(serve_gguf):
    from botpsy.runtime.backend import BackendOptions
    from botpsy.runtime.llama_backend import LlamaBackend

    backend = LlamaBackend(serve_gguf, BackendOptions(threads=1, n_ctx=2048, prefix_cache_mb=32))
    yield backend
    backend.close()


def greedy_defaults(**overrides) -> Defaults:
    return Defaults(**{"max_tokens": 64, "sampling": SamplingConfig(temperature=0.0), **overrides})


@pytest.fixture(scope="module")
def gguf_server(llama_model):
    """A model-mode server on the tiny GGUF (greedy by default), shared by a test module."""
    state = ServerState(llama_model, model_id="tiny", slot=FairSlot(16), defaults=greedy_defaults(),
                        limits=ServeLimits(max_tokens=1024, max_body_bytes=64 << 10))
    with RunningServer(create_app(state)) as server:
        server.state = state
        yield server


@pytest.fixture
def start_server():
    """start_server(backend, **state fields) -> a running server; all are stopped after the test."""
    servers = []

    def start(backend, **fields):
        fields.setdefault("defaults", greedy_defaults())
        state = ServerState(backend, model_id=fields.pop("model_id", "scripted"), **fields)
        servers.append(RunningServer(create_app(state)))
        servers[-1].state = state
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def sse_payloads(raw: str) -> list:
    """The JSON payloads of a raw SSE body (``[DONE]`` kept as the string)."""
    out = []
    for block in raw.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data:"):
                payload = line[5:].strip()
                out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out
