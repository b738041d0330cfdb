"""Personal intents: contacts, calendar, reminders, notes and messages."""

from __future__ import annotations

from datetime import date

from botpsy.world import phrasing, words
from botpsy.world.intent import Ask, Ctx, Draft, Intent, Invalid, call, first_name

NEW_MESSAGES = ["running 10 minutes late", "see you at the station", "can you call me back tonight",
                "I'll bring the snacks", "happy birthday, have a great day", "the meeting moved to Thursday",
                "don't forget your umbrella", "dinner is at 8", "I got the tickets", "on my way home now"]
NOTE_IDEAS = [("Pharmacy", "ask about the allergy spray"), ("Ideas", "a podcast about old maps"),
              ("Garage", "sort the winter tyres"), ("Holiday", "check ferry times to the islands"),
              ("Kitchen", "descale the kettle"), ("Reading", "finish chapter four"),
              ("Groceries", "bananas, yoghurt, bread"), ("Birthday", "order the cake by Friday")]
NEW_EVENTS = ["Dentist", "Team lunch", "Haircut", "Guitar lesson", "Call with the bank", "Parents' evening",
              "Gym session", "Tennis", "Coffee with Sam", "Interview"]


def _new_person(ctx: Ctx) -> tuple[str, str]:
    taken = {r["name"].split()[0] for r in ctx.rows("SELECT name FROM contacts")}
    first = ctx.rng.choice([n for n in words.FIRST_NAMES if n not in taken])
    return f"{first} {ctx.rng.choice(words.LAST_NAMES)}", f"+1 555-{ctx.rng.randrange(1000, 10000)}"


def draw_create_contact(ctx: Ctx) -> Draft:
    name, phone = _new_person(ctx)
    return Draft({"name": name, "phone": phone}, [[call("create_contact", name=name, phone=phone)]],
                 f"Saved {name} with the number {phone}.", action="add contacts")


def _slot_time(ctx: Ctx) -> str:
    return phrasing.hhmm(ctx.rng.randint(8, 19), ctx.rng.choice([0, 30]))


def draw_create_event(ctx: Ctx) -> Draft:
    title = ctx.rng.choice(NEW_EVENTS)
    day = phrasing.upcoming_day(ctx.rng, ctx.today, 1, 12)
    start = _slot_time(ctx)
    return Draft({"title": title, "date": ctx.date(day), "time": ctx.time(start)},
                 [[call("create_event", title=title, date=day.isoformat(), start_time=start)]],
                 f"Added \"{title}\" on {phrasing.nice_date(day)} at {phrasing.nice_time(start)}.",
                 action="add calendar events")


def _bad_date(rng, slots):
    month, day = rng.choice([("February", 30), ("February", 31), ("April", 31), ("June", 31), ("September", 31),
                             ("November", 31)])
    text = f"{month} {day}"
    return f"on {text}", str(day), (f"{text} doesn't exist, so I can't put the event on that date. "
                                    "Which day did you mean?")


def draw_create_reminder(ctx: Ctx) -> Draft:
    taken = {r["text"] for r in ctx.rows("SELECT text FROM reminders")}
    text = ctx.rng.choice([t for t in words.REMINDER_TEXTS if t not in taken])
    day = phrasing.upcoming_day(ctx.rng, ctx.today, 1, 9)
    time = _slot_time(ctx)
    return Draft({"text": text, "date": ctx.date(day), "time": ctx.time(time)},
                 [[call("create_reminder", text=text, due_date=day.isoformat(), due_time=time)]],
                 f"I'll remind you to {text} on {phrasing.nice_date(day)} at {phrasing.nice_time(time)}.",
                 action="create reminders")


def draw_create_note(ctx: Ctx) -> Draft:
    title, text = ctx.rng.choice(NOTE_IDEAS)
    return Draft({"title": title, "text": text}, [[call("create_note", title=title, text=text)]],
                 f"Created the note \"{title}\".", action="create notes")


def draw_day_agenda(ctx: Ctx) -> Draft | None:
    rows = ctx.rows("SELECT date FROM events WHERE date >= ? GROUP BY date", ctx.today.isoformat())
    if not rows:
        return None
    day = date.fromisoformat(ctx.rng.choice(rows)["date"])
    events = ctx.rows("SELECT * FROM events WHERE date = ? ORDER BY start_time", day.isoformat())
    listing = "; ".join(f"{e['title']} at {phrasing.nice_time(e['start_time'])}" for e in events)
    return Draft({"date": ctx.date(day)}, [[call("find_events", date=day.isoformat())]],
                 f"On {phrasing.nice_date(day)} you have: {listing}.", action="read the calendar",
                 facts=[[e["title"]] for e in events])


