"""Fill a fresh world database from a seed: the same seed always gives the same device.

The world's clock is part of the seed too (``meta.now``): tools read "now" from there, so a
replayed episode computes the same timer ends and relative dates as the original one.
"""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import date, datetime, timedelta

from botpsy.world import words

BASE_DAY = date(2026, 3, 2)


def seed_world(conn: sqlite3.Connection, seed: int) -> None:
    """Populate every state table; one transaction, so a half-seeded world never exists."""
    rng = random.Random(seed)
    now = datetime.combine(BASE_DAY + timedelta(days=rng.randrange(300)), datetime.min.time())
    now = now.replace(hour=rng.choice([8, 9, 10, 13, 17]), minute=rng.choice([0, 15, 30, 45]))
    owner = f"{rng.choice(words.FIRST_NAMES)} {rng.choice(words.LAST_NAMES)}"
    conn.execute("BEGIN IMMEDIATE")
    try:
        _insert(conn, "meta", [{"key": "seed", "value": str(seed)}, {"key": "now", "value": now.isoformat()},
                               {"key": "owner", "value": owner},
                               {"key": "city", "value": rng.choice(words.CITIES)}])
        contacts = _contacts(rng)
        _insert(conn, "contacts", contacts)
        _insert(conn, "settings", _settings(rng))
        _insert(conn, "apps", _apps(rng))
        _insert(conn, "alarms", _alarms(rng))
        _insert(conn, "timers", _timers(rng, now))
        _insert(conn, "events", _events(rng, now, contacts))
        _insert(conn, "reminders", _reminders(rng, now))
        _insert(conn, "notes", _notes(rng, now))
        _insert(conn, "messages", _messages(rng, now, contacts))
        products = _products(rng)
        _insert(conn, "products", products)
        payments = _payment_methods(rng)
        _insert(conn, "payment_methods", payments)
        _insert(conn, "orders", _orders(rng, now, products, payments))
        _insert(conn, "cart_items", [{"product_id": p["id"], "quantity": rng.randint(1, 2)}
                                     for p in rng.sample(products, rng.randint(0, 2))])
        venues = _venues(rng)
        _insert(conn, "venues", venues)
        _insert(conn, "bookings", _bookings(rng, now, venues))
        counters = {"c": 100, "e": 100, "r": 100, "n": 100, "m": 100, "a": 100, "t": 100, "o": 1100, "b": 100,
                    "req": 0}
        _insert(conn, "counters", [{"name": k, "value": v} for k, v in counters.items()])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _insert(conn: sqlite3.Connection, table: str, rows: list[dict]) -> None:
    if not rows:
        return
    cols = list(rows[0])
    sql = f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
    conn.executemany(sql, [[r[c] for c in cols] for r in rows])


def _phone(rng: random.Random) -> str:
    return f"+1 555-{rng.randrange(1000, 10000)}"


def _contacts(rng: random.Random) -> list[dict]:
    firsts = rng.sample(words.FIRST_NAMES, rng.randint(14, 20))
    rows = []
    for i, first in enumerate(firsts):
        last = rng.choice(words.LAST_NAMES)
        email = f"{first.lower()}.{last.lower()}@{rng.choice(words.EMAIL_DOMAINS)}" if rng.random() < 0.8 else None
        rows.append({"id": f"c{i + 1:02d}", "name": f"{first} {last}", "phone": _phone(rng), "email": email,
                     "city": rng.choice(words.CITIES), "favorite": int(rng.random() < 0.2)})
    return rows


def _settings(rng: random.Random) -> list[dict]:
    values = {
        "wifi": rng.random() < 0.8, "wifi_network": rng.choice(["HomeNet", "Flat-5G", "Casa", "Nest"]),
        "bluetooth": rng.random() < 0.5, "airplane_mode": False, "do_not_disturb": rng.random() < 0.2,
        "dnd_until": None, "battery_saver": rng.random() < 0.3, "dark_mode": rng.random() < 0.5,
        "brightness": rng.randrange(20, 95, 5), "volume_media": rng.randrange(10, 90, 10),
        "volume_ring": rng.randrange(20, 100, 10), "volume_alarm": rng.randrange(40, 100, 10),
        "battery_level": rng.randint(8, 100), "storage_free_gb": rng.randint(3, 120), "foreground_app": None,
    }
    return [{"key": k, "value": json.dumps(v)} for k, v in values.items()]


