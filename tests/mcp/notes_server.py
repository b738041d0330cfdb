"""A small MCP server for the tests (stdio): notes kept in a JSON file, and a log of every call it receives.

    python tests/mcp/notes_server.py STATE.json

``add_note`` is marked non-destructive (runs without confirmation in botpsy), ``count_notes``
read-only, and ``delete_notes`` carries no annotations, so MCP's defaults make it destructive:
botpsy must ask the user first.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

STATE = Path(sys.argv[1])


def load() -> dict:
    return json.loads(STATE.read_text()) if STATE.is_file() else {"notes": [], "calls": []}


TOOLS = [
    types.Tool(name="add_note", description="Add a note.", input_schema={
        "type": "object", "properties": {"text": {"type": "string", "minLength": 1}}, "required": ["text"]},
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False)),
    types.Tool(name="count_notes", description="How many notes there are.", input_schema={"type": "object"},
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="delete_notes", description="Delete every note.", input_schema={"type": "object"}),
]


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    state = load()
    state["calls"].append({"name": params.name, "arguments": params.arguments})
    if params.name == "add_note":
        state["notes"].append(params.arguments["text"])
        result = {"added": params.arguments["text"], "count": len(state["notes"])}
    elif params.name == "count_notes":
        result = {"count": len(state["notes"])}
    else:
        result = {"deleted": len(state["notes"])}
        state["notes"] = []
    STATE.write_text(json.dumps(state))
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(result))])


async def main() -> None:
    server = Server("notes", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
