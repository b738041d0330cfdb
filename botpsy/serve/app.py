"""The HTTP side of ``botpsy serve``: FastAPI routes, server-sent events, client disconnects, the web page.

Routes:

* ``POST /v1/chat/completions``: model mode (the client's tools, the client runs them) or
  assistant mode (``--db``: the device's tools, the server runs the agent); streamed or not;
* ``POST /v1/completions``: the prompt continued as it is (what ``botpsy eval --model
  http://...`` and other raw-prompt clients use), loop guard on;
* ``GET /v1/models``, ``GET /health``;
* ``GET /v1/confirmations`` and ``POST /v1/confirmations/{id}`` (``{"approved": bool}``):
  assistant mode's sensitive calls waiting for the person;
* ``GET /``: the web chat page (``web/``).

Each request's generation runs in its own worker thread (``engine.Worker``), queued fairly for
the one model. The body is read with a size cap (413 beyond it), checked (``protocol``: 400
with an OpenAI-style body), and a prompt longer than the context is refused before it is queued
(400 ``context_length_exceeded``); a full queue gives 429. When the client disconnects (a
closed stream, or a non-streamed request given up) the request is cancelled: it leaves the
queue, or stops after the current token and frees the model.

Example::

    app = create_app(ServerState(backend, model_id="tiny", slot=FairSlot(64)))
    uvicorn.run(app, host="127.0.0.1", port=8080)
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from botpsy.chat.template import RenderError, render
from botpsy.runtime.backend import Backend, BackendError
from botpsy.serve.assistant import AssistantSettings, Confirmations, assistant_job, conversation
from botpsy.serve.engine import DONE, FairSlot, QueueFull, SlotBackend, Worker
from botpsy.serve.protocol import (
    APIError,
    Defaults,
    ServeLimits,
    bad_request,
    new_id,
    now,
    parse_chat,
    parse_completion,
    parse_json_body,
)
from botpsy.serve.responses import ChatCollector, ChatStream, TextCollector, TextStream
from botpsy.serve.turns import TurnOptions, chat_job, completion_job, plan_turn

WEB = Path(__file__).parent / "web"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
POLL_S = 0.25  # how often a quiet request checks whether its client is still there


@dataclass
class ServerState:
    """Everything the routes share: the model, its queue, the limits, and in assistant mode the device."""

    backend: Backend
    model_id: str
    slot: FairSlot = field(default_factory=FairSlot)
    limits: ServeLimits = field(default_factory=ServeLimits)
    defaults: Defaults = field(default_factory=Defaults)
    options: TurnOptions = field(default_factory=TurnOptions)
    host: Any = None  # a ToolHost (assistant mode) or None (model mode)
    assistant: AssistantSettings = field(default_factory=AssistantSettings)
    confirmations: Confirmations = field(default_factory=Confirmations)

    @property
    def mode(self) -> str:
        return "assistant" if self.host is not None else "model"

    @property
    def n_ctx(self) -> int | None:
        return getattr(self.backend, "n_ctx", None)


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(title="botpsy serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.botpsy = state

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = APIError(exc.status_code, str(exc.detail), code="not_found" if exc.status_code == 404 else None)
        return JSONResponse(error.body(), status_code=exc.status_code)

    _add_generation_routes(app, state)
    _add_confirmation_routes(app, state)

    @app.get("/")
    async def page() -> FileResponse:
        return FileResponse(WEB / "index.html")

    app.mount("/static", StaticFiles(directory=WEB), name="static")
    return app


def _add_generation_routes(app: FastAPI, state: ServerState) -> None:
    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "mode": state.mode, "model": state.model_id, "n_ctx": state.n_ctx,
                "queue": state.slot.status()}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": state.model_id, "object": "model", "created": now(),
                                            "owned_by": "botpsy"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        chat = parse_chat(parse_json_body(await read_body(request, state.limits)), state.limits, state.defaults)
        if state.host is None:
            plan = _checked(lambda c: plan_turn(c, state.options), chat)
            await check_context(state, plan.prompt)
            job = chat_job(chat, plan, state.options)
        else:
            if chat.tools:
                raise bad_request("assistant mode offers the device's tools: send messages without tools",
                                  param="tools")
            await check_context(state, _checked(lambda c: render(conversation(c, state.host),
                                                                 state.host.tool_specs()), chat))
            job = assistant_job(chat, state.assistant, state.options, state.host, state.confirmations)
        request_id, model = new_id("chatcmpl"), chat.model or state.model_id
        writer = ChatStream(request_id, model, chat.include_usage) if chat.stream else ChatCollector(request_id, model)
        return await respond(request, state, job, chat.stream, writer)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        body = parse_completion(parse_json_body(await read_body(request, state.limits)), state.limits, state.defaults)
        await check_context(state, body.prompt)
        request_id, model = new_id("cmpl"), body.model or state.model_id
        writer = TextStream(request_id, model, body.include_usage) if body.stream else TextCollector(request_id, model)
        return await respond(request, state, completion_job(body, state.options), body.stream, writer)


def _add_confirmation_routes(app: FastAPI, state: ServerState) -> None:
    @app.get("/v1/confirmations")
    async def waiting() -> dict[str, Any]:
        pending = await anyio.to_thread.run_sync(state.host.user.pending) if state.host is not None else []
        return {"waiting": state.confirmations.waiting(), "pending": pending}

    @app.post("/v1/confirmations/{confirmation_id}")
    async def decide(confirmation_id: str, request: Request) -> dict[str, Any]:
        approved = parse_json_body(await read_body(request, state.limits)).get("approved")
        if not isinstance(approved, bool):
            raise bad_request('send {"approved": true} or {"approved": false}', param="approved")
        if state.confirmations.decide(confirmation_id, approved):
            return {"id": confirmation_id, "approved": approved}
        if state.host is not None:  # a held call of a non-streamed request (the world's request id)
            user = state.host.user
            if await anyio.to_thread.run_sync(user.confirm if approved else user.decline, confirmation_id):
                return {"id": confirmation_id, "approved": approved}
        raise APIError(404, f"no confirmation {confirmation_id!r} is waiting", code="not_found")


def _checked(render_fn, chat):
    try:
        return render_fn(chat)
    except RenderError as exc:
        raise bad_request(f"the conversation cannot be rendered: {exc}", param="messages") from None


async def read_body(request: Request, limits: ServeLimits) -> bytes:
    """The body, refused with 413 beyond ``limits.max_body_bytes`` (before reading it all when the length is sent)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise _too_large(limits)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise _too_large(limits)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limits: ServeLimits) -> APIError:
    return APIError(413, f"the request body is larger than {limits.max_body_bytes} bytes", code="request_too_large")


