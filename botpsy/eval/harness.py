"""``botpsy eval``: run evaluation suites on one or more models side by side, resumably.

For each model and suite the items run one by one (or ``--concurrency`` at a time against an
HTTP server) and each finished item is appended to ``OUT/<label>/<suite>.jsonl`` at once: the
prompt or messages, the raw output, parsed calls, the verdict, tokens, timings and loop-guard
events. A rerun reads those files and runs only the items not there yet (an item that failed
with a backend error is run again). Records are stamped with the weights' sha256 and the
generation settings: a model rebuilt byte for byte resumes them, while other weights or another
setting (token cap, thinking, turn limits, constrained calls) move them aside to
``OUT/<label>.stale``. Then ``OUT/summary.json`` (every suite's summary and the
metrics of ``botpsy.eval.metrics`` per model) and ``OUT/table.md`` (models as columns).

``--compare-quants DIR`` evaluates the bf16, Q8_0 and Q4_K_M GGUFs found in DIR and reports each
quantization's change against bf16 in accuracy, loop rate and schema-valid call rate; a drop
beyond ``--max-drop`` is flagged and the command exits with status 1.

Examples::

    botpsy eval --suite device,bfcl,ifeval,ifbench --model runs/speedrun/gguf/model-q4_k_m.gguf \\
        --model runs/speedrun/sft --out runs/speedrun/eval --limit 20 --max-tokens 512
    botpsy eval --suite bfcl --model http://localhost:8000/v1 --label qwen --concurrency 16 --out runs/vllm
    botpsy eval --compare-quants runs/speedrun/gguf --suite device --limit 30 --max-drop 0.05

``--from-records`` rebuilds the summary and table from the records alone (seconds, no model
loaded), for labels made by separate runs, even with other settings; without it, a rerun whose
settings differ from a label's stamp sets that label's records aside and starts over.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botpsy.config import ConfigError, save_config
from botpsy.eval import metrics
from botpsy.eval.suites import SUITES, Item, RunSettings, SuiteOptions, headline
from botpsy.output import emit
from botpsy.runtime.backend import Backend, BackendError, BackendOptions, ModelLoadError, no_adapter_to_switch
from botpsy.runtime.generate import CALL_THRESHOLD_HELP

QUANT_FILES = {"bf16": "bf16", "q8_0": "q8_0", "q4_k_m": "q4_k_m"}  # label -> file-name marker


@dataclass
class EvalConfig:
    """Evaluate models side by side (resumable): the device suite, BFCL v4, IFEval, IFBench, ACEBench,
    tau2-bench, AgentDojo prompt injection and red-team safety."""

    model: list[str] = field(default_factory=list, metadata={
        "help": "A .gguf file, a checkpoint folder, an http(s)://.../v1 server or scripted:FILE.json."})
    label: list[str] = field(default_factory=list, metadata={
        "help": "Short name of each --model in the table, in order (default: from the path)."})
    suite: str = field(default="device,bfcl,ifeval,ifbench", metadata={
        "help": "Comma-separated suites: " + ", ".join(SUITES) + "."})
    out: str = field(default="runs/eval", metadata={"help": "Folder for the JSONL records, summary.json and table.md."})
    limit: int = field(default=0, metadata={"help": "Items per suite (BFCL: per category); 0 = all."})
    device_limit: int = field(default=0, metadata={"help": "Device tasks (0 = --limit, else 300)."})
    bfcl_limit: int = field(default=0, metadata={"help": "BFCL items per category (0 = --limit)."})
    if_limit: int = field(default=0, metadata={"help": "IFEval and IFBench items each (0 = --limit)."})
    bfcl_category: list[str] = field(default_factory=list, metadata={
        "help": "BFCL categories or groups (all, non_live, live, multi_turn); default all offline ones."})
    tasks: str = field(default="", metadata={"help": "Device task file (`botpsy tasks`); empty: draw from the test split."})
    data_dir: str = field(default="", metadata={"help": "Folder holding ifeval/, ifbench/, acebench/ and safety/ (default: the packaged botpsy/evaldata)."})
    seed: int = field(default=0, metadata={"help": "Seed for drawing device tasks."})
    user_model: str = field(default="", metadata={
        "help": "tau2 and acebench (agent items): the simulated user (any --model source: a .gguf, a base name, an http(s)://.../v1 server); "
                "empty: the model under test plays the user too."})
    tau2_domain: list[str] = field(default_factory=lambda: ["telecom"], metadata={
        "help": "tau2: domains to run (telecom, airline, retail)."})
    injection_suite: list[str] = field(default_factory=lambda: ["workspace"], metadata={
        "help": "injection: AgentDojo task suites (workspace, travel, banking, slack)."})
    judge_model: str = field(default="", metadata={
        "help": "safety: a judge model source; empty: botpsy's rule-based judge (botpsy.eval.safety)."})
    max_tokens: int = field(default=32768, metadata={"help": "Token cap per generation (a hit counts in the cap-hit rate)."})
    thinking_budget: int = field(default=0, metadata={"help": "Close the reasoning after this many tokens (0 = off)."})
    enable_thinking: bool = field(default=True, metadata={"help": "Let the models reason before answering."})
    max_turns: int = field(default=12, metadata={"help": "Most assistant turns per device task."})
    token_budget: int = field(default=0, metadata={"help": "Most generated tokens per device task (0 = 4 x max tokens)."})
    constrain_calls: bool = field(default=True, metadata={
        "help": "Keep tool calls to the offered tools, their parameters and enum values on local backends "
                "(botpsy.chat.constrain; HTTP endpoints are never constrained, so compare those with --no-constrain-calls)."})
    calls_need_tools: bool = field(default=False, metadata={
        "help": "A turn offered no tools (IFEval, IFBench) cannot open a tool call, as in `botpsy chat` and "
                "`serve`; off by default, so the evaluation reads the model's own choice."})
    call_threshold: float = field(default=0.0, metadata={"help": CALL_THRESHOLD_HELP + " botpsy's format only."})
    plain_on_base: bool = field(default=False, metadata={
        "help": "Answer turns offered no tools (IFEval, IFBench, plain questions) with the base model alone: the "
                "adapter of a LoRA GGUF (`botpsy export --formats lora`) switched off, the base's own chat template, "
                "thinking off (a simulated user the model plays itself, offered no tools, too). Turns with tools keep "
                "the adapter. Needs an adapter GGUF run by llama.cpp."})
    chat_format: str = field(default="auto", metadata={
        "help": "Prompt and parse format: 'botpsy' (the Qwen3.5 wire format botpsy trains), 'native' (each model's own "
                "chat template from its GGUF, calls read leniently: fair baselines for pretrained models), or 'auto' "
                "(native for a model whose template is not botpsy's). The choice per model goes into summary.json.",
        "choices": ["auto", "botpsy", "native"]})
    threads: int = field(default=0, metadata={"help": "CPU threads for local models (0 = all physical cores)."})
    n_ctx: int = field(default=0, metadata={"help": "Context size for local models (0 = max tokens + 16384: BFCL multi_turn_base prompts run past 8,192 tokens)."})
    concurrency: int = field(default=1, metadata={"help": "Items in flight at once (HTTP models only)."})
    compare_quants: str = field(default="", metadata={
        "help": "A GGUF folder: evaluate its bf16, Q8_0 and Q4_K_M files and report deltas against bf16."})
    max_drop: float = field(default=0.05, metadata={"help": "Largest tolerated drop against bf16 (--compare-quants)."})
    from_records: bool = field(default=False, metadata={
        "help": "Only summarize the records already in OUT: no model is loaded and nothing is generated or "
                "moved aside; every item of each suite must be recorded for every label. The chat format and "
                "constrained decoding come from each label's own stamp, so labels run with other settings "
                "(thinking on and off) can share one table."})
    json: bool = field(default=False, metadata={"help": "Print the summary as JSON."})


# ---- models and labels ----------------------------------------------------------------------


def default_label(model: str) -> str:
    """A short table name for a model path or URL.

    >>> default_label("runs/x/gguf/model-q4_k_m.gguf"), default_label("runs/x/sft/"), default_label("scripted:a/b.json")
    ('q4_k_m', 'sft', 'b')
    >>> default_label("http://localhost:8000/v1")
    'localhost-8000'
    """
    if model.startswith(("http://", "https://")):
        host = re.sub(r"^https?://", "", model).split("/")[0]
        return host.replace(":", "-")
    name = Path(model.removeprefix("scripted:").rstrip("/")).name
    stem = name[:-5] if name.endswith(".gguf") else name[:-5] if name.endswith(".json") else name
    return stem.removeprefix("model-") or stem


def resolve_models(config: EvalConfig) -> list[tuple[str, str]]:
    """(label, model) pairs to evaluate: the --model values (labelled by --label in order, else
    from the path), then the quantizations of --compare-quants (labelled bf16, q8_0, q4_k_m)."""
    if len(config.label) > len(config.model):
        raise ConfigError(f"{len(config.label)} --label values for {len(config.model)} --model values")
    pairs = [(config.label[i] if i < len(config.label) else default_label(m), m) for i, m in enumerate(config.model)]
    if config.compare_quants:
        folder = Path(config.compare_quants)
        for label, marker in QUANT_FILES.items():
            found = sorted(p for p in folder.glob("*.gguf") if marker in p.name.lower())
            if not found:
                raise FileNotFoundError(f"no {label} GGUF (a *.gguf whose name contains {marker!r}) in {folder}")
            pairs.append((label, str(found[0])))
    if not pairs:
        raise ConfigError("give at least one --model (or --compare-quants DIR)")
    seen: dict[str, int] = {}
    unique = []
    for label, model in pairs:
        seen[label] = seen.get(label, 0) + 1
        unique.append((label if seen[label] == 1 else f"{label}-{seen[label]}", model))
    return unique


def suite_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUITES]
    if unknown or not names:
        raise ConfigError(f"unknown suites {unknown}; choose from {', '.join(SUITES)}")
    return names


def suite_options(config: EvalConfig, suite: str) -> SuiteOptions:
    limit = {"device": config.device_limit, "bfcl": config.bfcl_limit,
             "ifeval": config.if_limit, "ifbench": config.if_limit}.get(suite, 0) or config.limit
    return SuiteOptions(limit=limit, seed=config.seed, tasks_file=config.tasks,
                        bfcl_categories=config.bfcl_category or ["all"], data_dir=config.data_dir,
                        user_model=config.user_model, tau2_domains=list(config.tau2_domain),
                        injection_suites=list(config.injection_suite), judge_model=config.judge_model,
                        threads=config.threads)


def settings_of(config: EvalConfig, chat_format: str = "botpsy") -> RunSettings:
    return RunSettings(max_tokens=config.max_tokens, thinking_budget=config.thinking_budget,
                       enable_thinking=config.enable_thinking, max_turns=config.max_turns,
                       token_budget=config.token_budget, constrain_calls=config.constrain_calls,
                       calls_need_tools=config.calls_need_tools, call_threshold=config.call_threshold,
                       chat_format=chat_format, plain_on_base=config.plain_on_base)


def chat_format_for(backend: Backend, wanted: str) -> str:
    """'botpsy' or 'native' for one model: ``auto`` is native when the model carries a chat template
    that is not botpsy's (a pretrained base), botpsy otherwise (botpsy's exports, endpoints, fakes)."""
    if wanted != "auto":
        return wanted
    from botpsy.chat.native import ChatFormat

    return ChatFormat.own(backend.chat_template()).name


# ---- running items, resumably ---------------------------------------------------------------


def read_records(path: Path) -> dict[str, dict]:
    """The records already in a suite's JSONL by item id (the last line of an id wins; a torn last
    line from a killed run is ignored)."""
    records: dict[str, dict] = {}
    if not path.is_file():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "id" in record:
            records[str(record["id"])] = record
    return records


def finished_records(path: Path) -> dict[str, dict]:
    """``read_records`` less the items whose backend failed: those are run again."""
    return {i: r for i, r in read_records(path).items() if "backend_error" not in r}


def named_only(model: str) -> bool:
    """Endpoints, scripted models and base names: no local weight files, so the name identifies them."""
    return model.startswith(("http://", "https://", "scripted:")) or not Path(model).exists()


def model_fingerprint(model: str) -> str:
    """What identifies a model's weights: a GGUF file's or a checkpoint's weight files' names, sizes
    and sha256.

    The bytes, not the path or the modification time: a model rebuilt byte for byte (a fresh clone
    exporting the committed adapter again) keeps its records; any change to the weights makes new
    ones. Endpoints, scripted models and base names are identified by their name.
    """
    from botpsy.model.bases import file_digest
    from botpsy.model.checkpoint import weight_files

    if named_only(model):
        return model
    return "|".join(f"{p.name}:{size}:{sha}" for p in weight_files(model) for size, sha in [file_digest(p)])


def legacy_model_fingerprint(model: str) -> str:
    """The fingerprint records were stamped with before it hashed the bytes: path, sizes and mtimes.
    Still accepted while the files are untouched, so older records resume (and are re-stamped)."""
    from botpsy.model.checkpoint import weight_files

    if named_only(model):
        return model
    return model + "|" + ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in weight_files(model))


def run_fingerprint(model: str, settings: RunSettings, constrained: bool, legacy: bool = False) -> str:
    """The model's fingerprint plus every setting that changes what it generates.

    A rerun with another token cap, thinking budget or turn limit, or with constrained calls
    switched (``constrained``: whether they are in effect on this backend), makes new records.
    """
    fields = dict(vars(settings), constrain_calls=constrained)
    if not (fields.get("calls_need_tools") and constrained):  # off, or never applied (HTTP, native, unconstrained):
        fields.pop("calls_need_tools", None)  # the stamps of older records stay as they were
    if not (fields.get("call_threshold") and constrained and settings.chat_format == "botpsy"):
        fields.pop("call_threshold", None)  # likewise: off, or never applied
    if not fields.get("plain_on_base"):
        fields.pop("plain_on_base", None)  # likewise: off
    weights = legacy_model_fingerprint(model) if legacy else model_fingerprint(model)
    return weights + "|" + json.dumps(fields, sort_keys=True)


def fingerprint_settings(fingerprint: str) -> dict:
    """The generation settings a ``run_fingerprint`` names (the JSON after the weights); {} for a stamp without them."""
    return json.loads(fingerprint[fingerprint.index("|{") + 1:]) if "|{" in fingerprint else {}


def set_aside_stale_records(folder: Path, fingerprint: str, also: tuple[str, ...] = ()) -> Path | None:
    """Resume only records made with this same model and settings: otherwise move the label's folder aside.

    ``also``: older stamps that mean the same model and settings; records under one are kept and the
    stamp is rewritten as ``fingerprint``. Returns where the old records went (``<label>.stale``),
    or None when they were kept.
    """
    stamp = folder / "model.json"
    moved = None
    if stamp.is_file() and json.loads(stamp.read_text()).get("fingerprint") not in (fingerprint, *also):
        moved = folder.with_name(folder.name + ".stale")
        if moved.exists():
            shutil.rmtree(moved)
        folder.rename(moved)
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"fingerprint": fingerprint}) + "\n")
    return moved


def recorded_results(folder: Path, label: str, items: dict[str, list[Item]]) -> tuple[dict[str, list[dict]], dict]:
    """``--from-records``: a label's records of ``items`` per suite, in item order, and the generation
    settings its stamp names; a ConfigError when the label has no stamp or misses an item."""
    stamp = folder / "model.json"
    if not stamp.is_file():
        raise ConfigError(f"{label}: no records in {folder} (run without --from-records to make them)")
    settings = fingerprint_settings(json.loads(stamp.read_text()).get("fingerprint", ""))
    results = {}
    for suite, wanted in items.items():
        done = finished_records(folder / f"{suite}.jsonl")
        missing = [item.id for item in wanted if item.id not in done]
        if missing:
            raise ConfigError(f"{label}: {len(missing)} of the {len(wanted)} {suite} items are not recorded "
                              f"(first: {missing[0]}); run without --from-records to finish them")
        results[suite] = [done[item.id] for item in wanted]
    return results, settings


def run_suite(backend: Backend, suite: Any, items: list[Item], settings: RunSettings, path: Path,
              concurrency: int = 1) -> list[dict]:
    """Run the items not yet recorded in ``path``, appending each record as it finishes; returns
    the records of ``items`` in order."""
    done = finished_records(path)
    todo = [item for item in items if item.id not in done]
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    with path.open("a", encoding="utf-8") as handle:
        def one(item: Item) -> None:
            record = run_one(backend, suite, item, settings)
            with lock:
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                handle.flush()  # a stopped run keeps every finished item
                done[item.id] = record
        if concurrency > 1:
            with ThreadPoolExecutor(concurrency) as pool:
                list(pool.map(one, todo))
        else:
            for item in todo:
                one(item)
    return [done[item.id] for item in items]


def run_one(backend: Backend, suite: Any, item: Item, settings: RunSettings) -> dict:
    """One item's record; a backend failure (context full, server down) becomes a wrong answer
    with the error recorded, so one bad item cannot stop an evaluation."""
    started = time.perf_counter()
    try:
        record = suite.run(backend, item, settings)
    except BackendError as exc:
        record = suite.failure(item, f"{type(exc).__name__}: {exc}")
    record.setdefault("seconds", round(time.perf_counter() - started, 3))  # wall time, for runtimes per suite
    return record


def open_model(model: str, config: EvalConfig) -> Backend:
    from botpsy.agent.backends import open_backend

    n_ctx = config.n_ctx or config.max_tokens + 16384
    return open_backend(model, BackendOptions(threads=config.threads, n_ctx=n_ctx))


# ---- summaries ------------------------------------------------------------------------------


def model_metrics(records: dict[str, list[dict]]) -> dict[str, Any]:
    """The report's metrics for one model, from its records of every suite."""
    generations = metrics.all_generations(r for rows in records.values() for r in rows)
    device, bfcl = records.get("device", []), records.get("bfcl", [])
    return {
        "generations": len(generations),
        "loop_rate": metrics.loop_rate(generations),
        "cap_hit_rate": metrics.cap_hit_rate(generations),
        "schema_valid_call_rate": metrics.schema_valid_call_rate(generations),
        "backend_errors": sum("backend_error" in r for rows in records.values() for r in rows),
        "multi_turn_solved": metrics.turns_per_solved_task(device) if device else None,
        "refusal_accuracy": metrics.refusal_accuracy(device, bfcl) if device or bfcl else None,
        "special_case_accuracy": metrics.special_case_accuracy(device) if device else None,
    }


