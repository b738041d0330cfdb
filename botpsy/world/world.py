"""``World``: one device's state behind the tools, with validation, transactions, confirmations and audit.

The model-facing side is ``world.call(name, arguments)`` and nothing else. It never raises
for model-caused problems; it returns either the tool's compact result or an error dict::

    {"error": "unknown_tool" | "invalid_arguments" | "needs_confirmation" | <tool code> | "internal_error",
     "message": "...", ...}

Every call is one SQLite transaction (the tool's writes and its audit row commit together,
or nothing does), and every call, failed or not, is appended to the ``audit`` table.

Sensitive tools (send, pay, buy, delete, share) follow a confirmation protocol that the
model cannot complete on its own:

1. the model calls the tool; the world tries it and rolls it back (a call that would fail
   returns its error at once), stores a *pending request* and answers
   ``{"error": "needs_confirmation", "request_id": ...}``;
2. the user side (``world.user``, never exposed to the model) approves or declines it;
3. the model calls the tool again with the same arguments; an approved request is consumed
   and the call runs. The user may also approve an exact call in advance
   (``world.user.approve(name, arguments)``) when the assistant asked before calling.

Example::

    world = World(":memory:", seed=7)
    world.call("set_wifi", {"enabled": False})        # {"wifi": false, "changed": true}
    r = world.call("send_message", {"contact_id": "c01", "text": "hi"})   # needs_confirmation
    world.user.confirm(r["request_id"])
    world.call("send_message", {"contact_id": "c01", "text": "hi"})       # {"sent": "m101", ...}
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from botpsy.world import store
from botpsy.world import tools_commerce, tools_device, tools_personal  # noqa: F401  (register the tools)
from botpsy.world.registry import REGISTRY, Tool, ToolContext, ToolError
from botpsy.world.seed import seed_world


def is_error(result: dict[str, Any]) -> bool:
    """True for every result the world returns instead of running a tool to completion."""
    return isinstance(result, dict) and "error" in result


def canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class World:
    """A seeded device. ``path`` is a database file (created and seeded if new) or ``":memory:"``.

    ``offered`` restricts which tools the model may call in this episode (``None``: all).
    """

    def __init__(self, path: str = ":memory:", seed: int = 0, offered: Iterable[str] | None = None):
        self.path = path
        self.conn = store.connect(path)
        self.offered = set(offered) if offered is not None else None
        self.user = UserSide(self)
        # The last snapshot read, and the tables written since (see ToolContext): a snapshot
        # re-reads only those. The inner table dicts are shared and never mutated.
        self._snapshot: dict[str, dict] = {}
        self._dirty: set[str] = set(store.STATE_TABLES)
        if path == ":memory:":
            template = _seeded_template(seed)
            template.conn.backup(self.conn)
            meta, self._snapshot, self._dirty = template.meta, dict(template.snapshot), set()
        else:
            meta = self._open_file(seed)
        self.seed = int(meta["seed"])
        self.now = datetime.fromisoformat(meta["now"])
        self.owner = meta["owner"]
        self.city = meta["city"]

    def _open_file(self, seed: int) -> dict[str, str]:
        """Create and seed the file on first use; afterwards its stored seed wins over ``seed``."""
        if not store.is_initialised(self.conn):
            store.create_schema(self.conn)
        if self.conn.execute("SELECT COUNT(*) FROM meta").fetchone()[0] == 0:
            seed_world(self.conn, seed)
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    # ---- the model-facing side -------------------------------------------------------------
    def tool_specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI-style tool declarations, in the order of ``names`` (default: all offered tools)."""
        if names is None:
            names = sorted(self.offered) if self.offered is not None else list(REGISTRY)
        return [REGISTRY[n].spec() for n in names]

    def call(self, name: str, arguments: Any = None) -> dict[str, Any]:
        """Run one tool call for the model; see the module docstring for the result shapes."""
        tool = REGISTRY.get(name) if isinstance(name, str) else None
        if tool is None or (self.offered is not None and name not in self.offered):
            message = f"there is no tool named {name!r}"
            if self.offered is not None:
                message += f"; available: {', '.join(sorted(self.offered))}"
            return self._fail(str(name), arguments, "unknown_tool", message)
        parsed, problem = parse_arguments(arguments)
        if problem:
            return self._fail(name, arguments, "invalid_arguments", problem)
        problems = tool.argument_errors(parsed)
        if problems:
            return self._fail(name, parsed, "invalid_arguments", "; ".join(problems))
        request_id = None
        if tool.sensitive:
            request_id = self._approved_request(name, parsed)
            if request_id is None:
                # Try it first and roll back: never ask the user to approve a call that would fail.
                problem = self._dry_run(tool, parsed)
                if problem is not None:
                    return self._fail(name, parsed, *problem)
                return self._ask_confirmation(tool, parsed)
        return self._execute(tool, parsed, request_id)

    def _dry_run(self, tool: Tool, arguments: dict) -> tuple[str, str] | None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            tool.fn(ToolContext(self.conn, self.now, self._dirty), **arguments)
            return None
        except ToolError as exc:
            return exc.code, exc.message
        except Exception as exc:  # a bug in the tool: the real call would fail the same way
            return "internal_error", f"the tool failed: {type(exc).__name__}"
        finally:
            self.conn.execute("ROLLBACK")

    def _execute(self, tool: Tool, arguments: dict, request_id: str | None) -> dict[str, Any]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = tool.fn(ToolContext(self.conn, self.now, self._dirty), **arguments)
            json.dumps(result)  # a result the model cannot read is a bug in the tool: fail before commit
            if request_id is not None:
                self.conn.execute("UPDATE confirmations SET status = 'used' WHERE id = ?", (request_id,))
            self._audit("assistant", tool.name, arguments, "ok", None, request_id, result)
            self.conn.execute("COMMIT")
            return result
        except ToolError as exc:
            self.conn.execute("ROLLBACK")
            return self._fail(tool.name, arguments, exc.code, exc.message)
        except Exception as exc:  # a bug in a tool: report it to the model, keep the state intact
            self.conn.execute("ROLLBACK")
            return self._fail(tool.name, arguments, "internal_error", f"the tool failed: {type(exc).__name__}")

    def _fail(self, name: str, arguments: Any, code: str, message: str, **extra: Any) -> dict[str, Any]:
        result = {"error": code, "message": message, **extra}
        self._audit_committed("assistant", name, arguments, "error", code, extra.get("request_id"), result)
        return result

    # ---- confirmations ---------------------------------------------------------------------
    def _approved_request(self, name: str, arguments: dict) -> str | None:
        row = self.conn.execute("SELECT id FROM confirmations WHERE name = ? AND arguments = ? AND status = 'approved' "
                                "ORDER BY rowid LIMIT 1", (name, canonical(arguments))).fetchone()
        return row[0] if row else None

    def _ask_confirmation(self, tool: Tool, arguments: dict) -> dict[str, Any]:
        args = canonical(arguments)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            row = self.conn.execute("SELECT id FROM confirmations WHERE name = ? AND arguments = ? AND status = "
                                    "'pending'", (tool.name, args)).fetchone()
            if row is None:
                request_id = self._next_request_id()
                self.conn.execute("INSERT INTO confirmations(id, name, arguments, status) VALUES (?, ?, ?, 'pending')",
                                  (request_id, tool.name, args))
            else:
                request_id = row[0]
            result = {"error": "needs_confirmation", "request_id": request_id,
                      "message": f"{tool.name} is sensitive: tell the user exactly what you are about to do and ask "
                                 "them to confirm; if they agree, call it again with the same arguments."}
            self._audit("assistant", tool.name, arguments, "needs_confirmation", "needs_confirmation", request_id,
                        result)
            self.conn.execute("COMMIT")
            return result
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _next_request_id(self) -> str:
        return ToolContext(self.conn, self.now).next_id("req")

    def pending_confirmations(self) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT id, name, arguments FROM confirmations WHERE status = 'pending' "
                                 "ORDER BY rowid").fetchall()
        return [{"request_id": r[0], "name": r[1], "arguments": json.loads(r[2])} for r in rows]

    # ---- audit and state ---------------------------------------------------------------------
    def _audit(self, actor: str, name: str, arguments: Any, status: str, error: str | None,
               request_id: str | None, result: Any) -> None:
        args = canonical(arguments) if isinstance(arguments, dict) else json.dumps(arguments, default=str)
        self.conn.execute("INSERT INTO audit(actor, name, arguments, status, error, request_id, result) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?)",
                          (actor, name, args, status, error, request_id, json.dumps(result, ensure_ascii=False)))

    def _audit_committed(self, *fields: Any) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._audit(*fields)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def audit_log(self) -> list[dict[str, Any]]:
        """Every call and user decision, oldest first; ``arguments`` and ``result`` parsed back."""
        rows = self.conn.execute("SELECT seq, actor, name, arguments, status, error, request_id, result FROM audit "
                                 "ORDER BY seq").fetchall()
        out = []
        for r in rows:
            out.append({"seq": r[0], "actor": r[1], "name": r[2], "arguments": json.loads(r[3]), "status": r[4],
                        "error": r[5], "request_id": r[6], "result": json.loads(r[7]) if r[7] else None})
        return out

    def snapshot(self, full: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
        """The user-visible state, ``{table: {key: row}}``; treat it as read-only.

        Only tables written since the last snapshot are read again; ``full=True`` re-reads
        everything (needed only after writing to ``world.conn`` directly).
        """
        stale = set(store.STATE_TABLES) if full else self._dirty
        if stale:
            self._snapshot = {**self._snapshot, **store.snapshot(self.conn, sorted(stale))}
            self._dirty = set()
        return dict(self._snapshot)

    def apply_patch(self, patch: dict[str, list[dict[str, Any]]]) -> None:
        store.apply_patch(self.conn, patch)
        self._dirty.update(patch)

    @staticmethod
    def is_sensitive(name: str) -> bool:
        return name in REGISTRY and REGISTRY[name].sensitive

    @staticmethod
    def is_write(name: str) -> bool:
        return name in REGISTRY and REGISTRY[name].writes

    def read(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        """Read-only SQL for generators and tests (never offered to the model)."""
        return [dict(r) for r in self.conn.execute(sql, params).fetchall()]

    def close(self) -> None:
        self.conn.close()


@dataclass
class _Template:
    conn: sqlite3.Connection
    meta: dict[str, str]
    snapshot: dict[str, dict]


_TEMPLATES: OrderedDict[int, _Template] = OrderedDict()
_TEMPLATE_CACHE_SIZE = 32
_EMPTY: sqlite3.Connection | None = None


def _seeded_template(seed: int) -> _Template:
    """A freshly seeded in-memory world to copy from: seeding costs ~5 ms, copying ~0.2 ms.

    Task generation and checking rebuild the same few worlds many times; the copy is
    byte-identical to seeding anew, so this cache changes speed only.
    """
    global _EMPTY
    template = _TEMPLATES.get(seed)
    if template is None:
        if _EMPTY is None:
            _EMPTY = store.connect(":memory:")
            store.create_schema(_EMPTY)
        conn = store.connect(":memory:")
        _EMPTY.backup(conn)  # copying the empty schema is ~20x faster than creating it
        seed_world(conn, seed)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        template = _TEMPLATES[seed] = _Template(conn, meta, store.snapshot(conn))
        if len(_TEMPLATES) > _TEMPLATE_CACHE_SIZE:
            _TEMPLATES.popitem(last=False)[1].conn.close()
    else:
        _TEMPLATES.move_to_end(seed)
    return template


def parse_arguments(arguments: Any) -> tuple[dict, str | None]:
    """Arguments as a dict, from a dict, JSON text or None; otherwise a readable problem."""
    if arguments is None:
        return {}, None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return {}, f"arguments are not valid JSON: {exc.msg}"
    if not isinstance(arguments, dict):
        return {}, f"arguments must be a JSON object, got {type(arguments).__name__}"
    return arguments, None


class UserSide:
    """What only the person holding the device can do: answer confirmation requests."""

    def __init__(self, world: World):
        self._world = world

    def pending(self) -> list[dict[str, Any]]:
        return self._world.pending_confirmations()

    def confirm(self, request_id: str) -> bool:
        return self._decide(request_id, "approved")

    def decline(self, request_id: str) -> bool:
        return self._decide(request_id, "declined")

    def approve(self, name: str, arguments: dict[str, Any]) -> str:
        """Approve an exact call in advance (the assistant asked before calling); returns its request id."""
        world = self._world
        world.conn.execute("BEGIN IMMEDIATE")
        try:
            request_id = world._next_request_id()
            world.conn.execute("INSERT INTO confirmations(id, name, arguments, status) VALUES (?, ?, ?, 'approved')",
                               (request_id, name, canonical(arguments)))
            world._audit("user", name, arguments, "approved", None, request_id, None)
            world.conn.execute("COMMIT")
        except BaseException:
            world.conn.execute("ROLLBACK")
            raise
        return request_id

    def _decide(self, request_id: str, status: str) -> bool:
        world = self._world
        world.conn.execute("BEGIN IMMEDIATE")
        try:
            row = world.conn.execute("SELECT name, arguments FROM confirmations WHERE id = ? AND status = 'pending'",
                                     (request_id,)).fetchone()
            if row is None:
                world.conn.execute("ROLLBACK")
                return False
            world.conn.execute("UPDATE confirmations SET status = ? WHERE id = ?", (status, request_id))
            world._audit("user", row[0], json.loads(row[1]), status, None, request_id, None)
            world.conn.execute("COMMIT")
            return True
        except sqlite3.Error:
            world.conn.execute("ROLLBACK")
            raise