def _apps(rng: random.Random) -> list[dict]:
    return [{"name": name, "category": cat, "installed": int(rng.random() < 0.6), "size_mb": rng.randint(8, 400)}
            for name, cat in words.APP_CATALOGUE.items()]


def _alarms(rng: random.Random) -> list[dict]:
    labels = rng.sample(words.ALARM_LABELS, rng.randint(2, 4))
    rows = []
    used = set()
    for i, label in enumerate(labels):
        time = f"{rng.randint(5, 9):02d}:{rng.choice([0, 15, 30, 45]):02d}"
        while time in used:
            time = f"{rng.randint(5, 22):02d}:{rng.choice([0, 10, 20, 40, 50]):02d}"
        used.add(time)
        days = rng.choice([["mon", "tue", "wed", "thu", "fri"], ["sat", "sun"], []])
        rows.append({"id": f"a{i + 1}", "time": time, "label": label, "days": json.dumps(days),
                     "enabled": int(rng.random() < 0.75)})
    return rows


def _timers(rng: random.Random, now: datetime) -> list[dict]:
    rows = []
    for i, label in enumerate(rng.sample(words.TIMER_LABELS, rng.randint(0, 2))):
        seconds = rng.choice([300, 600, 900, 1200, 1800])
        rows.append({"id": f"t{i + 1}", "label": label, "duration_seconds": seconds,
                     "ends_at": (now + timedelta(seconds=seconds - 60)).isoformat(), "status": "running"})
    return rows


def _events(rng: random.Random, now: datetime, contacts: list[dict]) -> list[dict]:
    rows = []
    titles = set()
    for i in range(rng.randint(8, 14)):
        if rng.random() < 0.45:
            title = rng.choice(words.EVENT_WITH_PERSON).format(name=rng.choice(contacts)["name"].split()[0])
        else:
            title = rng.choice(words.EVENT_ALONE)
        if title in titles:
            continue
        titles.add(title)
        day = now.date() + timedelta(days=rng.randint(0, 13))
        start = rng.randint(8, 19)
        minute = rng.choice([0, 30])
        length = rng.choice([30, 60, 90])
        end = datetime.combine(day, datetime.min.time()).replace(hour=start, minute=minute) + timedelta(minutes=length)
        rows.append({"id": f"e{i + 1:02d}", "title": title, "date": day.isoformat(),
                     "start_time": f"{start:02d}:{minute:02d}", "end_time": end.strftime("%H:%M"),
                     "location": rng.choice(words.EVENT_PLACES) if rng.random() < 0.6 else None, "notes": None})
    return rows


def _reminders(rng: random.Random, now: datetime) -> list[dict]:
    rows = []
    for i, text in enumerate(rng.sample(words.REMINDER_TEXTS, rng.randint(4, 8))):
        due = now.date() + timedelta(days=rng.randint(0, 10)) if rng.random() < 0.7 else None
        rows.append({"id": f"r{i + 1:02d}", "text": text, "due_date": due.isoformat() if due else None,
                     "due_time": f"{rng.randint(8, 20):02d}:00" if due and rng.random() < 0.5 else None,
                     "done": int(rng.random() < 0.25)})
    return rows


def _notes(rng: random.Random, now: datetime) -> list[dict]:
    picks = rng.sample(range(len(words.NOTE_TITLES)), rng.randint(5, 9))
    return [{"id": f"n{i + 1:02d}", "title": words.NOTE_TITLES[k], "body": words.NOTE_BODIES[k],
             "updated_at": (now - timedelta(days=rng.randint(1, 60))).isoformat()} for i, k in enumerate(picks)]


def message_text(rng: random.Random) -> str:
    return rng.choice(words.MESSAGE_BODIES).format(
        activity=rng.choice(words.ACTIVITIES), time=f"{rng.randint(5, 9)}:{rng.choice(['00', '30'])}",
        day=rng.choice(words.WEEKDAYS))


