"""Device intents: settings toggles, brightness and volume, do-not-disturb, apps, alarms and timers."""

from __future__ import annotations

import json
from datetime import timedelta

from botpsy.world import phrasing
from botpsy.world.intent import Ask, Ctx, Draft, Intent, Invalid, call, minutes_phrase

TOGGLES = {
    "wifi": ("set_wifi", ["Wi-Fi", "wifi", "the Wi-Fi"]),
    "bluetooth": ("set_bluetooth", ["Bluetooth", "bluetooth"]),
    "airplane_mode": ("set_airplane_mode", ["airplane mode", "flight mode"]),
    "battery_saver": ("set_battery_saver", ["battery saver", "power saving mode"]),
    "dark_mode": ("set_dark_mode", ["dark mode", "the dark theme"]),
}


def _setting(ctx: Ctx, key: str):
    return json.loads(ctx.rows("SELECT value FROM settings WHERE key = ?", key)[0]["value"])


def draw_toggle(ctx: Ctx) -> Draft:
    key = ctx.rng.choice(list(TOGGLES))
    tool, names = TOGGLES[key]
    # Always a real change: a request that changes nothing could be skipped without the checker noticing.
    enabled = not _setting(ctx, key)
    state = "on" if enabled else "off"
    name = ctx.rng.choice(names)
    slots = {"setting": name, "Setting": name[0].upper() + name[1:], "state": state,
             "verb": "enable" if enabled else "disable"}
    return Draft(slots, [[call(tool, enabled=enabled)]], f"{slots['Setting']} is now {state}.",
                 action=f"turn {name} on or off")


def draw_brightness(ctx: Ctx) -> Draft:
    level = ctx.rng.choice([v for v in range(5, 101, 5) if v != _setting(ctx, "brightness")])
    return Draft({"level": level}, [[call("set_brightness", level=level)]],
                 ctx.one_of(f"Brightness set to {level}%.", f"Done, the screen is at {level}% brightness."),
                 action="change the screen brightness")


def _bad_brightness(rng, slots):
    value = rng.choice([110, 120, 150, 200, 250, 300, 101, 140])
    return str(value), str(value), (f"Brightness goes from 0 to 100%, so I can't set it to {value}%. "
                                    "Which level between 0 and 100 would you like?")


STREAMS = {"media": ["media", "music"], "ring": ["ringer", "ringtone"], "alarm": ["alarm"]}


def draw_volume(ctx: Ctx) -> Draft:
    stream = ctx.rng.choice(list(STREAMS))
    level = ctx.rng.choice([v for v in range(0, 101, 10) if v != _setting(ctx, f"volume_{stream}")])
    phrase = ctx.rng.choice(STREAMS[stream])
    return Draft({"level": level, "stream": phrase}, [[call("set_volume", level=level, stream=stream)]],
                 f"The {phrase} volume is now {level}%.", action="change the volume")


def _bad_volume(rng, slots):
    value = rng.choice([120, 150, 180, 200, 110, 300])
    return str(value), str(value), (f"Volume goes from 0 to 100%, so I can't set it to {value}%. "
                                    "What level should I use?")


def draw_dnd(ctx: Ctx) -> Draft:
    if _setting(ctx, "do_not_disturb"):
        return Draft({"until": "", "state": "off"}, [[call("set_do_not_disturb", enabled=False)]],
                     "Do not disturb is off; notifications will come through again.",
                     action="change do-not-disturb")
    hour = max(ctx.world.now.hour + 1, 12) + ctx.rng.randint(0, 5)
    until = phrasing.hhmm(min(hour, 23), ctx.rng.choice([0, 30]))
    return Draft({"until": ctx.time(until), "state": "on"}, [[call("set_do_not_disturb", enabled=True, until=until)]],
                 f"Do not disturb is on until {phrasing.nice_time(until)}.", action="change do-not-disturb")


def _draw_app(ctx: Ctx, installed: bool, tool: str, answer: str, action: str) -> Draft | None:
    app = ctx.pick_row("SELECT name FROM apps WHERE installed = ?", int(installed))
    if app is None:
        return None
    return Draft({"app": app["name"]}, [[call(tool, name=app["name"])]], answer.format(app=app["name"]), action=action)


