"""The World: tool declarations, validation, atomic calls, confirmations, audit, determinism."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botpsy.world import World, generate_tasks, is_error, replay_gold
from botpsy.world.registry import REGISTRY, ToolError
from botpsy.world.task import build_world


def test_at_least_forty_tools_each_declared_with_a_strict_schema():
    assert len(REGISTRY) >= 40
    for spec in World().tool_specs():
        fn = spec["function"]
        params = fn["parameters"]
        assert spec["type"] == "function" and fn["description"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop.get("description") and prop.get("type")
    domains = {t.domain for t in REGISTRY.values()}
    assert domains == {"device", "personal", "commerce"}
    assert {"send_message", "place_order", "checkout", "delete_contact", "share_contact"} <= \
        {n for n, t in REGISTRY.items() if t.sensitive}
    assert "sensitive" in World().tool_specs(["send_message"])[0]["function"]["description"].lower()


def test_tool_specs_follow_requested_names_and_offered_set():
    world = World(seed=1, offered=["set_wifi", "list_alarms"])
    assert [s["function"]["name"] for s in world.tool_specs()] == ["list_alarms", "set_wifi"]
    assert [s["function"]["name"] for s in world.tool_specs(["set_wifi"])] == ["set_wifi"]


BAD_CALLS = [
    ("set_brightness", {"level": 140}, "invalid_arguments"),
    ("set_brightness", {"level": "high"}, "invalid_arguments"),
    ("set_brightness", {}, "invalid_arguments"),
    ("set_wifi", {"enabled": True, "extra": 1}, "invalid_arguments"),
    ("set_alarm", {"time": "25:00"}, "invalid_arguments"),
    ("set_alarm", '{"time": "07:00"', "invalid_arguments"),
    ("set_alarm", ["07:00"], "invalid_arguments"),
    ("create_event", {"title": "x", "date": "2026-02-30", "start_time": "10:00"}, "invalid_date"),
    ("update_alarm", {"alarm_id": "nope", "enabled": False}, "not_found"),
    ("search_products", {"query": "tea", "max_price": 1e308}, "invalid_arguments"),
    ("no_such_tool", {}, "unknown_tool"),
    (None, {}, "unknown_tool"),
]


@pytest.mark.parametrize("name,arguments,code", BAD_CALLS)
def test_invalid_calls_return_a_readable_error_and_change_nothing(name, arguments, code):
    world = World(seed=3)
    before = world.snapshot(full=True)
    result = world.call(name, arguments)
    assert is_error(result) and result["error"] == code and result["message"]
    assert world.snapshot(full=True) == before
    last = world.audit_log()[-1]
    assert last["status"] == "error" and last["error"] == code


def test_tools_outside_the_offered_set_are_unknown():
    world = World(seed=3, offered=["list_alarms"])
    result = world.call("set_wifi", {"enabled": False})
    assert result["error"] == "unknown_tool" and "list_alarms" in result["message"]


def test_a_tool_that_raises_after_writing_is_rolled_back(monkeypatch):
    tool = REGISTRY["create_note"]
    original = tool.fn

    def broken(ctx, title, text):
        original(ctx, title, text)  # the write happens inside the call's transaction...
        raise RuntimeError("disk on fire")  # ...and then the tool crashes

    monkeypatch.setattr(tool, "fn", broken)
    world = World(seed=4)
    before = world.snapshot(full=True)
    result = world.call("create_note", {"title": "a", "text": "b"})
    assert result["error"] == "internal_error"
    assert world.snapshot(full=True) == before
    monkeypatch.setattr(tool, "fn", original)
    assert not is_error(world.call("create_note", {"title": "a", "text": "b"}))


def test_a_tool_error_after_a_write_is_rolled_back(monkeypatch):
    tool = REGISTRY["set_alarm"]
    original = tool.fn

    def half_done(ctx, time, label=None, days=None):
        original(ctx, time, label, days)
        raise ToolError("clash", "another alarm rings then")

    monkeypatch.setattr(tool, "fn", half_done)
    world = World(seed=5)
    before = world.snapshot(full=True)
    result = world.call("set_alarm", {"time": "06:00"})
    assert result == {"error": "clash", "message": "another alarm rings then"}
    assert world.snapshot(full=True) == before
    assert world.snapshot() == before  # the incremental snapshot agrees after a rollback


def _contact(world: World) -> str:
    return world.read("SELECT id FROM contacts ORDER BY id LIMIT 1")[0]["id"]


def test_sensitive_calls_wait_for_the_user_and_run_once_per_approval():
    world = World(seed=6)
    args = {"contact_id": _contact(world), "text": "hello"}
    before = world.snapshot(full=True)
    first = world.call("send_message", args)
    assert first["error"] == "needs_confirmation"
    assert world.call("send_message", args)["request_id"] == first["request_id"]  # asking again is not approval
    assert world.snapshot(full=True) == before
    assert world.user.confirm(first["request_id"])
    assert not world.user.confirm(first["request_id"])  # a decision is final
    other = world.call("send_message", {**args, "text": "something else"})
    assert other["error"] == "needs_confirmation"  # the approval covers those exact arguments only
    sent = world.call("send_message", args)
    assert sent["to"] == args["contact_id"]
    assert world.call("send_message", args)["error"] == "needs_confirmation"  # approval used up
    outbox = world.read("SELECT * FROM messages WHERE text = 'hello'")
    assert len(outbox) == 1
    ok_rows = [r for r in world.audit_log() if r["status"] == "ok"]
    assert ok_rows[-1]["request_id"] == first["request_id"]


def test_a_sensitive_call_that_would_fail_is_reported_without_asking_the_user():
    world = World(seed=6)
    result = world.call("delete_contact", {"contact_id": "c999"})
    assert result["error"] == "not_found"
    assert world.pending_confirmations() == []


def test_declined_requests_never_run_and_advance_approval_does():
    world = World(seed=7)
    args = {"contact_id": _contact(world)}
    request = world.call("delete_contact", args)
    assert world.user.decline(request["request_id"])
    assert world.call("delete_contact", args)["error"] == "needs_confirmation"
    assert world.read("SELECT id FROM contacts WHERE id = ?", args["contact_id"])
    world.user.approve("delete_contact", args)
    assert not is_error(world.call("delete_contact", args))
    assert not world.read("SELECT id FROM contacts WHERE id = ?", args["contact_id"])
    statuses = [r["status"] for r in world.audit_log()]
    assert statuses.count("declined") == 1 and statuses.count("approved") == 1


def test_the_same_seed_gives_the_same_world_and_another_seed_does_not(tmp_path):
    a, b, c = World(seed=42), World(seed=42), World(seed=43)
    assert a.snapshot() == b.snapshot() != c.snapshot()
    assert (a.now, a.owner) == (b.now, b.owner)
    on_disk = World(str(tmp_path / "device.db"), seed=42)
    assert on_disk.snapshot() == a.snapshot()


def test_a_file_world_keeps_its_state_and_seed_when_reopened(tmp_path):
    path = str(tmp_path / "device.db")
    world = World(path, seed=9)
    world.call("set_brightness", {"level": 33})
    world.close()
    again = World(path, seed=12345)  # the stored seed wins
    assert again.seed == 9
    assert json.loads(again.read("SELECT value FROM settings WHERE key = 'brightness'")[0]["value"]) == 33
    assert again.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_incremental_snapshots_equal_full_reads_after_real_episodes():
    for task in generate_tasks("dev", 120, seed=5):
        world = build_world(task)
        replay_gold(task, world)
        assert world.snapshot() == world.snapshot(full=True), task.id


def test_results_are_compact_json_the_model_can_read():
    world = World(seed=2)
    for name in ["get_device_status", "list_alarms", "find_events", "list_messages", "view_cart", "list_orders"]:
        result = world.call(name, {})
        assert not is_error(result), name
        assert len(json.dumps(result, separators=(",", ":"))) < 2500, name


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False)
                           | st.text(max_size=12), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(REGISTRY) + ["bogus"]),
       arguments=st.dictionaries(st.sampled_from(["enabled", "level", "time", "query", "contact_id", "text", "name",
                                                  "product_id", "quantity", "date", "alarm_id", "x"]),
                                 JSON_VALUES, max_size=4) | JSON_VALUES)
def test_any_call_returns_a_dict_and_errors_change_nothing(name, arguments):
    world = World(seed=8)
    before = world.snapshot(full=True)
    result = world.call(name, arguments)
    assert isinstance(result, dict)
    json.dumps(result)
    if is_error(result):
        assert world.snapshot(full=True) == before
        assert result["error"] != "internal_error", result  # model mistakes are never tool crashes