def build_summary(results: dict[str, dict[str, list[dict]]], models: dict[str, str], suites: list[str]) -> dict:
    """results[label][suite] = records -> the summary written to ``summary.json``."""
    summary: dict[str, Any] = {"suites": suites, "models": {}}
    for label, per_suite in results.items():
        suite_summaries = {s: SUITES[s](SuiteOptions()).summarize(rows) for s, rows in per_suite.items()}
        summary["models"][label] = {"model": models[label], "suites": suite_summaries,
                                    "metrics": model_metrics(per_suite)}
    summary["reasoning_tokens_per_correct"] = {
        s: metrics.reasoning_tokens_per_correct({label: results[label][s] for label in results}) for s in suites}
    summary["reasoning_tokens_spent"] = {
        s: {label: metrics.reasoning_tokens_spent(results[label][s]) for label in results} for s in suites}
    labels = list(results)
    summary["paired"] = {s: {f"{a} vs {b}": metrics.paired(results[a][s], results[b][s])
                             for i, a in enumerate(labels) for b in labels[i + 1:]} for s in suites}
    return summary


def gate_scores(summary: dict) -> dict[str, dict[str, float | None]]:
    """Per model: each suite's headline accuracy, the loop rate and the schema-valid call rate."""
    scores = {}
    for label, entry in summary["models"].items():
        row = {suite: headline(suite, s) for suite, s in entry["suites"].items()}
        row.update(loop_rate=entry["metrics"]["loop_rate"],
                   schema_valid_call_rate=entry["metrics"]["schema_valid_call_rate"])
        scores[label] = row
    return scores


