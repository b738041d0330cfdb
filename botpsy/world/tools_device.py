"""Device tools: settings toggles, brightness and volume, apps, alarms and timers."""

from __future__ import annotations

import json
from datetime import timedelta

from botpsy.world.registry import (ToolError, boolean, enum, ident, integer, string, time_param, tool)

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
TOGGLES = {
    "set_wifi": ("wifi", "Turn Wi-Fi on or off."),
    "set_bluetooth": ("bluetooth", "Turn Bluetooth on or off."),
    "set_airplane_mode": ("airplane_mode", "Turn airplane mode on or off."),
    "set_battery_saver": ("battery_saver", "Turn battery saver mode on or off."),
    "set_dark_mode": ("dark_mode", "Switch the dark colour theme on or off."),
}


@tool("get_device_status", "Current device state: battery, connectivity, display, sound and do-not-disturb.",
      domain="device", writes=False)
def get_device_status(ctx):
    rows = ctx.all("SELECT key, value FROM settings ORDER BY key")
    return {r["key"]: json.loads(r["value"]) for r in rows}


def _make_toggle(name: str, key: str, description: str) -> None:
    def toggle(ctx, enabled):
        before = ctx.setting(key)
        ctx.set_setting(key, enabled)
        return {key: enabled, "changed": before != enabled}

    tool(name, description, domain="device",
         params={"enabled": boolean("true to turn it on, false to turn it off")})(toggle)


for _name, (_key, _description) in TOGGLES.items():
    _make_toggle(_name, _key, _description)


@tool("set_do_not_disturb", "Turn do-not-disturb on or off, optionally until a time today.", domain="device",
      params={"enabled": boolean("true to silence notifications"),
              "until": time_param("when do-not-disturb should end; omit for no end")}, required=["enabled"])
def set_do_not_disturb(ctx, enabled, until=None):
    if until is not None and not enabled:
        raise ToolError("invalid_arguments", "'until' only makes sense when turning do-not-disturb on")
    ctx.set_setting("do_not_disturb", enabled)
    ctx.set_setting("dnd_until", until)
    return {"do_not_disturb": enabled, "until": until}


@tool("set_brightness", "Set the screen brightness.", domain="device",
      params={"level": integer("brightness in percent", 0, 100)})
def set_brightness(ctx, level):
    ctx.set_setting("brightness", level)
    return {"brightness": level}


@tool("set_volume", "Set the volume of one sound stream.", domain="device",
      params={"level": integer("volume in percent", 0, 100),
              "stream": enum("which sound to change; media if unsure", ["media", "ring", "alarm"])},
      required=["level"])
def set_volume(ctx, level, stream="media"):
    ctx.set_setting(f"volume_{stream}", level)
    return {"stream": stream, "volume": level}


@tool("list_apps", "List apps, installed ones by default.", domain="device", writes=False,
      params={"installed_only": boolean("false to include apps available to install")}, required=[])
def list_apps(ctx, installed_only=True):
    sql = "SELECT name, category, installed FROM apps" + (" WHERE installed = 1" if installed_only else "")
    return {"apps": [{"name": r["name"], "category": r["category"], "installed": bool(r["installed"])}
                     for r in ctx.all(sql + " ORDER BY name")]}


def _app(ctx, name: str) -> dict:
    row = ctx.one("SELECT * FROM apps WHERE lower(name) = lower(?)", name)
    if row is None:
        raise ToolError("not_found", f"no app called {name!r} in the store")
    return row


@tool("open_app", "Open an installed app.", domain="device", params={"name": ident("the app's name")})
def open_app(ctx, name):
    app = _app(ctx, name)
    if not app["installed"]:
        raise ToolError("not_installed", f"{app['name']} is not installed")
    ctx.set_setting("foreground_app", app["name"])
    return {"opened": app["name"]}


@tool("install_app", "Install an app from the store.", domain="device", params={"name": ident("the app's name")})
def install_app(ctx, name):
    app = _app(ctx, name)
    if app["installed"]:
        return {"installed": app["name"], "already": True}
    ctx.run("UPDATE apps SET installed = 1 WHERE name = ?", app["name"])
    return {"installed": app["name"], "size_mb": app["size_mb"]}


@tool("uninstall_app", "Uninstall an app and remove its data.", domain="device", sensitive=True,
      params={"name": ident("the app's name")})
