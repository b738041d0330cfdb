"""``ToolHost``: the device world and tools from MCP servers, as one world for the agent loop.

The agent (``botpsy.agent.loop``) calls ``world.call(name, arguments)``, confirms held
sensitive calls with ``world.user.confirm(request_id)`` and reads the tool declarations from
``world.tool_specs()``. ``ToolHost`` offers the same interface over the device world plus any
number of ``McpToolSource``s, and applies the world's rules to the MCP tools too:

* arguments are checked against the tool's JSON schema before the server sees them; a bad
  call comes back as ``{"error": "invalid_arguments", ...}`` (``unknown_tool`` for a name
  nobody offers), which the agent feeds back to the model;
* a sensitive tool (``client.is_sensitive``) is held the first time with
  ``{"error": "needs_confirmation", "request_id": ...}`` and nothing is sent to its server; it
  runs when the user has confirmed that request and the model calls it again with the same
  arguments (exactly the world's protocol, so ``botpsy chat`` asks y/n and ``botpsy serve``
  shows its confirm / deny buttons for MCP tools as for built-in ones).

World calls go through one lock: ``botpsy serve`` runs requests in several threads, and the
world is one SQLite connection whose transactions must not interleave.

Example::

    host = ToolHost(World("device.sqlite"), [McpToolSource("python notes_server.py")])
    agent = Agent(backend, host, tools=host.tool_specs())
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any, Iterable

from jsonschema import Draft202012Validator

from botpsy.mcp_tools.client import McpToolSource, RemoteTool
from botpsy.world.world import World, canonical, parse_arguments

REQUEST_PREFIX = "mcpreq"


class ToolHost:
    """A ``World`` look-alike over the device world and MCP tools; see the module docstring.

    The host owns the sources and the world: ``close()`` closes them all.
    """

    def __init__(self, world: World, sources: Iterable[McpToolSource] = ()) -> None:
        self.world = world
        self.sources = list(sources)
        self.lock = threading.RLock()
        self.now, self.owner, self.city = world.now, world.owner, world.city
        self._remote: dict[str, tuple[RemoteTool, McpToolSource, Draft202012Validator]] = {}
        world_tools = {spec["function"]["name"] for spec in world.tool_specs()}
        for source in self.sources:
            for tool in source.tools:
                if tool.name in world_tools or tool.name in self._remote:
                    for each in self.sources:  # the host owns its sources, refused or not
                        each.close()
                    raise ValueError(f"the MCP server {source.command!r} offers {tool.name!r}, a name already taken; "
                                     "tool names must be unique")
                self._remote[tool.name] = (tool, source, Draft202012Validator(tool.input_schema))
        self._requests: dict[str, dict[str, Any]] = {}  # MCP confirmations: id -> name, arguments, status
        self._ids = itertools.count(1)
        self.user = HostUser(self)

    # ---- what the model sees and calls ------------------------------------------------------

    def tool_specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        if names is None:
            with self.lock:
                return self.world.tool_specs() + [tool.spec() for tool, _, _ in self._remote.values()]
        names = list(names)
        world_names = [n for n in names if n not in self._remote]
        with self.lock:
            specs = {s["function"]["name"]: s for s in self.world.tool_specs(world_names)}
        specs.update({n: self._remote[n][0].spec() for n in names if n in self._remote})
        return [specs[n] for n in names]

    def call(self, name: str, arguments: Any = None) -> dict[str, Any]:
        if name in self._remote:
            return self._call_remote(name, arguments)
        with self.lock:
            return self.world.call(name, arguments)

    def _call_remote(self, name: str, arguments: Any) -> dict[str, Any]:
        tool, source, validator = self._remote[name]
        parsed, problem = parse_arguments(arguments)
        if problem is None:
            errors = sorted(validator.iter_errors(parsed), key=lambda e: list(e.absolute_path))[:3]
            problem = "; ".join(".".join(map(str, e.absolute_path)) + ": " + e.message if e.absolute_path
                                else e.message for e in errors) or None
        if problem is not None:
            return {"error": "invalid_arguments", "message": problem}
        approved = tool.sensitive and self._consume_approval(name, parsed)
        if tool.sensitive and not approved:
            return self._hold(name, parsed)
        return source.call(name, parsed, approved=approved)

    def _hold(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            key = canonical(arguments)
            request_id = next((rid for rid, r in self._requests.items()
                               if r["name"] == name and r["key"] == key and r["status"] == "pending"), None)
            if request_id is None:
                request_id = f"{REQUEST_PREFIX}{next(self._ids):03d}"
                self._requests[request_id] = {"name": name, "arguments": arguments, "key": key, "status": "pending"}
        return {"error": "needs_confirmation", "request_id": request_id,
                "message": f"{name} is sensitive: tell the user exactly what you are about to do and ask them to "
                           "confirm; if they agree, call it again with the same arguments."}

    def _consume_approval(self, name: str, arguments: dict[str, Any]) -> bool:
        key = canonical(arguments)
        with self.lock:
            for request in self._requests.values():
                if request["name"] == name and request["key"] == key and request["status"] == "approved":
                    request["status"] = "used"
                    return True
        return False

    # ---- the rest of the World interface the agent and the chat use ----------------------------

    def is_sensitive(self, name: str) -> bool:
        return self._remote[name][0].sensitive if name in self._remote else World.is_sensitive(name)

    def snapshot(self, full: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
        with self.lock:
            return self.world.snapshot(full)

    def close(self) -> None:
        for source in self.sources:
            source.close()
        self.world.close()


class HostUser:
    """The user side of a ``ToolHost``: decides the world's and the MCP tools' held calls alike."""

    def __init__(self, host: ToolHost) -> None:
        self._host = host

    def pending(self) -> list[dict[str, Any]]:
        host = self._host
        with host.lock:
            remote = [{"request_id": rid, "name": r["name"], "arguments": r["arguments"]}
                      for rid, r in host._requests.items() if r["status"] == "pending"]
            return host.world.user.pending() + remote

    def confirm(self, request_id: str) -> bool:
        return self._decide(request_id, "approved")

    def decline(self, request_id: str) -> bool:
        return self._decide(request_id, "declined")

    def _decide(self, request_id: str, status: str) -> bool:
        host = self._host
        with host.lock:
            request = host._requests.get(request_id)
            if request is not None:
                if request["status"] != "pending":
                    return False
                request["status"] = status
                return True
            world_user = host.world.user
            return world_user.confirm(request_id) if status == "approved" else world_user.decline(request_id)
