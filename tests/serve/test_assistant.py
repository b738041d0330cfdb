"""Assistant mode (``botpsy serve --db``): the agent's steps streamed, sensitive calls waiting for the person."""

from __future__ import annotations

import http.client
import json

import pytest

from botpsy.mcp_tools.host import ToolHost
from botpsy.runtime.scripted import ScriptedBackend
from botpsy.serve.assistant import AssistantSettings
from botpsy.world import World
from tests.agent.conftest import call, turn
from tests.serve.test_protocol import post

ASK = [{"role": "user", "content": "Turn off Wi-Fi and tell Alice I'm late."}]


@pytest.fixture
def device(tmp_path):
    host = ToolHost(World(str(tmp_path / "device.sqlite"), seed=1))
    yield host
    host.close()


def first_contact(host: ToolHost) -> str:
    return host.world.read("SELECT id FROM contacts ORDER BY id LIMIT 1")[0]["id"]


def scripts(contact: str) -> list[str]:
    return [turn("", call("set_wifi", enabled=False)),
            turn("", call("send_message", contact_id=contact, text="I'm late")),
            turn("Wi-Fi is off and the message is sent.")]


def stream_chat(server, body: dict, answer=None) -> list:
    """A streamed request read event by event; ``answer(event)`` -> True/False decides confirmations."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}),
                       {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    events = []
    for line in response:
        line = line.decode().strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        chunk = json.loads(payload)
        events.append(chunk)
        ext = chunk.get("botpsy") or {}
        if ext.get("event") == "confirmation" and answer is not None:
            status, _ = post(server.url + f"/v1/confirmations/{ext['id']}", {"approved": answer(ext)})
            assert status == 200
    connection.close()
    return events


def steps_of(events: list) -> list[dict]:
    return [c["botpsy"]["step"] for c in events if (c.get("botpsy") or {}).get("event") == "step"]


@pytest.mark.parametrize("approve", [True, False])
def test_streamed_steps_and_a_confirmation_from_the_client(start_server, device, approve):
    contact = first_contact(device)
    server = start_server(ScriptedBackend(scripts(contact)), host=device)
    events = stream_chat(server, {"messages": ASK}, answer=lambda event: approve)
    steps = steps_of(events)
    assert [s["type"] for s in steps] == ["model", "tool", "model", "confirmation", "tool", "model"]
    assert steps[1]["name"] == "set_wifi" and steps[1]["error"] is None
    assert steps[3]["name"] == "send_message" and steps[3]["asked"] and steps[3]["approved"] is approve
    assert (steps[4]["error"] is None) is approve
    if not approve:
        assert steps[4]["result"]["error"] == "declined_by_user"
    asked = [c["botpsy"] for c in events if (c.get("botpsy") or {}).get("event") == "confirmation"]
    assert asked[0]["name"] == "send_message" and asked[0]["arguments"]["contact_id"] == contact
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in events if c["choices"])
    assert "message is sent" in content
    assert events[-1]["choices"][0]["finish_reason"] == "stop" and events[-1]["botpsy"]["stop_reason"] == "answer"
    sent = device.world.read("SELECT COUNT(*) AS n FROM messages WHERE contact_id = ? AND text = ?", contact, "I'm late")
    assert (sent[0]["n"] == 1) is approve
    assert device.snapshot(full=True)["settings"]["wifi"]["value"] in (False, "false", 0, "0")


def test_no_answer_in_time_declines(start_server, device):
    contact = first_contact(device)
    server = start_server(ScriptedBackend(scripts(contact)), host=device,
                          assistant=AssistantSettings(confirm_timeout_s=0.3))
    steps = steps_of(stream_chat(server, {"messages": ASK}))
    confirmation = next(s for s in steps if s["type"] == "confirmation")
    assert confirmation["asked"] and not confirmation["approved"]


def test_non_streamed_request_holds_the_call_and_lists_it(start_server, device):
    contact = first_contact(device)
    backend = ScriptedBackend(scripts(contact)[1:2] + [turn("Shall I send it?")])
    server = start_server(backend, host=device)
    status, body = post(server.url + "/v1/chat/completions", {"messages": ASK})
    assert status == 200 and body["choices"][0]["message"]["content"] == "Shall I send it?"
    pending = body["botpsy"]["pending_confirmations"]
    assert [p["name"] for p in pending] == ["send_message"]
    status, decided = post(server.url + f"/v1/confirmations/{pending[0]['request_id']}", {"approved": True})
    assert status == 200 and decided["approved"] is True
    assert post(server.url + "/v1/confirmations/nope", {"approved": True})[0] == 404


def test_assistant_mode_refuses_client_tools(start_server, device):
    server = start_server(ScriptedBackend([]), host=device)
    status, body = post(server.url + "/v1/chat/completions", {"messages": ASK, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})
    assert status == 400 and body["error"]["param"] == "tools"


def test_the_device_prefix_prepared_at_start_is_the_one_the_first_request_opens_with(start_server, device):
    """``botpsy serve --db`` prepares the system turn before serving (``assistant.prepare``); the first
    request's prompt must open with exactly that text, or the preparation would be wasted."""
    from botpsy.serve.assistant import prepare
    from tests.agent.test_chat import PreparingBackend

    backend = PreparingBackend([turn("Done.")])
    assert prepare(backend, device)["source"] == "prefilled"
    server = start_server(backend, host=device)
    post(server.url + "/v1/chat/completions", {"messages": ASK})
    first = backend.calls[0]
    assert first.prompt.startswith(backend.prepared[0]) and first.prefix_tokens == len(backend.tokenize(backend.prepared[0]))
