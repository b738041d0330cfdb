"""Tools from any MCP server, callable from botpsy's (synchronous) agent loop.

``McpToolSource("python my_server.py")`` starts the server as a subprocess (stdio transport,
the ``mcp`` SDK's ``Client``), lists its tools, and keeps the connection open in a background
thread with its own event loop; ``call(name, arguments)`` sends one ``tools/call`` and waits for
its result as a plain dict, the shape device-world tools return:

* ``structuredContent`` when the server gives one (a JSON object), else ``{"result": text}``
  (the text parsed when it is a JSON object);
* a tool error (``isError``) or a protocol error as ``{"error": "tool_error", "message": ...}``
  (or the server's own error object when it sends one); no answer within ``timeout_s`` as
  ``{"error": "tool_timeout", ...}``.

A server that asks its user to confirm a call (MCP elicitation) is answered "yes" only for a
call this user already approved in botpsy (``call(..., approved=True)``), and "no" otherwise:
the confirmation happens once, in botpsy, not a second time behind its back.

Validation and confirmation happen before a call gets here (``host.ToolHost``). Whether a tool
is sensitive comes from its MCP annotations: anything not marked read-only
(``readOnlyHint``) or non-destructive (``destructiveHint: false``) is, as the spec's defaults say.

Example::

    source = McpToolSource("botpsy mcp --db device.sqlite")
    print([tool.name for tool in source.tools])
    print(source.call("set_wifi", {"enabled": False}))
    source.close()
"""

from __future__ import annotations

import asyncio
import json
import shlex
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any


@dataclass
class RemoteTool:
    """One tool an MCP server offers."""

    name: str
    description: str
    input_schema: dict[str, Any]
    sensitive: bool

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style declaration shown to the model (sensitive tools say so, as the world's do)."""
        description = self.description + (" Sensitive: runs only after the user confirms." if self.sensitive else "")
        return {"type": "function", "function": {"name": self.name, "description": description.strip(),
                                                 "parameters": self.input_schema}}


def is_sensitive(annotations: Any) -> bool:
    """Sensitive unless the server says read-only or non-destructive (MCP's defaults: destructive)."""
    if annotations is None:
        return True
    return not (annotations.read_only_hint is True or annotations.destructive_hint is False)


def result_dict(result: Any) -> dict[str, Any]:
    """An MCP ``CallToolResult`` as the dict the agent shows the model."""
    text = "\n".join(getattr(block, "text", "") for block in result.content or [] if getattr(block, "text", None))
    structured = result.structured_content if isinstance(result.structured_content, dict) else None
    if result.is_error:
        if structured is not None and "error" in structured:  # the server's own error code (botpsy mcp's)
            return structured
        return {"error": "tool_error", "message": text or "the tool reported an error"}
    if structured is not None:
        return structured
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"result": text}


class McpToolSource:
    """One MCP server's tools, with the connection held open in a background thread."""

    def __init__(self, command: str, timeout_s: float = 30.0) -> None:
        self.command = command
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("an --mcp command is empty")
        self.timeout_s = timeout_s
        self.tools: list[RemoteTool] = []
        self._loop = asyncio.new_event_loop()
        self._jobs: asyncio.Queue | None = None
        self._ready = threading.Event()
        self._approved = False  # the call in flight was confirmed by the user (calls run one at a time)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="botpsy-mcp")
        self._thread.start()
        self._session = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        if not self._ready.wait(timeout_s) or self._failure is not None:
            detail = f"{type(self._failure).__name__}: {self._failure}" if self._failure else "no answer"
            self.close()
            raise ValueError(f"could not start the MCP server {command!r} ({detail})")

    async def _serve(self) -> None:
        """Owns the client for its whole life (anyio wants a context left by the task that entered it)."""
        from mcp import Client, StdioServerParameters

        self._jobs = asyncio.Queue()
        try:
            server = StdioServerParameters(command=self.argv[0], args=self.argv[1:])
            async with Client(server, read_timeout_seconds=self.timeout_s, elicitation_callback=self._elicit) as client:
                listing = await client.list_tools()
                self.tools = [RemoteTool(t.name, t.description or "", dict(t.input_schema), is_sensitive(t.annotations))
                              for t in listing.tools]
                self._ready.set()
                while (job := await self._jobs.get()) is not None:
                    name, arguments, approved, future = job
                    self._approved = approved
                    try:
                        future.set_result(result_dict(await client.call_tool(name, arguments)))
                    except Exception as exc:  # a protocol error is the tool's failure, shown to the model
                        future.set_result({"error": "tool_error", "message": f"{type(exc).__name__}: {exc}"})
        except BaseException as exc:  # noqa: BLE001  (reported by __init__ or close)
            self._failure = exc
            self._ready.set()

    async def _elicit(self, context: Any, params: Any):
        import mcp.types as types

        if self._approved:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    def call(self, name: str, arguments: dict[str, Any], approved: bool = False) -> dict[str, Any]:
        """Run one tool call on the server and wait for its result (see the module docstring)."""
        if self._failure is not None or self._jobs is None:
            return {"error": "tool_error", "message": f"the MCP server {self.command!r} is not running"}

        async def submit() -> dict[str, Any]:
            future = self._loop.create_future()
            await self._jobs.put((name, arguments, approved, future))
            return await future

        pending = asyncio.run_coroutine_threadsafe(submit(), self._loop)
        try:
            return pending.result(self.timeout_s)
        except FutureTimeout:
            pending.cancel()
            return {"error": "tool_timeout", "message": f"{name} did not answer within {self.timeout_s:.0f} s"}

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        if self._jobs is not None and self._failure is None:
            self._loop.call_soon_threadsafe(self._jobs.put_nowait, None)
            try:
                self._session.result(self.timeout_s)
            except Exception:  # noqa: BLE001  (the server may already be gone; we are closing anyway)
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self.timeout_s)
