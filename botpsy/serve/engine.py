"""How many requests share one model: a fair queue, a per-request backend view, and a worker per request.

One llama.cpp context decodes one sequence at a time, so requests take turns on it:

* ``FairSlot`` is a first-come, first-served lock with a bounded queue. A request that would
  make the queue longer than ``max_waiting`` is refused at once (HTTP 429), and a waiter whose
  client has gone leaves the queue without ever touching the model.
* ``SlotBackend`` is the model as one request sees it: every ``stream`` call waits for the slot
  and gives it back when the stream ends or is closed, and stops after the current token once
  the request is cancelled (the client disconnected). The slot is held per stream, not per
  request, so an assistant waiting for the user to confirm a payment holds nobody up.
  Tokenizing happens outside the slot: llama.cpp's tokenizer only reads the vocabulary.
* ``Worker`` runs one request's generation in its own thread and hands what it emits to the
  event loop through a ``Channel``, which wakes the loop only when it is waiting, and gives it
  everything that piled up since, so a fast model costs one wake-up per batch, not per token.

Example::

    slot = FairSlot(max_waiting=64)
    worker = Worker(asyncio.get_running_loop(), lambda emit, backend: ..., SlotBackend(model, slot))
    while (items := await worker.channel.get(timeout=0.25)) is not None: ...
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any, Callable, Iterator

from botpsy.runtime.backend import Backend, Prompt, SamplingConfig, StreamInfo, TokenOut
from botpsy.serve.protocol import APIError


class QueueFull(APIError):
    def __init__(self, waiting: int) -> None:
        super().__init__(429, f"the server is busy: {waiting} requests are already waiting for the model; retry later",
                         type="rate_limit_error", code="queue_full")


class FairSlot:
    """A FIFO lock over the model with a bounded queue; see the module docstring."""

    def __init__(self, max_waiting: int = 64) -> None:
        self.max_waiting = max_waiting
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()
        self._busy = False
        self.served = 0

    def acquire(self, cancelled: threading.Event) -> bool:
        """Wait for the model in arrival order; False when ``cancelled`` is set first."""
        ticket = object()
        with self._cond:
            if len(self._queue) >= self.max_waiting:
                raise QueueFull(len(self._queue))
            self._queue.append(ticket)
            try:
                while self._busy or self._queue[0] is not ticket:
                    if cancelled.is_set():
                        return False
                    self._cond.wait(0.05)  # wakes on release; the timeout only checks for cancellation
                self._busy = True
                self.served += 1
                return True
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def status(self) -> dict[str, Any]:
        with self._cond:
            return {"busy": self._busy, "waiting": len(self._queue), "served": self.served}


class Cancelled(Exception):
    """The request was cancelled (its client went away) while it waited for the model."""


class SlotBackend(Backend):
    """``inner`` as one request sees it: each stream holds the ``slot``; ``cancelled`` stops it."""

    def __init__(self, inner: Backend, slot: FairSlot, cancelled: threading.Event) -> None:
        self.inner, self.slot, self.cancelled = inner, slot, cancelled
        self.name = inner.name
        self.token_ids = inner.token_ids
        self.supports_prefix_cache = inner.supports_prefix_cache
        self.supports_constraint = inner.supports_constraint
        self.queue_ms = 0.0  # time spent waiting for the slot, over every stream of the request
        self.prompt_tokens = 0  # of the last stream
        self.generated = 0  # tokens streamed over every stream of the request
        self.constraint_hook: Callable[[Any], Any] | None = None  # rewrites constraints (forced tool calls)
        # With a switchable adapter, each stream sets it (on unless a request is answered by the base alone)
        # while it holds the slot, so a request never runs on the state another one left.
        self.adapter: bool | None = True if inner.adapter_switchable else None

    def tokenize(self, text: str) -> list[int]:
        return self.inner.tokenize(text)

    def detokenize(self, ids) -> str:
        return self.inner.detokenize(ids)

    def token_table(self):
        return self.inner.token_table()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def _stream(self, prompt: Prompt, sampling: SamplingConfig, max_tokens: int, prefix_tokens: int,
                info: StreamInfo, constraint: Any = None) -> Iterator[TokenOut]:
        if constraint is not None and self.constraint_hook is not None:
            constraint = self.constraint_hook(constraint)
        waited = time.perf_counter()
        if not self.slot.acquire(self.cancelled):
            raise Cancelled()
        self.queue_ms += (time.perf_counter() - waited) * 1000
        try:
            if self.adapter is not None:
                self.inner.use_adapter(self.adapter)
            stream = self.inner.stream(prompt, sampling, max_tokens, prefix_tokens,
                                       **({"constraint": constraint} if constraint is not None else {}))
            try:
                for token in stream:
                    self.generated += 1
                    _copy_info(stream.info, info)
                    yield token
                    if self.cancelled.is_set():
                        info.finish_reason = "stop"
                        return
            finally:
                stream.close()
                _copy_info(stream.info, info)
                self.prompt_tokens = info.prompt_tokens
        finally:
            self.slot.release()


def _copy_info(source: StreamInfo, target: StreamInfo) -> None:
    target.__dict__.update(source.__dict__)


class Channel:
    """Items from a worker thread to the event loop, collected in batches (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._items: list[Any] = []
        self._lock = threading.Lock()
        self._waiter: asyncio.Future | None = None

    def put(self, item: Any) -> None:
        """Called from the worker thread."""
        with self._lock:
            self._items.append(item)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self.loop.call_soon_threadsafe(_wake, waiter)

    async def get(self, timeout: float) -> list[Any]:
        """Everything put since the last call, waiting up to ``timeout`` seconds for something."""
        with self._lock:
            if self._items:
                items, self._items = self._items, []
                return items
            waiter = self._waiter = self.loop.create_future()
        try:
            await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            pass
        with self._lock:
            self._waiter = None
            items, self._items = self._items, []
        return items


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


DONE = object()  # the last item a worker puts: its job has ended


class Worker:
    """Runs ``job(emit)`` in a thread; ``emit`` puts items on ``channel``, then ``DONE`` follows.

    An exception in the job is put on the channel (an ``APIError`` as it is; anything else
    as a 500) before ``DONE``, so the request answers with an error instead of hanging.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, job: Callable[[Callable[[Any], None]], None],
                 cancelled: threading.Event) -> None:
        self.channel = Channel(loop)
        self.cancelled = cancelled
        self.thread = threading.Thread(target=self._run, args=(job,), daemon=True, name="botpsy-request")
        self.thread.start()

    def _run(self, job: Callable[[Callable[[Any], None]], None]) -> None:
        try:
            job(self.channel.put)
        except Cancelled:
            pass
        except APIError as exc:
            self.channel.put(exc)
        except Exception as exc:  # a bug or a backend failure: the client hears it, the server goes on
            self.channel.put(APIError(500, f"{type(exc).__name__}: {exc}", type="server_error"))
        finally:
            self.channel.put(DONE)

    def cancel(self) -> None:
        self.cancelled.set()
