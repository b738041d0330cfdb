"""MCP both ways: ``botpsy mcp`` as a server (the device's tools, confirmation by elicitation), and
``botpsy chat`` / ``botpsy serve`` using an MCP server's tools under the world's validation and
confirmation rules, including botpsy talking to botpsy."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import anyio
import pytest

from botpsy.cli import main as cli_main
from botpsy.mcp_tools.client import McpToolSource
from botpsy.mcp_tools.host import ToolHost
from botpsy.world import World
from tests.agent.conftest import call, turn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def botpsy_mcp(db: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "botpsy.cli", "mcp", "--db", str(db), *flags]


def notes_command(state: Path) -> str:
    return shlex.join([sys.executable, str(HERE / "notes_server.py"), str(state)])


def notes_state(state: Path) -> dict:
    return json.loads(state.read_text()) if state.is_file() else {"notes": [], "calls": []}


def sent_messages(db: Path, text: str) -> int:
    world = World(str(db))
    try:
        return world.read("SELECT COUNT(*) AS n FROM messages WHERE text = ?", text)[0]["n"]
    finally:
        world.close()


# ---- botpsy as the MCP server ---------------------------------------------------------------------


async def client_session(db: Path, mode: str, answer: bool | None, work, *flags: str):
    import mcp.types as types
    from mcp import Client, StdioServerParameters

    async def elicit(context, params):
        return types.ElicitResult(action="accept", content={"approve": answer})

    command = botpsy_mcp(db, *flags)
    server = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    async with Client(server, mode=mode, elicitation_callback=elicit if answer is not None else None) as client:
        return await work(client)


def test_botpsy_mcp_lists_the_device_tools_with_annotations_and_runs_them(tmp_path):
    async def work(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("set_wifi", {"enabled": False})
        bad = await client.call_tool("set_alarm", {"time": "25:99"})
        return tools, result, bad

    tools, result, bad = anyio.run(client_session, tmp_path / "d.sqlite", "auto", None, work)
    assert len(tools) == 60
    assert tools["send_message"].annotations.destructive_hint is True
    assert tools["list_alarms"].annotations.read_only_hint is True
    assert tools["set_alarm"].input_schema["required"]
    assert not result.is_error and result.structured_content["wifi"] is False
    assert bad.is_error and bad.structured_content["error"] == "invalid_arguments"


@pytest.mark.parametrize("mode, answer, sent", [
    ("auto", True, 1), ("legacy", True, 1), ("auto", False, 0), ("legacy", None, 0)])
def test_botpsy_mcp_asks_the_clients_user_before_a_sensitive_call(tmp_path, mode, answer, sent):
    """2026-07-28 connections ask with an input_required round, handshake-era ones inline; no way to ask: held."""
    db = tmp_path / "d.sqlite"
    World(str(db), seed=0).close()

    async def work(client):
        return await client.call_tool("send_message", {"contact_id": "c01", "text": "On my way"})

    result = anyio.run(client_session, db, mode, answer, work)
    assert sent_messages(db, "On my way") == sent
    expected = {1: None, 0: "declined_by_user" if answer is False else "needs_confirmation"}[sent]
    assert result.structured_content.get("error") == expected


def test_botpsy_mcp_confirm_deny_never_asks(tmp_path):
    db = tmp_path / "d.sqlite"

    async def work(client):
        return await client.call_tool("send_message", {"contact_id": "c01", "text": "x"})

    result = anyio.run(client_session, db, "auto", True, work, "--confirm", "deny")
    assert result.structured_content["error"] == "needs_confirmation" and sent_messages(db, "x") == 0


# ---- botpsy using an MCP server's tools -------------------------------------------------------------


@pytest.fixture
def notes_host(tmp_path):
    state = tmp_path / "notes.json"
    host = ToolHost(World(":memory:", seed=0), [McpToolSource(notes_command(state))])
    yield host, state
    host.close()


def test_mcp_tools_are_validated_and_sensitive_ones_wait_for_the_user(notes_host):
    host, state = notes_host
    specs = {s["function"]["name"]: s["function"] for s in host.tool_specs()}
    assert {"add_note", "count_notes", "delete_notes", "set_wifi"} <= set(specs)
    assert "Sensitive" in specs["delete_notes"]["description"] and "Sensitive" not in specs["add_note"]["description"]
    assert host.call("add_note", {"text": ""})["error"] == "invalid_arguments"  # minLength, checked here
    assert host.call("add_note", {})["error"] == "invalid_arguments"
    assert host.call("add_note", {"text": "milk"}) == {"added": "milk", "count": 1}
    held = host.call("delete_notes", {})
    assert held["error"] == "needs_confirmation"
    assert [p["name"] for p in host.user.pending()] == ["delete_notes"]
    assert host.user.confirm(held["request_id"]) and host.call("delete_notes", {}) == {"deleted": 1}
    assert host.call("delete_notes", {})["error"] == "needs_confirmation"  # an approval is used once
    assert [c["name"] for c in notes_state(state)["calls"]] == ["add_note", "delete_notes"]  # bad calls never sent


@pytest.mark.parametrize("yes", [True, False])
def test_botpsy_chat_uses_an_mcp_servers_tools(tmp_path, capsys, yes):
    state = tmp_path / "notes.json"
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([turn("", call("add_note", text="buy milk")), turn("", call("delete_notes")),
                                   turn("Done.")]))
    argv = ["chat", "--model", f"scripted:{replies}", "--db", str(tmp_path / "d.sqlite"), "--mcp",
            notes_command(state), "note that I need milk, then clear my notes", "--json"] + (["--yes"] if yes else [])
    assert cli_main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    tools = [s for s in record["steps"] if s["type"] == "tool"]
    assert tools[0]["name"] == "add_note" and tools[0]["result"] == {"added": "buy milk", "count": 1}
    confirmation = next(s for s in record["steps"] if s["type"] == "confirmation")
    assert confirmation["name"] == "delete_notes" and confirmation["approved"] is yes
    assert [c["name"] for c in notes_state(state)["calls"]] == ["add_note"] + (["delete_notes"] if yes else [])
    assert record["answer"] == "Done."


@pytest.mark.parametrize("yes", [True, False])
def test_botpsy_chat_with_botpsy_mcp_as_the_server(tmp_path, capsys, yes):
    """botpsy talks to botpsy: the user confirms once, in the chat; the server's elicitation is answered for them."""
    remote = tmp_path / "remote.sqlite"
    World(str(remote), seed=0).close()
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([turn("", call("set_wifi", enabled=False)),
                                   turn("", call("send_message", contact_id="c01", text="Remote hello")),
                                   turn("Done.")]))
    server = shlex.join(botpsy_mcp(remote, "--tools", "set_wifi", "--tools", "send_message"))
    argv = ["chat", "--model", f"scripted:{replies}", "--db", str(tmp_path / "local.sqlite"), "--tools",
            "list_alarms", "--mcp", server, "wifi off and text c01", "--json"] + (["--yes"] if yes else [])
    assert cli_main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    tools = [s for s in record["steps"] if s["type"] == "tool"]
    assert tools[0]["name"] == "set_wifi" and tools[0]["result"]["wifi"] is False
    assert sent_messages(remote, "Remote hello") == (1 if yes else 0)
    assert tools[1]["error"] is None if yes else tools[1]["result"]["error"] == "declined_by_user"