def draw_open_app(ctx: Ctx) -> Draft | None:
    return _draw_app(ctx, True, "open_app", "Opening {app}.", "open apps")


def draw_install_app(ctx: Ctx) -> Draft | None:
    return _draw_app(ctx, False, "install_app", "{app} is installed.", "install apps")


def draw_uninstall_app(ctx: Ctx) -> Draft | None:
    draft = _draw_app(ctx, True, "uninstall_app", "{app} has been uninstalled.", "uninstall apps")
    if draft is not None:
        app = draft.slots["app"]
        draft.confirm_prompt = f"Uninstalling {app} also deletes its data on this phone. Go ahead?"
        draft.decline_answer = f"OK, {app} stays installed."
    return draft


def _free_alarm_time(ctx: Ctx) -> str:
    taken = {r["time"] for r in ctx.rows("SELECT time FROM alarms")}
    while True:
        value = phrasing.hhmm(ctx.rng.randint(5, 22), ctx.rng.choice([0, 15, 30, 45]))
        if value not in taken:
            return value


def draw_alarm(ctx: Ctx) -> Draft:
    time = _free_alarm_time(ctx)
    return Draft({"time": ctx.time(time)}, [[call("set_alarm", time=time)]],
                 f"Your alarm is set for {phrasing.nice_time(time)}.", action="set alarms")


def draw_alarm_labelled(ctx: Ctx) -> Draft:
    time = _free_alarm_time(ctx)
    used = {r["label"] for r in ctx.rows("SELECT label FROM alarms")}
    label = ctx.rng.choice([x for x in ["Gym", "Work", "Meds", "Train", "Call mum", "Bins", "Lunch"] if x not in used])
    return Draft({"time": ctx.time(time), "label": label}, [[call("set_alarm", time=time, label=label)]],
                 f"Alarm \"{label}\" set for {phrasing.nice_time(time)}.", action="set alarms")


def _bad_time(rng, slots):
    value = rng.choice(["25:00", "24:30", "7:75", "26:15", "19:60", "31:00"])
    return value, value, f"{value} isn't a valid time of day, so I can't set that alarm. What time did you mean?"


def draw_timer(ctx: Ctx) -> Draft:
    minutes = ctx.rng.choice([3, 5, 8, 10, 12, 15, 20, 25, 30, 45, 60, 90, 120])
    return Draft({"duration": minutes_phrase(ctx.rng, minutes), "minutes": minutes},
                 [[call("start_timer", minutes=minutes)]], f"Timer started for {minutes} minutes.",
                 action="start timers")


def draw_timer_labelled(ctx: Ctx) -> Draft:
    minutes = ctx.rng.choice([4, 6, 9, 10, 11, 15, 20, 35, 40])
    label = ctx.rng.choice(["pasta", "tea", "eggs", "laundry", "pizza", "rice", "bread", "workout"])
    return Draft({"duration": minutes_phrase(ctx.rng, minutes), "label": label},
                 [[call("start_timer", minutes=minutes, label=label)]], f"{label.capitalize()} timer: {minutes} minutes.",
                 action="start timers")


def _bad_timer(rng, slots):
    hours = rng.choice([25, 30, 36, 48, 72])
    return f"{hours} hours", str(hours), (f"Timers can run for at most 24 hours, so I can't start one for {hours} "
                                         "hours. Would a shorter timer or an alarm work?")


def draw_battery(ctx: Ctx) -> Draft:
    level = _setting(ctx, "battery_level")
    return Draft({}, [[call("get_device_status")]], f"Your battery is at {level}%.", action="check the battery",
                 facts=[[str(level)]])


def draw_storage(ctx: Ctx) -> Draft:
    free = _setting(ctx, "storage_free_gb")
    return Draft({}, [[call("get_device_status")]], f"You have {free} GB of storage free.",
                 action="check the storage", facts=[[str(free)]])