def draw_phone_number(ctx: Ctx) -> Draft:
    contact = ctx.rng.choice(ctx.rows("SELECT * FROM contacts"))
    name = first_name(contact["name"])
    return Draft({"name": name}, [[call("search_contacts", query=name)]],
                 f"{contact['name']}'s number is {contact['phone']}.", action="look up contacts",
                 facts=[[contact["phone"], contact["phone"].replace(" ", "").replace("-", "")]])


def draw_open_reminders(ctx: Ctx) -> Draft | None:
    rows = ctx.rows("SELECT * FROM reminders WHERE done = 0 ORDER BY due_date IS NULL, due_date, id")
    if not rows:
        return None
    return Draft({}, [[call("list_reminders")]], "Your open reminders: " + "; ".join(r["text"] for r in rows) + ".",
                 action="read reminders", facts=[[r["text"]] for r in rows[:3]])


def draw_unread(ctx: Ctx) -> Draft | None:
    rows = ctx.rows("SELECT m.*, c.name FROM messages m JOIN contacts c ON c.id = m.contact_id "
                    "WHERE folder = 'inbox' AND read = 0 ORDER BY sent_at DESC LIMIT 5")
    if not rows:
        return None
    senders = list(dict.fromkeys(r["name"] for r in rows))
    return Draft({}, [[call("list_messages", unread_only=True)]],
                 f"You have {len(rows)} unread message{'s' if len(rows) > 1 else ''}, from " + ", ".join(senders) + ".",
                 action="read messages", facts=[[first_name(n)] for n in senders])


def draw_reschedule(ctx: Ctx) -> Draft | None:
    event = ctx.pick_row("SELECT * FROM events WHERE date > ?", ctx.today.isoformat())
    if event is None:
        return None
    same_title = ctx.rows("SELECT id FROM events WHERE lower(title) = lower(?)", event["title"])
    if len(same_title) > 1:
        return None
    new_start = _slot_time(ctx)
    if new_start == event["start_time"]:
        return None
    return Draft({"title": event["title"], "time": ctx.time(new_start)},
                 [[call("find_events", query=event["title"])],
                  [call("update_event", event_id=event["id"], start_time=new_start)]],
                 f"\"{event['title']}\" now starts at {phrasing.nice_time(new_start)}.", action="change calendar events")


def draw_new_number(ctx: Ctx) -> Draft:
    contact = ctx.rng.choice(ctx.rows("SELECT * FROM contacts"))
    _, phone = _new_person(ctx)
    name = first_name(contact["name"])
    return Draft({"name": name, "phone": phone}, [[call("search_contacts", query=name)],
                                                  [call("update_contact", contact_id=contact["id"], phone=phone)]],
                 f"Updated {contact['name']}'s number to {phone}.", action="edit contacts")


def draw_complete_reminder(ctx: Ctx) -> Draft | None:
    row = ctx.pick_row("SELECT * FROM reminders WHERE done = 0")
    if row is None:
        return None
    return Draft({"text": row["text"]}, [[call("list_reminders")], [call("complete_reminder", reminder_id=row["id"])]],
                 f"Marked \"{row['text']}\" as done.", action="complete reminders")


def draw_append_note(ctx: Ctx) -> Draft | None:
    note = ctx.pick_row("SELECT * FROM notes")
    if note is None:
        return None
    text = ctx.rng.choice(["call the plumber", "two more ideas", "check prices online", "ask Sam", "buy batteries",
                           "print the tickets", "sunscreen"])
    return Draft({"title": note["title"], "text": text},
                 [[call("search_notes", query=note["title"])], [call("append_to_note", note_id=note["id"], text=text)]],
                 f"Added \"{text}\" to your {note['title']} note.", action="edit notes")


def _contact_pair(ctx: Ctx):
    a, b = ctx.rng.sample(ctx.rows("SELECT * FROM contacts"), 2)
    return a, b


def draw_send(ctx: Ctx) -> Draft:
    contact = ctx.rng.choice(ctx.rows("SELECT * FROM contacts"))
    name, text = first_name(contact["name"]), ctx.rng.choice(NEW_MESSAGES)
    return Draft({"name": name, "text": text},
                 [[call("search_contacts", query=name)], [call("send_message", contact_id=contact["id"], text=text)]],
                 f"Sent to {contact['name']}.", action="send messages",
                 confirm_prompt=f"I'm about to text {contact['name']}: \"{text}\". Shall I send it?",
                 decline_answer="OK, I won't send it.")


