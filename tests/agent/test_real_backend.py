"""The agent, ``botpsy chat`` and ``botpsy solve`` on llama.cpp with a tiny untrained GGUF.

The model has no skill, so these check the plumbing (prompts reach llama.cpp, the prefix
cache is used, records carry real token counts and timings, bad model files are refused),
not success.
"""

from __future__ import annotations

import json
from collections import namedtuple

import pytest

from botpsy.agent import AgentConfig, ModelStep, run_agent
from botpsy.agent.chat import ChatConfig
from botpsy.agent.chat import main as chat_main
from botpsy.agent.solve import SolveConfig
from botpsy.agent.solve import main as solve_main
from botpsy.agent.steps import STOP_REASONS
from botpsy.runtime.backend import BackendOptions
from botpsy.runtime.generate import GenerateConfig
from botpsy.world import build_world, generate_tasks

pytestmark = pytest.mark.slow

SMALL = ["set_alarm", "list_alarms", "send_message", "search_contacts"]


@pytest.fixture(scope="module")
def llama(tiny_gguf):
    from botpsy.runtime.llama_backend import LlamaBackend

    backend = LlamaBackend(tiny_gguf, BackendOptions(threads=1, n_ctx=4096))
    yield backend
    backend.close()


def test_loop_runs_on_llama_cpp_and_reuses_the_tools_prefix(llama):
    task = generate_tasks("test", 1, seed=0)[0]
    world = build_world(task)
    messages = list(task.messages)
    config = AgentConfig(max_steps=3, generation=GenerateConfig(max_tokens=16))
    steps = list(run_agent(llama, world, messages, task.tools, config))
    model = [s for s in steps if isinstance(s, ModelStep)]
    final = steps[-1]
    assert final.stop_reason in STOP_REASONS and final.model_steps == len(model) >= 1
    assert all(s.prompt_tokens > 0 and 0 < s.completion_tokens <= 16 and s.ttft_ms > 0 for s in model)
    assert final.completion_tokens == sum(s.completion_tokens for s in model)
    # 16 tokens of an untrained model's reasoning never reach </think>: each turn fails and is retried,
    # re-rendering the conversation, so the tools block comes back from the prefix cache
    assert len(model) > 1 and all(s.cache_hit for s in model[1:])
    assert model[1].prompt_tokens > model[0].prompt_tokens


def test_chat_one_shot_json_on_a_gguf(tiny_gguf, tmp_path, capsys):
    code = chat_main(ChatConfig(request="set an alarm for 7", model=str(tiny_gguf), db=str(tmp_path / "d.sqlite"),
                                json=True, tools=SMALL, threads=1, n_ctx=4096, max_tokens=12, max_steps=2,
                                temperature=0.0))
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["steps"][-1]["type"] == "final"
    assert record["stats"]["model_steps"] >= 1 and record["stats"]["prompt_tokens"] > 0


def test_a_model_too_large_for_memory_is_refused(tiny_gguf, tmp_path, capsys, monkeypatch):
    import psutil

    memory = namedtuple("memory", "available total")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: memory(1 << 20, 1 << 20))
    code = chat_main(ChatConfig(request="hi", model=str(tiny_gguf), db=str(tmp_path / "d.sqlite")))
    err = capsys.readouterr().err
    assert code == 2 and "refusing to load" in err and "available" in err


def test_solve_on_a_gguf_writes_records_with_real_timings(tiny_gguf, tmp_path, capsys):
    out = tmp_path / "solve"
    code = solve_main(SolveConfig(model=str(tiny_gguf), split="test", n=2, out=str(out), threads=1, n_ctx=4096,
                                  max_tokens=12, max_turns=2, json=True))
    summary = json.loads(capsys.readouterr().out)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert code == 0 and summary["tasks"] == len(records) == 2
    assert all(r["steps"] and r["steps"][0]["prompt_tokens"] > 0 and r["steps"][0]["ttft_ms"] > 0 for r in records)
    assert 0.0 <= summary["success_rate"] <= 1.0 and summary["model_turns"] >= 2


def test_solve_runs_a_checkpoint_folder_through_transformers(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "solve_hf"
    code = solve_main(SolveConfig(model=str(tiny_checkpoint), split="test", n=1, out=str(out), max_tokens=6,
                                  max_turns=1, json=True))
    summary = json.loads(capsys.readouterr().out)
    record = json.loads((out / "records.jsonl").read_text())
    assert code == 0 and summary["tasks"] == 1 and record["steps"][0]["completion_tokens"] >= 1