def draw_list_alarms(ctx: Ctx) -> Draft:
    rows = ctx.rows("SELECT * FROM alarms ORDER BY time")
    if not rows:
        return None
    parts = [f"{phrasing.nice_time(r['time'])} ({r['label'] or 'no label'}, {'on' if r['enabled'] else 'off'})"
             for r in rows]
    return Draft({}, [[call("list_alarms")]], "Your alarms: " + "; ".join(parts) + ".", action="look at alarms",
                 facts=[phrasing.time_alternatives(r["time"]) for r in rows])


def _labelled_alarm(ctx: Ctx, enabled: int | None = None):
    sql = "SELECT * FROM alarms WHERE label IS NOT NULL" + ("" if enabled is None else f" AND enabled = {enabled}")
    return ctx.pick_row(sql)


def draw_alarm_off(ctx: Ctx) -> Draft | None:
    alarm = _labelled_alarm(ctx, enabled=1)
    if alarm is None:
        return None
    return Draft({"label": alarm["label"]}, [[call("list_alarms")], [call("update_alarm", alarm_id=alarm["id"],
                                                                          enabled=False)]],
                 f"Your {alarm['label']} alarm ({phrasing.nice_time(alarm['time'])}) is switched off.",
                 action="change alarms")


def draw_alarm_move(ctx: Ctx) -> Draft | None:
    alarm = _labelled_alarm(ctx)
    if alarm is None:
        return None
    time = _free_alarm_time(ctx)
    return Draft({"label": alarm["label"], "time": ctx.time(time)},
                 [[call("list_alarms")], [call("update_alarm", alarm_id=alarm["id"], time=time)]],
                 f"Moved your {alarm['label']} alarm to {phrasing.nice_time(time)}.", action="change alarms")


def draw_alarm_delete(ctx: Ctx) -> Draft | None:
    alarm = ctx.pick_row("SELECT * FROM alarms")
    if alarm is None:
        return None
    return Draft({"time": ctx.time(alarm["time"])}, [[call("list_alarms")], [call("delete_alarm", alarm_id=alarm["id"])]],
                 f"Deleted the {phrasing.nice_time(alarm['time'])} alarm.", action="delete alarms")


def draw_timer_cancel(ctx: Ctx) -> Draft:
    timer = ctx.pick_row("SELECT * FROM timers WHERE status = 'running'")
    patch = {}
    if timer is None:
        label = ctx.rng.choice(["Pasta", "Tea", "Oven", "Laundry"])
        ends = (ctx.world.now + timedelta(minutes=7)).isoformat()
        timer = {"id": "t90", "label": label, "duration_seconds": 600, "ends_at": ends, "status": "running"}
        patch = {"timers": [timer]}
    label = timer["label"].lower()
    return Draft({"label": label}, [[call("list_timers")], [call("cancel_timer", timer_id=timer["id"])]],
                 f"The {label} timer is cancelled.", action="cancel timers", patch=patch)