def test_name_clashes_and_dead_servers_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="already taken"):
        ToolHost(World(":memory:"), [McpToolSource(shlex.join(botpsy_mcp(tmp_path / "x.sqlite")))])
    with pytest.raises(ValueError, match="could not start the MCP server"):
        McpToolSource(f"{sys.executable} -c 'import sys; sys.exit(3)'", timeout_s=20)


def test_botpsy_serve_assistant_mode_offers_mcp_tools(tmp_path):
    from botpsy.runtime.scripted import ScriptedBackend
    from botpsy.serve.app import create_app
    from botpsy.serve.command import RunningServer, ServeConfig, build_state
    from tests.serve.test_protocol import post

    state_file = tmp_path / "notes.json"
    backend = ScriptedBackend([turn("", call("add_note", text="call mum")), turn("Noted.")])
    state = build_state(ServeConfig(model="scripted:x.json", db=str(tmp_path / "d.sqlite"),
                                    mcp=[notes_command(state_file)]), backend)
    try:
        with RunningServer(create_app(state)) as server:
            status, body = post(server.url + "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "note: call mum"}]})
    finally:
        state.host.close()
    assert status == 200 and body["choices"][0]["message"]["content"] == "Noted."
    steps = [e["step"] for e in body["botpsy"]["events"] if e["event"] == "step"]
    assert [s["name"] for s in steps if s["type"] == "tool"] == ["add_note"]
    assert steps[1]["result"] == {"added": "call mum", "count": 1}
    assert "add_note" in backend.calls[0].prompt  # the model was offered the server's tool


def test_serve_mcp_needs_assistant_mode(capsys, tmp_path):
    replies = tmp_path / "r.json"
    replies.write_text("[]")
    assert cli_main(["serve", "--model", f"scripted:{replies}", "--mcp", "whatever"]) == 2
    assert "--mcp needs assistant mode" in capsys.readouterr().err
