"""The device database: schema, connection settings, snapshots and state diffs.

A world is one SQLite database. The user-visible state lives in the ``STATE_TABLES``; the
bookkeeping tables (``meta``, ``counters``, ``confirmations``, ``audit``) are never part of a
snapshot. Files use WAL journaling with ``synchronous=NORMAL``: a committed call survives
the process being killed at any moment (the OS still holds the WAL pages), and the file is
never left corrupt; a power cut may lose the last few commits, never consistency.

``snapshot(conn)`` -> ``{table: {primary key: row}}``; ``diff_snapshots(before, after)`` ->
``{table: {"added": [rows without id], "removed": [keys], "changed": {key: {column: new}}}}``
(only tables that changed). The checker compares such diffs, so generated ids and
timestamps (``IGNORED_COLUMNS``) never decide success.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any, Iterable

SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE apps(name TEXT PRIMARY KEY, category TEXT NOT NULL, installed INTEGER NOT NULL,
                  size_mb INTEGER NOT NULL);
CREATE TABLE alarms(id TEXT PRIMARY KEY, time TEXT NOT NULL, label TEXT, days TEXT NOT NULL,
                    enabled INTEGER NOT NULL);
CREATE TABLE timers(id TEXT PRIMARY KEY, label TEXT, duration_seconds INTEGER NOT NULL,
                    ends_at TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE contacts(id TEXT PRIMARY KEY, name TEXT NOT NULL, phone TEXT NOT NULL, email TEXT,
                      city TEXT, favorite INTEGER NOT NULL DEFAULT 0);
CREATE TABLE events(id TEXT PRIMARY KEY, title TEXT NOT NULL, date TEXT NOT NULL,
                    start_time TEXT NOT NULL, end_time TEXT NOT NULL, location TEXT, notes TEXT);
CREATE TABLE reminders(id TEXT PRIMARY KEY, text TEXT NOT NULL, due_date TEXT, due_time TEXT,
                       done INTEGER NOT NULL DEFAULT 0);
CREATE TABLE notes(id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL, updated_at TEXT);
CREATE TABLE messages(id TEXT PRIMARY KEY, contact_id TEXT NOT NULL, folder TEXT NOT NULL,
                      text TEXT NOT NULL, read INTEGER NOT NULL, sent_at TEXT NOT NULL);
CREATE TABLE products(id TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                      price_cents INTEGER NOT NULL, rating REAL NOT NULL, stock INTEGER NOT NULL,
                      description TEXT NOT NULL);
CREATE TABLE cart_items(product_id TEXT PRIMARY KEY, quantity INTEGER NOT NULL);
CREATE TABLE payment_methods(id TEXT PRIMARY KEY, brand TEXT NOT NULL, last4 TEXT NOT NULL,
                             is_default INTEGER NOT NULL);
CREATE TABLE orders(id TEXT PRIMARY KEY, items TEXT NOT NULL, total_cents INTEGER NOT NULL,
                    payment_method_id TEXT NOT NULL, status TEXT NOT NULL, placed_at TEXT NOT NULL,
                    carrier TEXT, eta TEXT);
CREATE TABLE venues(id TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, city TEXT NOT NULL,
                    address TEXT NOT NULL, rating REAL NOT NULL);
CREATE TABLE bookings(id TEXT PRIMARY KEY, venue_id TEXT NOT NULL, date TEXT NOT NULL, time TEXT NOT NULL,
                      party_size INTEGER NOT NULL, status TEXT NOT NULL);
CREATE TABLE confirmations(id TEXT PRIMARY KEY, name TEXT NOT NULL, arguments TEXT NOT NULL,
                           status TEXT NOT NULL);
CREATE TABLE audit(seq INTEGER PRIMARY KEY, actor TEXT NOT NULL, name TEXT NOT NULL,
                   arguments TEXT NOT NULL, status TEXT NOT NULL, error TEXT, request_id TEXT,
                   result TEXT);
"""

# table -> primary key column, for every table that is part of the user-visible state.
STATE_TABLES: dict[str, str] = {
    "settings": "key", "apps": "name", "alarms": "id", "timers": "id", "contacts": "id",
    "events": "id", "reminders": "id", "notes": "id", "messages": "id", "products": "id",
    "cart_items": "product_id", "payment_methods": "id", "orders": "id", "venues": "id",
    "bookings": "id",
}

