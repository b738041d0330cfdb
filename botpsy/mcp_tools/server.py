"""``botpsy mcp``: the device world's tools as an MCP server over stdio, for any agent framework.

Every registered tool is listed with its JSON schema and MCP annotations (``readOnlyHint`` for
tools that only read, ``destructiveHint`` for the sensitive ones: send, share, pay, delete,
uninstall). Calls go through ``World.call``, so arguments are validated, each call is one
transaction with an audit row, and the result (or the world's error) comes back both as text
and as ``structuredContent``; a world error is a tool error (``isError``).

A sensitive call runs only after the person using the client confirms it. The server asks
through MCP elicitation (inline on handshake-era connections, as an ``input_required`` round on
2026-07-28 ones) and runs the call if they accept; a client that cannot ask gets the world's
``needs_confirmation`` answer and nothing happens. ``--confirm deny`` never asks.

Example::

    botpsy mcp --db runs/speedrun/device.sqlite           # then point an MCP client at this command
    botpsy chat --mcp "botpsy mcp --db other.sqlite"       # botpsy itself as the client
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from botpsy.world.episode import compact
from botpsy.world.registry import REGISTRY
from botpsy.world.world import World

CONFIRM_KEY = "confirm"
CONFIRM_SCHEMA = {"type": "object", "properties": {"approve": {"type": "boolean", "description": "Run it?"}},
                  "required": ["approve"]}


@dataclass
class McpConfig:
    """Serve the device world's tools over MCP (stdio) for agent frameworks."""

    db: str = field(default="runs/speedrun/device.sqlite", metadata={
        "help": "Device database; created and seeded if it does not exist."})
    seed: int = field(default=0, metadata={"help": "Seed of a newly created device database."})
    tools: list[str] = field(default_factory=list, metadata={"help": "Offer only this tool (default: all tools)."})
    confirm: str = field(default="ask", metadata={
        "help": "Sensitive calls: ask the client's user (MCP elicitation), or deny them all.",
        "choices": ["ask", "deny"]})


def tool_listing(world: World) -> list[Any]:
    import mcp.types as types

    out = []
    for spec in world.tool_specs():
        fn = spec["function"]
        tool = REGISTRY[fn["name"]]
        annotations = types.ToolAnnotations(read_only_hint=not tool.writes, destructive_hint=tool.sensitive,
                                            open_world_hint=False)
        out.append(types.Tool(name=fn["name"], description=fn["description"], input_schema=fn["parameters"],
                              annotations=annotations))
    return out


def build_server(world: World, confirm: str = "ask"):
    """The low-level MCP ``Server`` over ``world`` (handlers below)."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_listing(world))

    async def call_tool(ctx, params):
        arguments = params.arguments or {}
        result = world.call(params.name, arguments)
        if result.get("error") == "needs_confirmation" and confirm == "ask":
            decision = await _ask(ctx, params, result)
            if isinstance(decision, types.InputRequiredResult):
                return decision
            if decision is not None:
                result = _decide(world, params.name, arguments, result["request_id"], decision)
        return types.CallToolResult(content=[types.TextContent(text=compact(result))],
                                    structured_content=result, is_error="error" in result)

    return Server("botpsy-device", version="1", instructions="The tools of one phone: device settings, "
                  "contacts, calendar, messages, notes and a shop. Sensitive tools ask the user first.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def _ask(ctx, params, held: dict[str, Any]):
    """The user's answer (True / False), an ``input_required`` round to ask it, or None: nobody can be asked."""
    import mcp.types as types

    answer = (params.input_responses or {}).get(CONFIRM_KEY)
    if answer is not None:  # the retry of an input_required round
        return _approved(answer)
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return None
    message = f"Allow {params.name} with {compact(params.arguments or {})}?"
    if not ctx.session.can_send_request:  # 2026-07-28: the question goes back as the result
        request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message,
                                                                           requested_schema=CONFIRM_SCHEMA))
        return types.InputRequiredResult(input_requests={CONFIRM_KEY: request})
    try:
        return _approved(await ctx.session.elicit_form(message, CONFIRM_SCHEMA, related_request_id=ctx.request_id))
    except Exception:  # noqa: BLE001  (the client could not ask after all: the call stays held)
        return None


def _approved(answer: Any) -> bool:
    return getattr(answer, "action", None) == "accept" and bool((getattr(answer, "content", None) or {}).get("approve"))


def _decide(world: World, name: str, arguments: dict[str, Any], request_id: str, approved: bool) -> dict[str, Any]:
    if not approved:
        world.user.decline(request_id)
        return {"error": "declined_by_user", "message": f"The user declined {name}; nothing was done."}
    world.user.confirm(request_id)
    return world.call(name, arguments)


async def serve_stdio(server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(config: McpConfig) -> int:
    import anyio

    from botpsy.agent.chat import open_world

    world = open_world(config.db, config.seed, config.tools)
    try:
        print(f"botpsy mcp: {len(world.tool_specs())} tools of {config.db} over stdio", file=sys.stderr)
        anyio.run(serve_stdio, build_server(world, config.confirm))
    finally:
        world.close()
    return 0
