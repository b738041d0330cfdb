"""``ACEBenchSuite``: items, one item's run and record, and the summary (see the package docstring)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from botpsy.eval import metrics
from botpsy.eval.acebench.calls import calls_in_text
from botpsy.eval.acebench.checker import check_normal, check_special
from botpsy.eval.acebench.data import (AGENT, CATEGORIES, NORMAL, SPECIAL, AceItem, load_items,
                                       share_out, single_turn_messages, tools_of)
from botpsy.eval.suites import Item, RunSettings, SuiteOptions, mean, run_turn
from botpsy.runtime.backend import Backend

# ACEBench's overall figure: its weights for the special, normal and agent means.
WEIGHTS = {"normal": 0.578, "special": 0.2676, "agent": 0.1545}
GROUPS = {"normal": NORMAL, "special": SPECIAL, "agent": AGENT}


class ACEBenchSuite:
    name = "acebench"

    def __init__(self, options: SuiteOptions) -> None:
        self.options = options
        self._user: tuple[Backend, str] | None = None  # (backend, chat format) of --user-model, opened once
        self._user_lock = threading.Lock()  # items may run concurrently (HTTP models)

    # ---- items ----------------------------------------------------------------------------

    def data_dir(self) -> Path:
        from botpsy.eval.instructions.agreement import default_data_dir

        return Path(self.options.data_dir or default_data_dir()) / "acebench"

    def items(self) -> list[Item]:
        """All items, or ``limit`` of them shared out over the 17 sub-categories in turn and spread
        evenly within each (item ids are ACEBench's, so runs resume)."""
        from botpsy.eval.bfcl.items import spread

        by_category = load_items(self.data_dir())
        quota = share_out({c: len(v) for c, v in by_category.items()}, self.options.limit)
        return [Item(rows[i].id, rows[i]) for c, rows in by_category.items()
                for i in spread(len(rows), quota[c])]

    # ---- running --------------------------------------------------------------------------

    def run(self, backend: Backend, item: Item, settings: RunSettings) -> dict[str, Any]:
        ace: AceItem = item.payload
        head = {"id": item.id, "category": ace.category, "group": ace.group}
        if ace.group == "agent":
            from botpsy.eval.acebench.agent import run_agent_item

            user_backend, user_settings, label = self.user_model(settings)
            return {**head, **run_agent_item(backend, ace, settings, user_backend, user_settings, label)}
        turns = [self.answer(backend, ace, entry, gold, settings) for entry, gold in zip(ace.entries, ace.golds)]
        generations = [g for turn in turns for g in turn.pop("generations")]
        correct = all(t["valid"] for t in turns)
        error_type = next((t["error_type"] for t in turns if not t["valid"]), "")
        record = {**head, "correct": correct, "error_type": error_type, "turns": turns, "generations": generations}
        if len(turns) > 1:
            record["process"] = round(sum(t["valid"] for t in turns) / len(turns), 4)
        return record

    def answer(self, backend: Backend, ace: AceItem, entry: dict, gold: Any, settings: RunSettings) -> dict[str, Any]:
        """One data line: prompt, one generation, the calls read from it and ACEBench's verdict."""
        messages = single_turn_messages(entry, ace.category)
        tools = tools_of(entry)
        result = run_turn(backend, messages, tools, settings)
        calls = [(c.name, dict(c.arguments)) for c in result.parsed.tool_calls]
        if not calls:
            calls = calls_in_text(result.content, {t["function"]["name"] for t in tools})
        if ace.group == "special":
            check = check_special(ace.category, gold, result.content, calls)
        else:
            check = check_normal(entry.get("function") or [], calls, gold)
        return {"entry_id": entry["id"], "valid": check.valid, "error_type": check.error_type, "error": check.error,
                "messages": messages, "raw": result.text, "content": result.content,
                "calls": [{"name": n, "arguments": a} for n, a in calls], "gold": gold,
                "generations": [metrics.generation_record(result)]}

    def user_model(self, settings: RunSettings) -> tuple[Backend | None, RunSettings | None, str]:
        """The simulated user of agent multi_turn: ``--user-model`` (opened on first use) or, when
        unset, none (the model under test plays the user)."""
        if not self.options.user_model:
            return None, None, ""
        with self._user_lock:
            if self._user is None:
                from botpsy.agent.backends import open_backend
                from botpsy.eval.harness import chat_format_for
                from botpsy.runtime.backend import BackendOptions

                backend = open_backend(self.options.user_model, BackendOptions(threads=self.options.threads,
                                                                               n_ctx=settings.max_tokens + 16384))
                self._user = (backend, chat_format_for(backend, "auto"))
        backend, chat_format = self._user
        return backend, replace(settings, chat_format=chat_format, enable_thinking=False), self.options.user_model

    def failure(self, item: Item, message: str) -> dict[str, Any]:
        ace: AceItem = item.payload
        record = {"id": item.id, "category": ace.category, "group": ace.group, "correct": False,
                  "backend_error": message, "generations": []}
        if ace.group == "agent" or len(ace.entries) > 1:
            record["process"] = 0.0
        return record

    # ---- summary --------------------------------------------------------------------------

    def summarize(self, records: list[dict]) -> dict[str, Any]:
        """Accuracy per sub-category, per group (the unweighted mean of its sub-categories, as
        ACEBench averages them) and ``overall`` = 0.578 normal + 0.2676 special + 0.1545 agent,
        the weights renormalized over the groups present when a run leaves one out."""
        by_category: dict[str, dict[str, Any]] = {}
        for category in CATEGORIES:
            rows = [r for r in records if r.get("category") == category]
            if not rows:
                continue
            figures = {"items": len(rows), "accuracy": metrics.share(sum(bool(r["correct"]) for r in rows), len(rows))}
            if "process" in rows[0] or category in AGENT:
                figures["process"] = mean([r.get("process", 0.0) for r in rows])
            by_category[category] = figures
        groups = {g: mean([by_category[c]["accuracy"] for c in cats if c in by_category]) for g, cats in GROUPS.items()}
        present = {g: v for g, v in groups.items() if v is not None}
        weight = sum(WEIGHTS[g] for g in present)
        overall = round(sum(WEIGHTS[g] * v for g, v in present.items()) / weight, 4) if present else None
        table = [["overall", overall, "pct"]] + [[g, present[g], "pct"] for g in GROUPS if g in present]
        for category, figures in by_category.items():
            table.append([category, figures["accuracy"], "pct"])
            if category in AGENT:
                table.append([f"{category} process", figures["process"], "pct"])
        return {"items": len(records), "overall": overall, **{g: groups[g] for g in GROUPS},
                "by_category": by_category, "backend_errors": sum("backend_error" in r for r in records),
                "table": table}