def _messages(rng: random.Random, now: datetime, contacts: list[dict]) -> list[dict]:
    rows = []
    for i in range(rng.randint(10, 18)):
        contact = rng.choice(contacts)
        folder = "inbox" if rng.random() < 0.7 else "outbox"
        sent = now - timedelta(minutes=rng.randint(5, 60 * 24 * 6))
        rows.append({"id": f"m{i + 1:02d}", "contact_id": contact["id"], "folder": folder,
                     "text": message_text(rng), "read": int(folder == "outbox" or rng.random() < 0.6),
                     "sent_at": sent.isoformat(timespec="minutes")})
    return rows


def _products(rng: random.Random) -> list[dict]:
    rows = []
    names = set()
    for category, (items, low, high) in words.PRODUCT_CATEGORIES.items():
        for item in rng.sample(items, rng.randint(1, len(items))):
            brand = (rng.choice(words.BRAND_SYLLABLES) + rng.choice(words.BRAND_SYLLABLES)).capitalize()
            adjective = rng.choice(words.PRODUCT_ADJECTIVES)
            name = f"{brand} {adjective} {item}"
            if name in names:
                continue
            names.add(name)
            price = rng.randrange(low, high, 10) + 9
            rows.append({"id": f"p{len(rows) + 1:03d}", "name": name, "category": category, "price_cents": price,
                         "rating": round(rng.uniform(3.0, 5.0), 1), "stock": rng.choice([0, 3, 12, 40, 100]),
                         "description": f"A {adjective} {item} by {brand}."})
    return rows


def _payment_methods(rng: random.Random) -> list[dict]:
    brands = rng.sample(words.CARD_BRANDS, rng.randint(2, 3))
    return [{"id": f"pm{i + 1}", "brand": b, "last4": f"{rng.randrange(10000):04d}", "is_default": int(i == 0)}
            for i, b in enumerate(brands)]


def _orders(rng: random.Random, now: datetime, products: list[dict], payments: list[dict]) -> list[dict]:
    rows = []
    for i in range(rng.randint(3, 6)):
        picks = rng.sample(products, rng.randint(1, 2))
        items = [{"product_id": p["id"], "quantity": rng.randint(1, 2)} for p in picks]
        total = sum(p["price_cents"] * it["quantity"] for p, it in zip(picks, items))
        status = rng.choice(["processing", "shipped", "delivered", "delivered", "cancelled"])
        placed = now - timedelta(days=rng.randint(0, 20), hours=rng.randint(0, 12))
        eta = (now.date() + timedelta(days=rng.randint(1, 5))).isoformat() if status in ("processing", "shipped") \
            else None
        rows.append({"id": f"o{1001 + i}", "items": json.dumps(items), "total_cents": total,
                     "payment_method_id": rng.choice(payments)["id"], "status": status,
                     "placed_at": placed.isoformat(timespec="minutes"),
                     "carrier": rng.choice(words.CARRIERS) if status != "cancelled" else None, "eta": eta})
    return rows


def _venues(rng: random.Random) -> list[dict]:
    rows = []
    names = set()
    for kind, (patterns, low, high) in words.VENUE_KINDS.items():
        for _ in range(rng.randint(low, high)):
            name = rng.choice(patterns).format(adj=rng.choice(words.VENUE_ADJECTIVES),
                                               noun=rng.choice(words.VENUE_NOUNS), noun2=rng.choice(words.VENUE_NOUNS))
            if name in names:
                continue
            names.add(name)
            rows.append({"id": f"v{len(rows) + 1:02d}", "name": name, "kind": kind, "city": rng.choice(words.CITIES),
                         "address": f"{rng.randint(1, 120)} {rng.choice(words.STREETS)}",
                         "rating": round(rng.uniform(3.2, 4.9), 1)})
    return rows


def _bookings(rng: random.Random, now: datetime, venues: list[dict]) -> list[dict]:
    rows = []
    for i, venue in enumerate(rng.sample(venues, min(len(venues), rng.randint(1, 3)))):
        day = now.date() + timedelta(days=rng.randint(1, 12))
        rows.append({"id": f"b{i + 1:02d}", "venue_id": venue["id"], "date": day.isoformat(),
                     "time": f"{rng.randint(12, 20)}:{rng.choice(['00', '30'])}", "party_size": rng.randint(1, 6),
                     "status": "confirmed"})
    return rows