# Values a tool derives from the clock or a counter: never compared by the checker.
IGNORED_COLUMNS = frozenset({"updated_at", "sent_at", "placed_at", "ends_at", "eta"})


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` (or ``":memory:"``) in autocommit mode; transactions are explicit."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
    return conn


def is_initialised(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    return row is not None


def create_schema(conn: sqlite3.Connection) -> None:
    """All tables in one transaction, so a killed process never leaves half a schema."""
    conn.executescript("BEGIN IMMEDIATE;" + SCHEMA + "COMMIT;")


def snapshot(conn: sqlite3.Connection, tables: Iterable[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """State tables (all by default) as ``{table: {primary key: row dict}}``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples: several times faster than sqlite3.Row here
    for table in STATE_TABLES if tables is None else tables:
        cursor.execute(f"SELECT * FROM {table}")
        columns = [c[0] for c in cursor.description]
        position = columns.index(STATE_TABLES[table])
        out[table] = {str(values[position]): dict(zip(columns, values)) for values in cursor.fetchall()}
    return out


def diff_snapshots(before: dict, after: dict) -> dict[str, dict[str, Any]]:
    """What changed between two snapshots, ignoring generated ids and clock-derived columns."""
    out: dict[str, dict[str, Any]] = {}
    for table, key in STATE_TABLES.items():
        old, new = before.get(table, {}), after.get(table, {})
        if old is new:  # incremental snapshots share the dicts of tables nobody wrote to
            continue
        added = [strip_row(new[k], key) for k in sorted(new.keys() - old.keys())]
        removed = sorted(old.keys() - new.keys())
        changed = {}
        for k in sorted(old.keys() & new.keys()):
            if old[k] == new[k]:
                continue
            delta = {c: v for c, v in new[k].items() if c not in IGNORED_COLUMNS and old[k].get(c) != v}
            if delta:
                changed[k] = delta
        if added or removed or changed:
            entry: dict[str, Any] = {}
            if added:
                entry["added"] = added
            if removed:
                entry["removed"] = removed
            if changed:
                entry["changed"] = changed
            out[table] = entry
    return out


def strip_row(row: dict[str, Any], key: str) -> dict[str, Any]:
    """A new row without its generated key (unless the key is meaningful) or clock columns."""
    generated_key = key == "id"
    return {c: v for c, v in row.items() if c not in IGNORED_COLUMNS and not (generated_key and c == key)}


_PUNCT = re.compile(r"[^\w\s:.@+%-]")
_SPACE = re.compile(r"\s+")


def norm_text(value: Any) -> str:
    """Lower-case, typographic quotes and punctuation dropped, spaces collapsed.

    >>> norm_text("  Running LATE, sorry!! ")
    'running late sorry'
    """
    text = str(value).lower().replace("\u2019", "'")
    text = _PUNCT.sub(" ", text.replace("'", ""))
    return _SPACE.sub(" ", text).strip(" .")


def values_equal(expected: Any, actual: Any, column: str = "") -> bool:
    """Numbers compare exactly, phone numbers by digits, other strings after ``norm_text``, JSON parsed."""
    if isinstance(expected, str) and isinstance(actual, str):
        if column == "phone":
            return re.sub(r"\D", "", expected) == re.sub(r"\D", "", actual)
        if expected[:1] in "[{" and actual[:1] in "[{":
            try:
                return json.loads(expected) == json.loads(actual)
            except json.JSONDecodeError:
                pass
        return norm_text(expected) == norm_text(actual)
    return expected == actual


def row_matches(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    """An added row matches when every column the expectation fixes (non-null) is equal."""
    return all(v is None or values_equal(v, actual.get(c), c) for c, v in expected.items())


def apply_patch(conn: sqlite3.Connection, patch: dict[str, list[dict[str, Any]]]) -> None:
    """Insert or replace rows (a task's own additions to a seeded world), in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, rows in patch.items():
            if table not in STATE_TABLES:
                raise ValueError(f"patch names unknown table {table!r}")
            for row in rows:
                cols = ", ".join(row)
                marks = ", ".join("?" for _ in row)
                conn.execute(f"INSERT OR REPLACE INTO {table}({cols}) VALUES ({marks})", list(row.values()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
