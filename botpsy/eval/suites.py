"""The suites ``botpsy eval`` runs: each picks its items, runs one item on a backend, summarizes.

Every suite turns one item into one JSON record (a line of ``OUT/<model>/<suite>.jsonl``) with
``id``, ``correct`` and the generations behind it (``botpsy.eval.metrics`` reads those), plus
what the item needs to be checked by hand:

* ``device``: the device world's test split, tasks picked round-robin over the kinds so every
  kind is present; one ``solve_task`` episode each (the simulated user, the world's checker);
  the record is solve's (steps, conversation, success, score, wasted calls).
* ``bfcl``: BFCL v4's offline categories (``--limit`` items per category), prompted in botpsy's
  chat format and scored with the official checkers (``botpsy.eval.bfcl``); multi-turn items
  run turn by turn on BFCL's backends.
* ``ifeval`` / ``ifbench``: the prompt alone, no tools; the answer (reasoning excluded) scored
  strict and loose by botpsy's checkers; instructions that need data not available offline are
  skipped and counted.

Every generation runs greedily with the loop guard in observe mode (loops are measured, not
prevented) and the same token cap, so models are compared on equal terms.

Example::

    suite = SUITES["ifeval"](SuiteOptions(limit=5))
    record = suite.run(backend, suite.items()[0], RunSettings(max_tokens=512))
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from botpsy.eval import metrics
from botpsy.runtime.backend import Backend, SamplingConfig
from botpsy.runtime.generate import GenerateConfig, generate


@dataclass
class RunSettings:
    """How every generation of an evaluation runs (the same for each model compared)."""

    max_tokens: int = 32768
    thinking_budget: int = 0
    enable_thinking: bool = True
    max_turns: int = 12
    token_budget: int = 0  # device: most generated tokens per task (0 = 4 x max_tokens)
    constrain_calls: bool = True  # local backends keep calls to the offered tools (HTTP ones cannot)
    chat_format: str = "botpsy"  # "native": a base model in its own template (botpsy.chat.native)
    # A turn offered no tools cannot open a call, as in chat and serve. Off by default: the
    # evaluation reads the model's own choice (and records made before it existed stay valid).
    calls_need_tools: bool = False
    call_threshold: float = 0.0  # the call gate (GenerateConfig.call_threshold); 0 = off
    # A turn offered no tools runs on the base model alone (its LoRA adapter switched off), in the base's
    # own template, thinking off; a turn with tools keeps the adapter (``turn_settings``).
    plain_on_base: bool = False

    def generation(self) -> GenerateConfig:
        return GenerateConfig(max_tokens=self.max_tokens, sampling=SamplingConfig(temperature=0.0),
                              on_loop="observe", thinking_budget=self.thinking_budget,
                              constrain_calls=self.constrain_calls and self.chat_format == "botpsy",
                              calls_need_tools=self.calls_need_tools, call_threshold=self.call_threshold,
                              chat_format=self.chat_format)

    def chat_format_of(self, backend: Backend):
        from botpsy.chat.native import ChatFormat

        return ChatFormat.native(backend.chat_template()) if self.chat_format == "native" else ChatFormat.botpsy()


@dataclass
class SuiteOptions:
    """Which items a suite draws. ``limit`` 0 means all of them (BFCL: per category)."""

    limit: int = 0
    seed: int = 0
    tasks_file: str = ""  # device: a task file written by `botpsy tasks`; empty draws from the test split
    bfcl_categories: list[str] = field(default_factory=lambda: ["all"])
    data_dir: str = ""  # ifeval/ifbench data (default: the packaged botpsy/evaldata)
    user_model: str = ""  # tau2: the simulated user's model source ("" = the model under test)
    tau2_domains: list[str] = field(default_factory=lambda: ["telecom"])
    injection_suites: list[str] = field(default_factory=lambda: ["workspace"])
    judge_model: str = ""  # safety: a judge model source ("" = the rule-based judge)
    threads: int = 0  # CPU threads for a model a suite opens itself (the user simulator, a judge)


@dataclass
class Item:
    """One thing to evaluate: ``id`` keys the JSONL (resume), ``payload`` is the suite's own object."""

    id: str
    payload: Any


def turn_settings(backend: Backend, settings: RunSettings, offers_tools: bool) -> RunSettings:
    """The settings of one turn. With ``plain_on_base`` the backend's adapter is switched for it: on
    where tools are offered, off (the base alone, in its own format as a baseline runs) where none are."""
    if not settings.plain_on_base:
        return settings
    backend.use_adapter(offers_tools)
    if offers_tools:
        return settings
    from botpsy.chat.native import ChatFormat

    return replace(settings, chat_format=ChatFormat.own(backend.base_chat_template()).name, enable_thinking=False,
                   call_threshold=0.0)


