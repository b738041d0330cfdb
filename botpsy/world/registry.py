"""Tool declarations: each tool is written once, as a function plus its JSON schema.

``@tool(...)`` registers a function in ``REGISTRY``; from the same declaration come the
OpenAI-style spec shown to the model (``Tool.spec()``) and the ``jsonschema`` validator that
checks arguments before the function runs. A tool function receives a ``ToolContext``
(database access, the world clock, id counters) and keyword arguments, returns a small
JSON-serialisable dict, and raises ``ToolError`` for anything the model can fix.

Example::

    @tool("set_wifi", "Turn Wi-Fi on or off.", domain="device",
          params={"enabled": boolean("true to turn Wi-Fi on, false to turn it off")})
    def set_wifi(ctx, enabled):
        ctx.set_setting("wifi", enabled)
        return {"wifi": enabled}
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from jsonschema import Draft202012Validator

DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
TIME_PATTERN = r"^([01]\d|2[0-3]):[0-5]\d$"


class ToolError(Exception):
    """A failure the model caused and can fix (unknown id, empty cart, slot taken, ...)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Tool:
    name: str
    description: str
    domain: str
    parameters: dict[str, Any]
    fn: Callable[..., dict]
    writes: bool = True
    sensitive: bool = False
    validator: Draft202012Validator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.validator = Draft202012Validator(self.parameters)

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style declaration put in the prompt."""
        description = self.description
        if self.sensitive:
            description += " Sensitive: runs only after the user confirms."
        return {"type": "function",
                "function": {"name": self.name, "description": description, "parameters": self.parameters}}

    def argument_errors(self, arguments: dict[str, Any]) -> list[str]:
        """Readable schema violations, empty when the arguments are valid."""
        errors = sorted(self.validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        out = []
        for error in errors[:3]:
            where = ".".join(str(p) for p in error.absolute_path)
            out.append(f"{where}: {error.message}" if where else error.message)
        return out


REGISTRY: dict[str, Tool] = {}


def tool(name: str, description: str, *, domain: str, params: dict[str, dict] | None = None,
         required: list[str] | None = None, writes: bool = True, sensitive: bool = False):
    """Register the decorated function as tool ``name``; every param is required unless listed otherwise."""
    params = params or {}
    schema = {"type": "object", "properties": params,
              "required": list(params) if required is None else required, "additionalProperties": False}

    def register(fn: Callable[..., dict]) -> Callable[..., dict]:
        if name in REGISTRY:
            raise ValueError(f"tool {name!r} declared twice")
        REGISTRY[name] = Tool(name, description, domain, schema, fn, writes=writes, sensitive=sensitive)
        return fn

    return register


def string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _bounded(kind: str, description: str, minimum: float | None, maximum: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "description": description}
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return out


def integer(description: str, minimum: int | None = None, maximum: int | None = None) -> dict[str, Any]:
    return _bounded("integer", description, minimum, maximum)


def number(description: str, minimum: float | None = None, maximum: float | None = None) -> dict[str, Any]:
    return _bounded("number", description, minimum, maximum)


def boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def enum(description: str, values: list[str]) -> dict[str, Any]:
    return {"type": "string", "enum": values, "description": description}


def date_param(description: str) -> dict[str, Any]:
    return string(description + " (YYYY-MM-DD)", pattern=DATE_PATTERN)


def time_param(description: str) -> dict[str, Any]:
    return string(description + " (24-hour HH:MM)", pattern=TIME_PATTERN)


def ident(description: str) -> dict[str, Any]:
    return string(description, minLength=1, maxLength=40)


_WRITE = re.compile(r"^\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)


class ToolContext:
    """What a tool function may touch: the open transaction and the world clock.

    Tools write only through ``run``, ``insert`` and ``set_setting``; each marks the table it
    writes in ``dirty``, so the world re-reads just those tables for its next snapshot.
    """

    def __init__(self, conn: sqlite3.Connection, now: datetime, dirty: set[str] | None = None):
        self.conn = conn
        self.now = now
        self.dirty = dirty if dirty is not None else set()

    def one(self, sql: str, *params: Any) -> dict[str, Any] | None:
        row = self.conn.execute(sql, params).fetchone()
        return dict(row) if row is not None else None

    def all(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute(sql, params).fetchall()]

    def run(self, sql: str, *params: Any) -> int:
        written = _WRITE.match(sql)
        if written:
            self.dirty.add(written.group(1))
        return self.conn.execute(sql, params).rowcount

    def insert(self, table: str, row: dict[str, Any]) -> None:
        self.dirty.add(table)
        cols = ", ".join(row)
        self.conn.execute(f"INSERT INTO {table}({cols}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))

    def next_id(self, prefix: str) -> str:
        self.conn.execute("UPDATE counters SET value = value + 1 WHERE name = ?", (prefix,))
        value = self.conn.execute("SELECT value FROM counters WHERE name = ?", (prefix,)).fetchone()[0]
        return f"{prefix}{value}"

    def setting(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row is not None else None

    def set_setting(self, key: str, value: Any) -> None:
        self.dirty.add("settings")
        self.conn.execute("INSERT OR REPLACE INTO settings(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def require(self, sql: str, *params: Any, what: str) -> dict[str, Any]:
        """The row ``sql`` selects, or a ``not_found`` ToolError naming ``what``."""
        row = self.one(sql, *params)
        if row is None:
            raise ToolError("not_found", f"no {what} with that id; look it up first")
        return row


def parse_date(value: str) -> str:
    """Check a YYYY-MM-DD string is a real calendar date (the schema checks only its shape)."""
    try:
        return datetime.strptime(value, "%Y-%m-%d").date().isoformat()
    except ValueError:
        raise ToolError("invalid_date", f"{value} is not a real calendar date") from None


def money(cents: int) -> float:
    return round(cents / 100, 2)