def draw_delete_note(ctx: Ctx) -> Draft | None:
    note = ctx.pick_row("SELECT * FROM notes")
    if note is None:
        return None
    return Draft({"title": note["title"]},
                 [[call("search_notes", query=note["title"])], [call("delete_note", note_id=note["id"])]],
                 f"Deleted the note \"{note['title']}\".", action="delete notes",
                 confirm_prompt=f"This will permanently delete your note \"{note['title']}\". Go ahead?",
                 decline_answer="Alright, the note stays.")


def draw_delete_event(ctx: Ctx) -> Draft | None:
    event = ctx.pick_row("SELECT * FROM events WHERE date >= ?", ctx.today.isoformat())
    if event is None or len(ctx.rows("SELECT id FROM events WHERE title = ?", event["title"])) > 1:
        return None
    day = date.fromisoformat(event["date"])
    return Draft({"title": event["title"]},
                 [[call("find_events", query=event["title"])], [call("delete_event", event_id=event["id"])]],
                 f"Removed \"{event['title']}\" from your calendar.", action="delete calendar events",
                 confirm_prompt=f"Delete \"{event['title']}\" on {phrasing.nice_date(day)} from your calendar?",
                 decline_answer="OK, I've left it in your calendar.")


def draw_delete_contact(ctx: Ctx) -> Draft:
    contact = ctx.rng.choice(ctx.rows("SELECT * FROM contacts"))
    name = first_name(contact["name"])
    return Draft({"name": name},
                 [[call("search_contacts", query=name)], [call("delete_contact", contact_id=contact["id"])]],
                 f"{contact['name']} is deleted from your contacts.", action="delete contacts",
                 confirm_prompt=f"Delete {contact['name']} ({contact['phone']}) from your contacts?",
                 decline_answer=f"OK, {contact['name']} stays in your contacts.")


def draw_share_contact(ctx: Ctx) -> Draft:
    who, to = _contact_pair(ctx)
    a, b = first_name(who["name"]), first_name(to["name"])
    return Draft({"name": a, "other": b},
                 [[call("search_contacts", query=a), call("search_contacts", query=b)],
                  [call("share_contact", contact_id=who["id"], to_contact_id=to["id"])]],
                 f"Sent {who['name']}'s contact details to {to['name']}.", action="share contacts",
                 confirm_prompt=f"I'll send {who['name']}'s phone number and email to {to['name']}. OK?",
                 decline_answer="OK, I haven't shared anything.")


def draw_delete_reminder(ctx: Ctx) -> Draft | None:
    row = ctx.pick_row("SELECT * FROM reminders")
    if row is None:
        return None
    return Draft({"text": row["text"]},
                 [[call("list_reminders", include_done=True)], [call("delete_reminder", reminder_id=row["id"])]],
                 f"Deleted the reminder to {row['text']}.", action="delete reminders",
                 confirm_prompt=f"Delete the reminder \"{row['text']}\"?", decline_answer="OK, I kept the reminder.")


def _bad_phone(rng, slots):
    value = rng.choice(["12", "555", "12345", "0", "9981"])
    return value, value, f"\"{value}\" isn't a valid phone number, so I can't save it. What's the full number?"