INTENTS = [
    Intent("toggle_setting", "device", "single", [
        "Turn {state} {setting}.", "Can you switch {setting} {state}?", "Please {verb} {setting}.",
        "{Setting} {state}, please.", "I need {setting} {state} right now.", "Could you put {setting} {state} for me?",
        "Switch {state} {setting}.", "Go ahead and {verb} {setting}.", "Set {setting} to {state}.",
        "Hey, flip {setting} {state}."], draw_toggle),
    Intent("brightness", "device", "single", [
        "Set the brightness to {level}%.", "Make the screen {level} percent bright.",
        "Change screen brightness to {level}.", "Brightness {level}%, please.",
        "Can you put the display brightness at {level} percent?", "Adjust the brightness to {level}%.",
        "I'd like the screen at {level}% brightness.", "Screen brightness to {level} percent.",
        "Please set display brightness to {level} percent.", "Turn the brightness to {level}%."], draw_brightness,
        ask=Ask("level", ["Change the brightness.", "Adjust my screen brightness.", "Can you set the brightness?",
                          "The screen brightness needs changing.", "Please change how bright the display is.",
                          "I want to change the brightness."],
                ["What brightness level would you like, from 0 to 100%?",
                 "Sure, what level should I set the brightness to (0-100%)?"],
                ["level", "brightness", "%", "percent", "how bright"],
                ["{level}%", "Make it {level} percent.", "{level}, please.", "Set it to {level}%.",
                 "{level} percent"]),
        invalid=Invalid("level", _bad_brightness)),
    Intent("volume", "device", "single", [
        "Set the {stream} volume to {level}%.", "Turn the {stream} volume to {level} percent.",
        "Put {stream} volume at {level}.", "Can you change the {stream} volume to {level}%?",
        "{stream} volume {level} percent please.", "Make the {stream} volume {level}%.",
        "Adjust {stream} volume to {level}%.", "I want the {stream} volume at {level} percent.",
        "Change the {stream} volume to {level}.", "Could you set my {stream} volume to {level}%?"], draw_volume,
        invalid=Invalid("level", _bad_volume)),
    Intent("do_not_disturb", "device", "single", [
        "Turn {state} do not disturb {until}.", "Do not disturb {state} {until}, please.",
        "Switch do-not-disturb {state} {until}.", "Can you put do not disturb {state} {until}?",
        "Set do not disturb {state} {until}.", "I want do-not-disturb {state} {until}.",
        "Please turn do not disturb {state} {until}.", "Do-not-disturb {state} {until}."],
        lambda ctx: _with_until(draw_dnd(ctx))),
    Intent("open_app", "device", "single", [
        "Open {app}.", "Launch {app} for me.", "Can you start {app}?", "Bring up {app}.", "I want to use {app}.",
        "Please open the {app} app.", "Start {app}.", "Pull up {app}, please.", "Fire up {app}.", "Run {app}."],
        draw_open_app),
    Intent("install_app", "device", "single", [
        "Install {app}.", "Can you download {app} for me?", "Get the {app} app.", "Please install {app}.",
        "I need {app} on my phone.", "Add the {app} app to my phone.", "Download {app}.",
        "Put {app} on the phone, please.", "Could you install the {app} app?", "Grab {app} from the store."],
        draw_install_app),
    Intent("uninstall_app", "device", "sensitive", [
        "Uninstall {app}.", "Remove the {app} app.", "Get rid of {app}.", "Please delete the {app} app.",
        "I don't need {app} anymore, uninstall it.", "Can you remove {app} from my phone?",
        "Take {app} off my phone.", "Uninstall the {app} app, please.", "Delete {app}.",
        "Could you uninstall {app}?"], draw_uninstall_app),
    Intent("set_alarm", "device", "single", [
        "Set an alarm for {time}.", "Wake me up at {time}.", "Alarm at {time}, please.",
        "Can you set an alarm for {time}?", "I need an alarm at {time}.", "Please wake me at {time}.",
        "Create an alarm for {time}.", "Put an alarm on for {time}.", "Set my alarm to {time}.",
        "Add an alarm at {time}."], draw_alarm,
        ask=Ask("time", ["Set an alarm.", "Can you set an alarm for me?", "I need an alarm.", "Please create an alarm.",
                         "Add an alarm.", "I want an alarm set."],
                ["What time should the alarm be for?", "Sure, for what time?"], ["time", "when", "what time"],
                ["{time}", "At {time}.", "Make it {time}.", "For {time}, please.", "{time} works."]),
        invalid=Invalid("time", _bad_time)),
    Intent("set_alarm_labelled", "device", "single", [
        "Set an alarm for {time} called {label}.", "Alarm at {time} labelled {label}.",
        "Create a {label} alarm at {time}.", "Can you add an alarm named {label} for {time}?",
        "I need a {label} alarm at {time}.", "Set a {time} alarm and call it {label}.",
        "Make an alarm for {time} with the label {label}.", "Add alarm '{label}' at {time}.",
        "Please set an alarm '{label}' for {time}.", "New alarm at {time}, name it {label}."], draw_alarm_labelled),
    Intent("start_timer", "device", "single", [
        "Set a timer for {duration}.", "Start a {duration} timer.", "Timer for {duration}, please.",
        "Can you time {duration} for me?", "Count down {duration}.", "Please start a timer for {duration}.",
        "I need a timer of {duration}.", "Put a {duration} timer on.", "Time {duration}.",
        "Start counting down {duration}."], draw_timer,
        ask=Ask("duration", ["Start a timer.", "Set a timer for me.", "I need a timer.", "Can you start a timer?",
                             "Timer please.", "Put a timer on."],
                ["How long should the timer run?", "Sure, for how long?"], ["how long", "minutes", "long", "duration"],
                ["{duration}", "For {duration}.", "Make it {duration}.", "{duration}, please.", "Let's say {duration}."]),
        invalid=Invalid("duration", _bad_timer)),
    Intent("start_timer_labelled", "device", "single", [
        "Start a {label} timer for {duration}.", "Set a timer called {label} for {duration}.",
        "{label} timer, {duration}.", "Can you start a {duration} timer for the {label}?",
        "Timer for the {label}: {duration}.", "I need a {duration} {label} timer.",
        "Time the {label}, {duration}.", "Please set a {label} timer of {duration}.",
        "Put on a {duration} timer named {label}.", "Count down {duration} for the {label}."], draw_timer_labelled),
    Intent("battery", "device", "single", [
        "How much battery do I have left?", "What's my battery level?", "Battery percentage?",
        "How charged is my phone?", "Is my battery low?", "Check the battery for me.",
        "How much charge is left?", "What is the battery at?", "Tell me the battery level.",
        "Do I need to charge my phone?"], draw_battery),
    Intent("storage", "device", "single", [
        "How much free storage do I have?", "How much space is left on my phone?", "Check my free storage.",
        "Is my storage full?", "How many gigabytes are free?", "What's my free space?",
        "Tell me how much storage is free.", "Do I have space for more photos?", "Storage left?",
        "How full is my phone?"], draw_storage),
    Intent("list_alarms", "device", "single", [
        "What alarms do I have?", "List my alarms.", "Which alarms are set?", "Show me my alarms.",
        "Do I have any alarms?", "Tell me my alarms.", "What alarms are on my phone?", "Read out my alarms.",
        "Check my alarms.", "What are my alarm times?"], draw_list_alarms),
    Intent("alarm_off", "device", "chain", [
        "Turn off my {label} alarm.", "Disable the {label} alarm.", "Switch off the alarm called {label}.",
        "I don't need the {label} alarm, turn it off.", "Can you deactivate my {label} alarm?",
        "Please turn the {label} alarm off.", "Mute the {label} alarm.", "Stop the {label} alarm from ringing.",
        "Switch my {label} alarm off.", "Turn the {label} alarm off for now."], draw_alarm_off),
    Intent("alarm_move", "device", "chain", [
        "Move my {label} alarm to {time}.", "Change the {label} alarm to {time}.",
        "Set the {label} alarm for {time} instead.", "Can you make my {label} alarm ring at {time}?",
        "Reschedule the {label} alarm to {time}.", "The {label} alarm should go off at {time}.",
        "Shift my {label} alarm to {time}.", "Update the {label} alarm to {time}.",
        "Please move the {label} alarm to {time}.", "I want my {label} alarm at {time}."], draw_alarm_move),
    Intent("alarm_delete", "device", "chain", [
        "Delete the {time} alarm.", "Remove my {time} alarm.", "Get rid of the alarm at {time}.",
        "Can you delete my alarm for {time}?", "I don't need the {time} alarm anymore.",
        "Please remove the alarm set for {time}.", "Erase the {time} alarm.", "Delete my alarm at {time}.",
        "Trash the {time} alarm.", "Could you remove the {time} alarm?"], draw_alarm_delete),
    Intent("timer_cancel", "device", "chain", [
        "Cancel the {label} timer.", "Stop the {label} timer.", "Kill the {label} timer.",
        "Can you cancel my {label} timer?", "I don't need the {label} timer anymore.",
        "Please stop the timer for the {label}.", "Turn off the {label} timer.", "End the {label} timer.",
        "Cancel my {label} countdown.", "Could you stop the {label} timer?"], draw_timer_cancel),
]


def _with_until(draft: Draft) -> Draft:
    """Do-not-disturb templates carry an optional '{until}' phrase; an empty one reads naturally."""
    if draft.slots["until"]:
        draft.slots["until"] = "until " + draft.slots["until"]
    return draft