def uninstall_app(ctx, name):
    app = _app(ctx, name)
    if not app["installed"]:
        raise ToolError("not_installed", f"{app['name']} is not installed")
    ctx.run("UPDATE apps SET installed = 0 WHERE name = ?", app["name"])
    if ctx.setting("foreground_app") == app["name"]:
        ctx.set_setting("foreground_app", None)
    return {"uninstalled": app["name"]}


def _alarm_view(row: dict) -> dict:
    return {"id": row["id"], "time": row["time"], "label": row["label"], "days": json.loads(row["days"]),
            "enabled": bool(row["enabled"])}


DAYS_PARAM = {"type": "array", "items": {"type": "string", "enum": DAYS}, "uniqueItems": True,
              "description": "weekdays it repeats on; omit for a one-off alarm"}


@tool("set_alarm", "Create an alarm.", domain="device",
      params={"time": time_param("when it rings"), "label": string("a short name", maxLength=40),
              "days": DAYS_PARAM}, required=["time"])
def set_alarm(ctx, time, label=None, days=None):
    alarm_id = ctx.next_id("a")
    ordered = [d for d in DAYS if d in (days or [])]
    ctx.insert("alarms", {"id": alarm_id, "time": time, "label": label, "days": json.dumps(ordered), "enabled": 1})
    return {"id": alarm_id, "time": time, "label": label, "days": ordered}


@tool("list_alarms", "List all alarms.", domain="device", writes=False)
def list_alarms(ctx):
    return {"alarms": [_alarm_view(r) for r in ctx.all("SELECT * FROM alarms ORDER BY time")]}


@tool("update_alarm", "Change an alarm's time, label or on/off state.", domain="device",
      params={"alarm_id": ident("the alarm's id"), "time": time_param("new time"),
              "label": string("new label", maxLength=40), "enabled": boolean("false to switch it off")},
      required=["alarm_id"])
def update_alarm(ctx, alarm_id, time=None, label=None, enabled=None):
    row = ctx.require("SELECT * FROM alarms WHERE id = ?", alarm_id, what="alarm")
    if time is None and label is None and enabled is None:
        raise ToolError("invalid_arguments", "give at least one of time, label or enabled")
    new = {"time": time or row["time"], "label": row["label"] if label is None else label,
           "enabled": row["enabled"] if enabled is None else int(enabled)}
    ctx.run("UPDATE alarms SET time = ?, label = ?, enabled = ? WHERE id = ?", new["time"], new["label"],
            new["enabled"], alarm_id)
    return _alarm_view({**row, **new})


@tool("delete_alarm", "Delete an alarm.", domain="device", params={"alarm_id": ident("the alarm's id")})
def delete_alarm(ctx, alarm_id):
    ctx.require("SELECT id FROM alarms WHERE id = ?", alarm_id, what="alarm")
    ctx.run("DELETE FROM alarms WHERE id = ?", alarm_id)
    return {"deleted": alarm_id}


@tool("start_timer", "Start a countdown timer.", domain="device",
      params={"minutes": integer("length in minutes", 1, 1440), "label": string("a short name", maxLength=40)},
      required=["minutes"])
def start_timer(ctx, minutes, label=None):
    timer_id = ctx.next_id("t")
    ends = ctx.now + timedelta(minutes=minutes)
    ctx.insert("timers", {"id": timer_id, "label": label, "duration_seconds": minutes * 60,
                          "ends_at": ends.isoformat(), "status": "running"})
    return {"id": timer_id, "minutes": minutes, "label": label, "ends_at": ends.strftime("%H:%M")}


@tool("list_timers", "List running timers.", domain="device", writes=False)
def list_timers(ctx):
    rows = ctx.all("SELECT * FROM timers WHERE status = 'running' ORDER BY ends_at")
    return {"timers": [{"id": r["id"], "label": r["label"], "minutes": r["duration_seconds"] // 60,
                        "ends_at": r["ends_at"][11:16]} for r in rows]}


@tool("cancel_timer", "Stop a running timer.", domain="device", params={"timer_id": ident("the timer's id")})
def cancel_timer(ctx, timer_id):
    row = ctx.require("SELECT * FROM timers WHERE id = ?", timer_id, what="timer")
    if row["status"] != "running":
        raise ToolError("not_running", f"timer {timer_id} is not running")
    ctx.run("UPDATE timers SET status = 'cancelled' WHERE id = ?", timer_id)
    return {"cancelled": timer_id}