INTENTS = [
    Intent("create_contact", "personal", "single", [
        "Save {name}'s number: {phone}.", "Add a contact {name}, phone {phone}.",
        "Create a new contact for {name} with the number {phone}.", "Can you save {phone} as {name}?",
        "New contact: {name}, {phone}.", "Please add {name} to my contacts, number {phone}.",
        "Store {name}'s phone number, it's {phone}.", "Put {name} in my contacts with {phone}.",
        "Add {name} ({phone}) to contacts.", "I met {name}, save the number {phone}."], draw_create_contact,
        ask=Ask("phone", ["Add {name} to my contacts.", "Create a contact for {name}.", "Save {name} as a contact.",
                          "Please make a new contact called {name}.", "New contact: {name}.",
                          "Can you add {name} to my contacts?"],
                ["What's {name}'s phone number?", "Sure, which number should I save for {name}?"],
                ["number", "phone"],
                ["It's {phone}.", "{phone}", "The number is {phone}.", "{phone}, thanks.", "Use {phone}."]),
        invalid=Invalid("phone", _bad_phone)),
    Intent("create_event", "personal", "single", [
        "Add '{title}' to my calendar {date} at {time}.", "Put {title} in the calendar {date}, {time}.",
        "Create an event called {title} {date} at {time}.", "Schedule '{title}' {date} at {time}.",
        "Can you book {title} into my calendar {date} at {time}?", "New event: {title}, {date}, {time}.",
        "Please add an event '{title}' {date} starting at {time}.", "I have {title} {date} at {time}, add it.",
        "Block {date} at {time} for {title}.", "Make a calendar entry '{title}' {date} at {time}."],
        draw_create_event,
        ask=Ask("time", ["Add '{title}' to my calendar {date}.", "Create an event called {title} {date}.",
                         "Schedule {title} {date}.", "Put {title} in my calendar {date}.",
                         "New event: {title}, {date}.", "I have {title} {date}, add it to the calendar."],
                ["What time does {title} start?", "Sure, at what time?"], ["time", "when", "start"],
                ["At {time}.", "{time}", "It starts at {time}.", "{time}, please.", "Make it {time}."]),
        invalid=Invalid("date", _bad_date)),
    Intent("create_reminder", "personal", "single", [
        "Remind me to {text} {date} at {time}.", "Set a reminder to {text} {date} at {time}.",
        "Can you remind me {date} at {time} to {text}?", "I need a reminder {date} at {time}: {text}.",
        "Create a reminder for {date} at {time} to {text}.", "Please remind me to {text}, {date} at {time}.",
        "Don't let me forget to {text} {date} at {time}.", "Reminder {date} {time}: {text}.",
        "Add a reminder to {text} {date} at {time}.", "Ping me {date} at {time} to {text}."],
        draw_create_reminder),
    Intent("create_note", "personal", "single", [
        "Create a note called '{title}' saying '{text}'.", "New note '{title}': {text}.",
        "Make a note titled {title} with '{text}'.", "Write down '{text}' in a new note called {title}.",
        "Can you start a note named '{title}' that says '{text}'?", "Add a note '{title}' - {text}.",
        "Please make a '{title}' note: {text}.", "Note titled '{title}', content: {text}.",
        "Jot down '{text}' under a new note '{title}'.", "Save a note called {title}: '{text}'."],
        draw_create_note,
        ask=Ask("text", ["Create a note called '{title}'.", "Make a new note titled {title}.",
                         "Start a note named '{title}'.", "New note: {title}.", "Can you create a '{title}' note?",
                         "Add a note called {title}."],
                ["What should the note say?", "Sure, what do you want in the '{title}' note?"],
                ["say", "write", "content", "what"],
                ["It should say '{text}'.", "{text}", "Write: {text}.", "Put '{text}' in it.", "Just '{text}'."])),
    Intent("day_agenda", "personal", "single", [
        "What's on my calendar {date}?", "What do I have {date}?", "Any events {date}?",
        "Read me my schedule {date}.", "Am I busy {date}?", "What's planned {date}?", "Check my calendar {date}.",
        "Tell me my appointments {date}.", "What meetings do I have {date}?", "Show my agenda {date}."],
        draw_day_agenda),
    Intent("phone_number", "personal", "single", [
        "What's {name}'s number?", "Give me {name}'s phone number.", "How do I reach {name} by phone?",
        "Look up {name}'s number.", "What number do I have for {name}?", "Find {name}'s phone number.",
        "I need {name}'s number.", "Can you get me {name}'s phone?", "Tell me {name}'s number.",
        "Which phone number is saved for {name}?"], draw_phone_number),
    Intent("open_reminders", "personal", "single", [
        "What reminders do I have?", "List my reminders.", "What's on my to-do list?",
        "Which reminders are still open?", "Read my reminders.", "Show me my reminders.",
        "What do I still need to do?", "Any reminders pending?", "Tell me my open reminders.",
        "Check my reminders."], draw_open_reminders),
    Intent("unread_messages", "personal", "single", [
        "Do I have unread messages?", "Any new messages?", "Who has texted me?", "Check my unread texts.",
        "Are there messages I haven't read?", "Show unread messages.", "Did anyone message me?",
        "What messages haven't I read yet?", "Any unread texts?", "List my unread messages."], draw_unread),
    Intent("reschedule_event", "personal", "chain", [
        "Move '{title}' to {time}.", "Change the start of {title} to {time}.", "Reschedule {title} to {time}.",
        "Can you push {title} to {time}?", "{title} should start at {time} instead.",
        "Please move my {title} to {time}.", "Shift {title} so it starts at {time}.",
        "Update {title} to begin at {time}.", "Make {title} start at {time}.", "Set {title} to {time}."],
        draw_reschedule),
    Intent("new_number", "personal", "chain", [
        "{name} has a new number: {phone}.", "Update {name}'s phone to {phone}.",
        "Change {name}'s number to {phone}.", "Can you replace {name}'s number with {phone}?",
        "{name}'s number is now {phone}, update it.", "Please set {name}'s phone number to {phone}.",
        "Edit {name}'s contact: new number {phone}.", "Save {phone} as {name}'s new number.",
        "{name} changed numbers, it's {phone} now.", "Fix {name}'s number, it should be {phone}."], draw_new_number),
    Intent("complete_reminder", "personal", "chain", [
        "Mark the reminder to {text} as done.", "I did it: {text}. Tick it off.", "Complete my reminder to {text}.",
        "Check off '{text}'.", "The reminder to {text} is done.", "Please mark '{text}' as complete.",
        "Cross off {text} from my reminders.", "Done with '{text}', mark it.", "Tick off the {text} reminder.",
        "Set the reminder '{text}' to done."], draw_complete_reminder),
    Intent("append_note", "personal", "chain", [
        "Add '{text}' to my {title} note.", "Append '{text}' to the note {title}.",
        "Put {text} at the end of my '{title}' note.", "Can you add '{text}' to {title}?",
        "In my {title} note, add: {text}.", "Please write '{text}' into the {title} note.",
        "Update my {title} note with '{text}'.", "Stick '{text}' on my {title} note.",
        "My {title} note needs '{text}' added.", "Add a line '{text}' to note {title}."], draw_append_note),
    Intent("send_message", "personal", "sensitive", [
        "Text {name}: '{text}'.", "Send {name} a message saying '{text}'.", "Message {name} '{text}'.",
        "Can you tell {name} '{text}' by text?", "Let {name} know '{text}'.", "Please text {name} that '{text}'.",
        "Send a message to {name}: {text}.", "Write to {name}: '{text}'.", "Drop {name} a text: '{text}'.",
        "Shoot {name} a message: '{text}'."], draw_send,
        ask=Ask("text", ["Text {name}.", "Send {name} a message.", "Can you message {name}?", "Write to {name}.",
                         "I want to text {name}.", "Please send a message to {name}."],
                ["What would you like to say to {name}?", "Sure, what should the message say?"],
                ["say", "message", "what", "text"],
                ["Say '{text}'.", "'{text}'", "Tell them '{text}'.", "The message is: {text}", "Just '{text}'."])),
    Intent("delete_note", "personal", "sensitive", [
        "Delete my note '{title}'.", "Remove the {title} note.", "Get rid of the note called {title}.",
        "Can you delete the '{title}' note?", "I don't need my {title} note anymore, delete it.",
        "Please trash the note {title}.", "Erase my '{title}' note.", "Delete the note titled {title}.",
        "Throw away my {title} note.", "Could you remove the note '{title}'?"], draw_delete_note),
    Intent("delete_event", "personal", "sensitive", [
        "Cancel '{title}' in my calendar.", "Delete {title} from my calendar.", "Remove the event {title}.",
        "Can you take {title} off my calendar?", "{title} is off, delete it.", "Please delete the event '{title}'.",
        "Clear {title} from the calendar.", "Drop {title} from my schedule.", "Get rid of '{title}'.",
        "Remove {title} from my agenda."], draw_delete_event),
    Intent("delete_contact", "personal", "sensitive", [
        "Delete {name} from my contacts.", "Remove {name}'s contact.", "Get rid of {name} in my contacts.",
        "Can you delete the contact {name}?", "I don't need {name}'s number anymore, delete it.",
        "Please remove {name} from contacts.", "Erase {name}'s contact card.", "Delete contact {name}.",
        "Take {name} out of my contacts.", "Could you delete {name}'s entry?"], draw_delete_contact),
    Intent("share_contact", "personal", "sensitive", [
        "Send {name}'s contact to {other}.", "Share {name}'s details with {other}.",
        "Can you give {other} {name}'s number?", "Forward {name}'s contact card to {other}.",
        "{other} needs {name}'s number, send it.", "Please share {name}'s contact with {other}.",
        "Pass {name}'s details on to {other}.", "Text {other} {name}'s contact info.",
        "Share the contact {name} with {other}.", "Send {other} the contact for {name}."], draw_share_contact),
    Intent("delete_reminder", "personal", "sensitive", [
        "Delete the reminder to {text}.", "Remove my reminder '{text}'.", "Get rid of the {text} reminder.",
        "Can you delete the reminder about '{text}'?", "I don't need the reminder to {text}, delete it.",
        "Please remove '{text}' from my reminders.", "Erase the reminder '{text}'.",
        "Delete reminder: {text}.", "Trash the reminder to {text}.", "Could you remove the '{text}' reminder?"],
        draw_delete_reminder),
]