async def check_context(state: ServerState, prompt: str) -> None:
    """400 when the prompt alone fills the context (longer generations are cut: finish_reason "length")."""
    n_ctx = state.n_ctx
    if not n_ctx:
        return
    try:
        tokens = len(await anyio.to_thread.run_sync(state.backend.tokenize, prompt))
    except BackendError:  # a backend without a local tokenizer: its server will say
        return
    if tokens >= n_ctx:
        raise APIError(400, f"this model's context holds {n_ctx} tokens, but the prompt has {tokens}; shorten the "
                            "messages or offer fewer tools", param="messages", code="context_length_exceeded")


async def respond(request: Request, state: ServerState, job, stream: bool, writer) -> Response:
    """Run ``job`` in a worker and answer with its items, streamed as events or collected into one body."""
    queue = state.slot.status()
    if queue["waiting"] >= state.slot.max_waiting:
        raise QueueFull(queue["waiting"])
    cancelled = threading.Event()
    backend = SlotBackend(state.backend, state.slot, cancelled)
    worker = Worker(asyncio.get_running_loop(), lambda emit: job(emit, backend), cancelled)
    if stream:
        return StreamingResponse(_events(request, worker, writer), media_type="text/event-stream", headers=SSE_HEADERS)
    try:
        async for items in _batches(request, worker):
            for item in items:
                writer.add(item)
    finally:
        worker.cancel()
    return JSONResponse(writer.response())


async def _events(request: Request, worker: Worker, writer):
    try:
        async for items in _batches(request, worker):
            text = "".join(writer.render(item) for item in items)
            if text:
                yield text
    finally:  # the client went away, or the stream ended: either way the worker stops
        worker.cancel()


async def _batches(request: Request, worker: Worker):
    """The worker's items in batches until it is done; stops early if the client disconnects.

    Whether the client is still there is asked every ``POLL_S`` seconds even while items flow:
    a non-streamed request hears of a disconnect only by asking.
    """
    loop = asyncio.get_running_loop()
    checked = loop.time()
    while True:
        items = await worker.channel.get(POLL_S)
        if loop.time() - checked >= POLL_S or not items:
            checked = loop.time()
            if await request.is_disconnected():
                return
        done = DONE in items
        batch = [item for item in items if item is not DONE]
        if batch:
            yield batch
        if done:
            return
