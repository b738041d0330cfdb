"""Shared data for the chat-format tests: a small tool set and the malformed-output corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS_PATH = Path(__file__).with_name("malformed_outputs.jsonl")


def tool(name: str, properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": f"{name} (test tool)",
        "parameters": {"type": "object", "properties": properties, "required": required or []}}}


# Tools the corpus lines and the hand-written tests refer to when they say "tools": "standard".
STANDARD_TOOLS = [
    tool("set_alarm", {"hour": {"type": "integer"}, "minute": {"type": "integer"}, "label": {"type": "string"},
                       "repeat": {"type": "array", "items": {"type": "string"}}, "enabled": {"type": "boolean"}},
         ["hour"]),
    tool("set_thermostat", {"celsius": {"type": "number"},
                            "mode": {"type": "string", "enum": ["heat", "cool", "off"]}}),
    tool("send_message", {"to": {"type": "string"}, "body": {"type": "string"},
                          "meta": {"type": "object"}, "reply_to": {"type": ["integer", "null"]}}),
    tool("find_contact", {"query": {"type": "string"},
                          "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}),
]


def load_corpus() -> list[dict]:
    cases = [json.loads(line) for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    for case in cases:
        case["tools"] = STANDARD_TOOLS if case.get("tools") == "standard" else None
    return cases


@pytest.fixture(scope="session")
def malformed_corpus() -> list[dict]:
    return load_corpus()


@pytest.fixture(scope="session")
def standard_tools() -> list[dict]:
    return STANDARD_TOOLS


def pytest_generate_tests(metafunc):
    """Any test taking ``malformed_case`` runs once per corpus line, named after it."""
    if "malformed_case" in metafunc.fixturenames:
        cases = load_corpus()
        metafunc.parametrize("malformed_case", cases, ids=[case["name"] for case in cases])