def main(config: EvalConfig) -> int:
    from botpsy.eval.report import human, markdown_table

    suites = suite_names(config.suite)
    pairs = resolve_models(config)
    if config.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    settings_of(config).generation()  # bad generation settings fail before any model loads
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, out / "config.json")
    items = {s: SUITES[s](suite_options(config, s)).items() for s in suites}
    results: dict[str, dict[str, list[dict]]] = {}
    constrained: dict[str, bool] = {}  # which models decoded with calls kept to the offered tools
    formats: dict[str, str] = {}  # which chat format (botpsy's or the model's own template) each model ran in
    plain_on_base: dict[str, bool] = {}  # which models answered tool-less turns with the base alone
    for label, model in pairs:
        if config.from_records:
            results[label], stamped = recorded_results(out / label, label, items)
            formats[label] = stamped.get("chat_format", "botpsy")
            constrained[label] = bool(stamped.get("constrain_calls"))
            plain_on_base[label] = bool(stamped.get("plain_on_base"))
            continue
        try:
            backend = open_model(model, config)
        except ModelLoadError as exc:
            print(f"botpsy eval: {label}: {exc}", file=sys.stderr)
            return 2
        if config.plain_on_base and not backend.adapter_switchable:
            backend.close()
            print(f"botpsy eval: {label}: {no_adapter_to_switch(model)}", file=sys.stderr)
            return 2
        plain_on_base[label] = config.plain_on_base
        http = model.startswith(("http://", "https://"))
        formats[label] = chat_format_for(backend, config.chat_format)
        settings = settings_of(config, formats[label])
        constrained[label] = config.constrain_calls and backend.supports_constraint and formats[label] == "botpsy"
        moved = set_aside_stale_records(out / label, run_fingerprint(model, settings, constrained[label]),
                                        also=(run_fingerprint(model, settings, constrained[label], legacy=True),))
        if moved:
            print(f"[eval] {label}: the model or the generation settings changed since its records were made; "
                  f"old records moved to {moved}", file=sys.stderr)
        try:
            results[label] = {}
            for s in suites:
                print(f"[eval] {label} / {s}: {len(items[s])} items", file=sys.stderr, flush=True)
                suite = SUITES[s](suite_options(config, s))
                try:
                    results[label][s] = run_suite(backend, suite, items[s], settings, out / label / f"{s}.jsonl",
                                                  config.concurrency if http else 1)
                finally:  # a suite may hold a model of its own (a simulated user, a judge)
                    getattr(suite, "close", lambda: None)()
        finally:
            backend.close()
    summary = build_summary(results, dict(pairs), suites)
    summary["constrained_calls"] = constrained
    summary["chat_format"] = formats
    if any(plain_on_base.values()):
        summary["plain_on_base"] = plain_on_base
    # Quantizations evaluated together (by --compare-quants, or labelled so) are compared with bf16;
    # only --compare-quants turns a flagged drop into a failing exit status.
    scores = gate_scores(summary)
    quants = {label: scores[label] for label in scores if label in QUANT_FILES}
    if "bf16" in quants and len(quants) > 1:
        summary["quantization"] = metrics.quant_deltas(quants, "bf16", config.max_drop)
    status = 1 if config.compare_quants and summary["quantization"]["flagged"] else 0
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "table.md").write_text(markdown_table(summary) + "\n")
    emit(summary, config.json, human)
    return status