def run_turn(backend: Backend, messages: list[dict], tools: list[dict] | None, settings: RunSettings):
    """One assistant turn for ``messages`` (rendered in botpsy's chat format, or the model's own)."""
    settings = turn_settings(backend, settings, bool(tools))
    prompt, prefix = settings.chat_format_of(backend).prompt(messages, tools, settings.enable_thinking)
    return generate(backend, prompt, settings.generation(), tools=tools, cache_prefix=prefix)


# ---- device ---------------------------------------------------------------------------------


class DeviceSuite:
    name = "device"
    DEFAULT_TASKS = 300

    def __init__(self, options: SuiteOptions) -> None:
        self.options = options

    def items(self) -> list[Item]:
        from botpsy.world import Task, generate_tasks

        wanted = self.options.limit or self.DEFAULT_TASKS
        if self.options.tasks_file:
            path = Path(self.options.tasks_file)
            if not path.is_file():
                raise FileNotFoundError(f"task file {path} does not exist (write one with `botpsy tasks`)")
            pool = [Task.from_json(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            pool = generate_tasks("test", max(wanted * 3, 60), seed=self.options.seed)
        return [Item(task.id, task) for task in by_kind_round_robin(pool, wanted)]

    def run(self, backend: Backend, item: Item, settings: RunSettings) -> dict[str, Any]:
        from botpsy.agent.loop import AgentConfig
        from botpsy.agent.solve import solve_task

        budget = settings.token_budget or 4 * settings.max_tokens
        settings = turn_settings(backend, settings, offers_tools=True)  # every task offers the device's tools
        agent = AgentConfig(max_steps=settings.max_turns, token_budget=budget,
                            enable_thinking=settings.enable_thinking, generation=settings.generation(),
                            native_template=backend.chat_template() if settings.chat_format == "native" else "")
        record = solve_task(backend, item.payload, agent, settings.max_turns)
        return {"id": item.id, "correct": bool(record["success"]), **record}

    def failure(self, item: Item, message: str) -> dict[str, Any]:
        """The record of a task the backend could not run: failed, no steps."""
        task = item.payload
        return {"id": item.id, "correct": False, "backend_error": message, "task_id": task.id, "kind": task.kind,
                "domain": task.domain, "success": False, "score": 0.0, "wasted_calls": 0,
                "stats": {"model_steps": 0, "tool_calls": 0}, "steps": []}

    def summarize(self, records: list[dict]) -> dict[str, Any]:
        solved = sum(r["success"] for r in records)
        return {"tasks": len(records), "solved": solved, "success_rate": metrics.share(solved, len(records)),
                "first_call": metrics.first_call_accuracy(records),
                "mean_score": mean([r["score"] for r in records]),
                "wasted_calls": mean([r.get("wasted_calls", 0) for r in records]),
                "turns": mean([r["stats"]["model_steps"] for r in records]),
                **metrics.device_costs(records),
                "by_kind": group_figures(records, "kind"), "by_domain": group_figures(records, "domain")}


def by_kind_round_robin(tasks: list, n: int, key=lambda task: task.kind) -> list:
    """Up to ``n`` tasks taken one kind (``key``) at a time in turn (each kind's tasks in file order),
    so a small sample still has every kind.

    >>> from types import SimpleNamespace as T
    >>> tasks = [T(kind="a", id=1), T(kind="a", id=2), T(kind="a", id=3), T(kind="b", id=4)]
    >>> [t.id for t in by_kind_round_robin(tasks, 3)]
    [1, 4, 2]
    """
    queues: dict[str, list] = defaultdict(list)
    for task in tasks:
        queues[key(task)].append(task)
    picked: list = []
    while len(picked) < n and any(queues.values()):
        for kind in list(queues):
            if queues[kind] and len(picked) < n:
                picked.append(queues[kind].pop(0))
    return picked


def group_figures(records: list[dict], key: str) -> dict[str, dict[str, Any]]:
    """Success, partial credit, wasted calls and assistant turns per value of ``key`` (kind, domain)."""
    out = {}
    for value in sorted({r[key] for r in records}):
        rows = [r for r in records if r[key] == value]
        out[value] = {"tasks": len(rows), "success_rate": metrics.share(sum(r["success"] for r in rows), len(rows)),
                      "mean_score": mean([r["score"] for r in rows]),
                      "wasted_calls": mean([r.get("wasted_calls", 0) for r in rows]),
                      "turns": mean([r["stats"]["model_steps"] for r in rows])}
    return out


def mean(values: list) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


# ---- BFCL -----------------------------------------------------------------------------------


class BFCLSuite:
    name = "bfcl"

    def __init__(self, options: SuiteOptions) -> None:
        self.options = options

    def items(self) -> list[Item]:
        from botpsy.eval.bfcl import bfcl_items

        return [Item(i.id, i) for i in bfcl_items(self.options.bfcl_categories, self.options.limit or None)]

    def run(self, backend: Backend, item: Item, settings: RunSettings) -> dict[str, Any]:
        from botpsy.eval.bfcl import run_item

        generations: list[dict] = []

        def answer(messages: list[dict], tools: list[dict]) -> str:
            result = run_turn(backend, messages, tools, settings)
            generations.append(metrics.generation_record(result))
            return result.text

        verdict = run_item(item.payload, answer, thinking=settings.enable_thinking,
                           native=settings.chat_format == "native")
        return {"id": item.id, "category": item.payload.category, "correct": bool(verdict.valid),
                "messages": item.payload.turns, "raw": verdict.raw, "calls": verdict.calls,
                "error_type": verdict.error_type, "error": verdict.error, "generations": generations}

    def failure(self, item: Item, message: str) -> dict[str, Any]:
        return {"id": item.id, "category": item.payload.category, "correct": False, "backend_error": message,
                "generations": []}

    def summarize(self, records: list[dict]) -> dict[str, Any]:
        from botpsy.eval.bfcl import Verdict, summarize

        summary = summarize([Verdict(r["id"], r["category"], r["correct"]) for r in records])
        correct = sum(r["correct"] for r in records)
        return {"items": len(records), "accuracy": metrics.share(correct, len(records)), **summary}


# ---- IFEval / IFBench -----------------------------------------------------------------------


class InstructionSuite:
    """IFEval or IFBench: ``name`` picks the benchmark file under the data folder."""

    FILES = {"ifeval": "ifeval/input_data.jsonl", "ifbench": "ifbench/IFBench_test.jsonl"}

    def __init__(self, name: str, options: SuiteOptions) -> None:
        self.name = name
        self.options = options

    def items(self) -> list[Item]:
        from botpsy.eval.bfcl.items import spread
        from botpsy.eval.instructions.agreement import default_data_dir

        path = Path(self.options.data_dir or default_data_dir()) / self.FILES[self.name]
        if not path.is_file():
            raise FileNotFoundError(f"{self.name} data {path} does not exist (set --data-dir or $BOTPSY_DATA_DIR)")
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [Item(str(records[i]["key"]), records[i]) for i in spread(len(records), self.options.limit or None)]

    def run(self, backend: Backend, item: Item, settings: RunSettings) -> dict[str, Any]:
        from botpsy.eval.instructions import score_item

        messages = [{"role": "user", "content": item.payload["prompt"]}]
        result = run_turn(backend, messages, None, settings)
        scores = score_item(item.payload, result.content)
        return {"id": item.id, "correct": scores["follow_all_strict"] and not scores["skipped"],
                "messages": messages, "raw": result.text, "response": result.content, "scores": scores,
                "generations": [metrics.generation_record(result)]}

    def failure(self, item: Item, message: str) -> dict[str, Any]:
        from botpsy.eval.instructions import score_item

        return {"id": item.id, "correct": False, "backend_error": message, "scores": score_item(item.payload, ""),
                "generations": []}

    def summarize(self, records: list[dict]) -> dict[str, Any]:
        from botpsy.eval.instructions import aggregate

        return aggregate([r["scores"] for r in records])


def lazy_suite(module: str, name: str):
    """A suite defined in its own module, imported when it is first used (so `botpsy eval --suite
    device` never imports what another benchmark needs)."""
    def make(options: SuiteOptions):
        import importlib

        return getattr(importlib.import_module(module), name)(options)
    return make


# The report's other benchmarks (issue 28) live in their own modules. Their summaries carry a
# "table": [[row label, value, "pct" | "num"], ...] that `botpsy.eval.report` shows as it is.
SUITES = {"device": DeviceSuite, "bfcl": BFCLSuite,
          "ifeval": lambda options: InstructionSuite("ifeval", options),
          "ifbench": lambda options: InstructionSuite("ifbench", options),
          "acebench": lazy_suite("botpsy.eval.acebench", "ACEBenchSuite"),
          "tau2": lazy_suite("botpsy.eval.tau2", "Tau2Suite"),
          "injection": lazy_suite("botpsy.eval.injection", "InjectionSuite"),
          "safety": lazy_suite("botpsy.eval.safety", "SafetySuite")}

# The one figure each suite is compared on (higher is better): the quantization gate, the table's first rows.
HEADLINES = {"device": "success_rate", "bfcl": "accuracy", "ifeval": "prompt_strict", "ifbench": "prompt_strict",
             "acebench": "overall", "tau2": "pass_1", "injection": "utility_under_attack", "safety": "safe_rate"}


def headline(suite: str, summary: dict[str, Any]) -> float | None:
    """The one accuracy a suite is compared on (the quantization gate, the table's first rows)."""
    return summary.get(HEADLINES[suite])
