"""Personal tools: contacts, calendar, reminders, notes and messages."""

from __future__ import annotations

from datetime import datetime, timedelta

from botpsy.world.registry import (ToolError, boolean, date_param, enum, ident, integer, parse_date, string,
                                   time_param, tool)

PHONE = string("phone number, digits with optional +, spaces and dashes", pattern=r"^\+?[0-9][0-9 \-]{5,19}$")
EMAIL = string("email address", pattern=r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$")


def _contact(ctx, contact_id: str) -> dict:
    return ctx.require("SELECT * FROM contacts WHERE id = ?", contact_id, what="contact")


def _contact_view(row: dict) -> dict:
    return {"id": row["id"], "name": row["name"], "phone": row["phone"], "email": row["email"]}


@tool("search_contacts", "Find contacts whose name, phone or email contains the query.", domain="personal",
      writes=False, params={"query": string("part of a name, number or email", minLength=1)})
def search_contacts(ctx, query):
    like = f"%{query.strip().lower()}%"
    rows = ctx.all("SELECT * FROM contacts WHERE lower(name) LIKE ? OR phone LIKE ? OR lower(email) LIKE ? "
                   "ORDER BY name LIMIT 5", like, like, like)
    return {"contacts": [_contact_view(r) for r in rows]}


@tool("create_contact", "Save a new contact.", domain="personal",
      params={"name": string("full name", minLength=1, maxLength=60), "phone": PHONE, "email": EMAIL},
      required=["name", "phone"])
def create_contact(ctx, name, phone, email=None):
    contact_id = ctx.next_id("c")
    ctx.insert("contacts", {"id": contact_id, "name": name.strip(), "phone": phone, "email": email,
                            "city": None, "favorite": 0})
    return {"id": contact_id, "name": name.strip()}


@tool("update_contact", "Change a contact's phone number or email.", domain="personal",
      params={"contact_id": ident("the contact's id"), "phone": PHONE, "email": EMAIL}, required=["contact_id"])
def update_contact(ctx, contact_id, phone=None, email=None):
    row = _contact(ctx, contact_id)
    if phone is None and email is None:
        raise ToolError("invalid_arguments", "give a new phone or email")
    new = {"phone": phone or row["phone"], "email": email or row["email"]}
    ctx.run("UPDATE contacts SET phone = ?, email = ? WHERE id = ?", new["phone"], new["email"], contact_id)
    return _contact_view({**row, **new})


@tool("delete_contact", "Delete a contact.", domain="personal", sensitive=True,
      params={"contact_id": ident("the contact's id")})
def delete_contact(ctx, contact_id):
    row = _contact(ctx, contact_id)
    ctx.run("DELETE FROM contacts WHERE id = ?", contact_id)
    return {"deleted": row["name"]}


@tool("share_contact", "Send one contact's details to another contact.", domain="personal", sensitive=True,
      params={"contact_id": ident("whose details to share"), "to_contact_id": ident("who receives them")})
def share_contact(ctx, contact_id, to_contact_id):
    row = _contact(ctx, contact_id)
    _contact(ctx, to_contact_id)
    text = f"Contact: {row['name']}, {row['phone']}" + (f", {row['email']}" if row["email"] else "")
    return _send(ctx, to_contact_id, text)


def _event_view(row: dict) -> dict:
    out = {"id": row["id"], "title": row["title"], "date": row["date"], "start": row["start_time"],
           "end": row["end_time"]}
    if row["location"]:
        out["location"] = row["location"]
    if row["notes"]:
        out["notes"] = row["notes"]
    return out


@tool("find_events", "Calendar events on a date and/or whose title contains a query, soonest first.",
      domain="personal", writes=False,
      params={"date": date_param("only events on this day"), "query": string("part of the title", minLength=1)},
      required=[])
def find_events(ctx, date=None, query=None):
    sql, params = "SELECT * FROM events WHERE date >= ?", [ctx.now.date().isoformat()]
    if date is not None:
        sql, params = "SELECT * FROM events WHERE date = ?", [parse_date(date)]
    if query is not None:
        sql += " AND lower(title) LIKE ?"
        params.append(f"%{query.lower()}%")
    rows = ctx.all(sql + " ORDER BY date, start_time LIMIT 8", *params)
    return {"events": [_event_view(r) for r in rows]}


def _end_time(date: str, start: str, minutes: int) -> str:
    begin = datetime.fromisoformat(f"{date}T{start}")
    end = begin + timedelta(minutes=minutes)
    if end.date() != begin.date():
        raise ToolError("invalid_arguments", "an event must end on the day it starts")
    return end.strftime("%H:%M")


@tool("create_event", "Add an event to the calendar.", domain="personal",
      params={"title": string("what the event is", minLength=1, maxLength=80), "date": date_param("the day"),
              "start_time": time_param("when it starts"),
              "duration_minutes": integer("how long; 60 if not said", 5, 720),
              "location": string("where", maxLength=80)}, required=["title", "date", "start_time"])
def create_event(ctx, title, date, start_time, duration_minutes=60, location=None):
    date = parse_date(date)
    event_id = ctx.next_id("e")
    row = {"id": event_id, "title": title.strip(), "date": date, "start_time": start_time,
           "end_time": _end_time(date, start_time, duration_minutes), "location": location, "notes": None}
    ctx.insert("events", row)
    return _event_view(row)


@tool("update_event", "Move an event to another date or start time (its length is kept).", domain="personal",
      params={"event_id": ident("the event's id"), "date": date_param("new day"),
              "start_time": time_param("new start time")}, required=["event_id"])
def update_event(ctx, event_id, date=None, start_time=None):
    row = ctx.require("SELECT * FROM events WHERE id = ?", event_id, what="event")
    if date is None and start_time is None:
        raise ToolError("invalid_arguments", "give a new date or start time")
    old_start = datetime.fromisoformat(f"{row['date']}T{row['start_time']}")
    length = int((datetime.fromisoformat(f"{row['date']}T{row['end_time']}") - old_start).total_seconds() // 60)
    new_date = parse_date(date) if date else row["date"]
    new_start = start_time or row["start_time"]
    new_end = _end_time(new_date, new_start, length)
    ctx.run("UPDATE events SET date = ?, start_time = ?, end_time = ? WHERE id = ?", new_date, new_start, new_end,
            event_id)
    return _event_view({**row, "date": new_date, "start_time": new_start, "end_time": new_end})


@tool("delete_event", "Remove an event from the calendar.", domain="personal", sensitive=True,
      params={"event_id": ident("the event's id")})
def delete_event(ctx, event_id):
    row = ctx.require("SELECT * FROM events WHERE id = ?", event_id, what="event")
    ctx.run("DELETE FROM events WHERE id = ?", event_id)
    return {"deleted": row["title"]}


def _reminder_view(row: dict) -> dict:
    out = {"id": row["id"], "text": row["text"], "done": bool(row["done"])}
    if row["due_date"]:
        out["due"] = row["due_date"] + (f" {row['due_time']}" if row["due_time"] else "")
    return out


@tool("list_reminders", "List reminders, open ones by default.", domain="personal", writes=False,
      params={"include_done": boolean("true to include completed reminders")}, required=[])
def list_reminders(ctx, include_done=False):
    sql = "SELECT * FROM reminders" + ("" if include_done else " WHERE done = 0")
    return {"reminders": [_reminder_view(r) for r in ctx.all(sql + " ORDER BY due_date IS NULL, due_date, id")]}


@tool("create_reminder", "Create a reminder, optionally due at a date and time.", domain="personal",
      params={"text": string("what to be reminded of", minLength=1, maxLength=120),
              "due_date": date_param("the day"), "due_time": time_param("the time on that day")},
      required=["text"])
def create_reminder(ctx, text, due_date=None, due_time=None):
    if due_time is not None and due_date is None:
        raise ToolError("invalid_arguments", "a due_time needs a due_date")
    reminder_id = ctx.next_id("r")
    row = {"id": reminder_id, "text": text.strip(), "due_date": parse_date(due_date) if due_date else None,
           "due_time": due_time, "done": 0}
    ctx.insert("reminders", row)
    return _reminder_view(row)


@tool("complete_reminder", "Mark a reminder as done.", domain="personal",
      params={"reminder_id": ident("the reminder's id")})
def complete_reminder(ctx, reminder_id):
    ctx.require("SELECT id FROM reminders WHERE id = ?", reminder_id, what="reminder")
    ctx.run("UPDATE reminders SET done = 1 WHERE id = ?", reminder_id)
    return {"done": reminder_id}


@tool("delete_reminder", "Delete a reminder.", domain="personal", sensitive=True,
      params={"reminder_id": ident("the reminder's id")})
def delete_reminder(ctx, reminder_id):
    row = ctx.require("SELECT * FROM reminders WHERE id = ?", reminder_id, what="reminder")
    ctx.run("DELETE FROM reminders WHERE id = ?", reminder_id)
    return {"deleted": row["text"]}


@tool("search_notes", "Find notes whose title or text contains the query (empty query: all notes).",
      domain="personal", writes=False, params={"query": string("words to look for")})
def search_notes(ctx, query):
    like = f"%{query.strip().lower()}%"
    rows = ctx.all("SELECT * FROM notes WHERE lower(title) LIKE ? OR lower(body) LIKE ? ORDER BY title", like, like)
    return {"notes": [{"id": r["id"], "title": r["title"], "text": r["body"]} for r in rows[:6]]}


@tool("create_note", "Create a note.", domain="personal",
      params={"title": string("the note's title", minLength=1, maxLength=80),
              "text": string("the note's content", maxLength=2000)})
def create_note(ctx, title, text):
    note_id = ctx.next_id("n")
    ctx.insert("notes", {"id": note_id, "title": title.strip(), "body": text, "updated_at": ctx.now.isoformat()})
    return {"id": note_id, "title": title.strip()}


@tool("append_to_note", "Add text to the end of a note.", domain="personal",
      params={"note_id": ident("the note's id"), "text": string("what to add", minLength=1, maxLength=500)})
def append_to_note(ctx, note_id, text):
    row = ctx.require("SELECT * FROM notes WHERE id = ?", note_id, what="note")
    body = f"{row['body']}\n{text}" if row["body"] else text
    ctx.run("UPDATE notes SET body = ?, updated_at = ? WHERE id = ?", body, ctx.now.isoformat(), note_id)
    return {"id": note_id, "title": row["title"], "text": body}


@tool("delete_note", "Delete a note.", domain="personal", sensitive=True, params={"note_id": ident("the note's id")})
def delete_note(ctx, note_id):
    row = ctx.require("SELECT * FROM notes WHERE id = ?", note_id, what="note")
    ctx.run("DELETE FROM notes WHERE id = ?", note_id)
    return {"deleted": row["title"]}


def _message_view(ctx, row: dict, preview: bool) -> dict:
    contact = ctx.one("SELECT name FROM contacts WHERE id = ?", row["contact_id"])
    text = row["text"]
    if preview and len(text) > 60:
        text = text[:57] + "..."
    key = "from" if row["folder"] == "inbox" else "to"
    return {"id": row["id"], key: contact["name"] if contact else row["contact_id"], "contact_id": row["contact_id"],
            "text": text, "read": bool(row["read"]), "time": row["sent_at"]}


@tool("list_messages", "List messages, newest first, with a preview of each.", domain="personal", writes=False,
      params={"folder": enum("inbox (received) or outbox (sent)", ["inbox", "outbox"]),
              "contact_id": ident("only messages with this contact"),
              "unread_only": boolean("only unread messages"),
              "limit": integer("how many at most", 1, 20)}, required=[])
def list_messages(ctx, folder="inbox", contact_id=None, unread_only=False, limit=5):
    sql, params = "SELECT * FROM messages WHERE folder = ?", [folder]
    if contact_id is not None:
        sql += " AND contact_id = ?"
        params.append(contact_id)
    if unread_only:
        sql += " AND read = 0"
    rows = ctx.all(sql + " ORDER BY sent_at DESC LIMIT ?", *params, limit)
    return {"messages": [_message_view(ctx, r, preview=True) for r in rows]}


@tool("read_message", "The full text of one message.", domain="personal", writes=False,
      params={"message_id": ident("the message's id")})
def read_message(ctx, message_id):
    row = ctx.require("SELECT * FROM messages WHERE id = ?", message_id, what="message")
    return _message_view(ctx, row, preview=False)


@tool("mark_message_read", "Mark a message as read.", domain="personal",
      params={"message_id": ident("the message's id")})
def mark_message_read(ctx, message_id):
    ctx.require("SELECT id FROM messages WHERE id = ?", message_id, what="message")
    ctx.run("UPDATE messages SET read = 1 WHERE id = ?", message_id)
    return {"read": message_id}


def _send(ctx, contact_id: str, text: str) -> dict:
    message_id = ctx.next_id("m")
    ctx.insert("messages", {"id": message_id, "contact_id": contact_id, "folder": "outbox", "text": text,
                            "read": 1, "sent_at": ctx.now.isoformat(timespec="minutes")})
    return {"sent": message_id, "to": contact_id}


@tool("send_message", "Send a text message to a contact.", domain="personal", sensitive=True,
      params={"contact_id": ident("the recipient's contact id"),
              "text": string("the message", minLength=1, maxLength=1000)})
def send_message(ctx, contact_id, text):
    _contact(ctx, contact_id)
    return _send(ctx, contact_id, text)


@tool("forward_message", "Forward a message to a contact.", domain="personal", sensitive=True,
      params={"message_id": ident("the message to forward"), "contact_id": ident("the recipient's contact id")})
def forward_message(ctx, message_id, contact_id):
    row = ctx.require("SELECT * FROM messages WHERE id = ?", message_id, what="message")
    _contact(ctx, contact_id)
    return _send(ctx, contact_id, f"Fwd: {row['text']}")


@tool("delete_message", "Delete a message.", domain="personal", sensitive=True,
      params={"message_id": ident("the message's id")})
def delete_message(ctx, message_id):
    ctx.require("SELECT id FROM messages WHERE id = ?", message_id, what="message")
    ctx.run("DELETE FROM messages WHERE id = ?", message_id)
    return {"deleted": message_id}
