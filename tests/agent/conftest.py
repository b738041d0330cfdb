"""Helpers for the agent tests: model turns written as the text a model would generate."""

from __future__ import annotations

import pytest

from botpsy.chat.template import render_completion
from botpsy.world import replay_gold


def turn(content: str = "", *calls: dict, reasoning: str = "Let me think.") -> str:
    """One assistant turn as generated after ``<think>\\n`` (ends with ``<|im_end|>``)."""
    tool_calls = [{"type": "function", "function": c} for c in calls] or None
    return render_completion(reasoning, content, tool_calls)


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def gold_scripts(task) -> list[str]:
    """The task's gold assistant turns (confirmation dialogue included) as generated text."""
    gold = replay_gold(task)
    return [render_completion("Thinking.", m.get("content") or "", m.get("tool_calls"))
            for m in gold.messages if m["role"] == "assistant"]


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory, tiny_checkpoint):
    """The untrained two-layer reference model exported to Q8_0 by ``botpsy export`` (plumbing, not skill)."""
    from botpsy.export.command import ExportConfig, export_checkpoint

    out = tmp_path_factory.mktemp("agent_gguf")
    export_checkpoint(ExportConfig(checkpoint=str(tiny_checkpoint), out=str(out), formats="q8_0", threads=1))
    return out / "model-q8_0.gguf"
