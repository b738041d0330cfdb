"""Evaluation through ``botpsy serve`` agrees with evaluation in process: same GGUF, same settings, greedy.

    .venv/bin/python bench/serve_eval_agreement.py            # writes bench_out/serve_eval_agreement.json

``botpsy eval`` runs the device suite and BFCL twice on one GGUF: once with the model loaded in
process (llama.cpp backend), once as ``--model http://127.0.0.1:PORT/v1`` against ``botpsy serve``
on the same file (the OpenAI-compatible backend, which sends the rendered prompt to
``/v1/completions``). Both are greedy, with calls unconstrained (HTTP endpoints cannot be
constrained by the client, so the in-process run is told ``--no-constrain-calls`` too) and the
server's loop guard set to observe, as the evaluation's own guard does. Per item it compares
the verdict (``correct``) and the model's whole output (BFCL: the raw text of every turn;
device: the whole transcript, tool results included).

The model is the tiny default-spec Qwen3.5 of ``bench/tiny_gguf.py`` after a few AdamW steps
on gold device-world conversations (``--train-steps``; built once under
``bench_out/tiny_model_trained/``), so that it writes varied text and tool calls rather than one
repeated token; it still solves almost nothing, so verdicts agree mostly on failures, and the
identical-output count is the stronger check.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from botpsy.config import parse_config  # noqa: E402
from botpsy.output import table, write_benchmark  # noqa: E402

TRAINED_DIR = ROOT / "bench_out" / "tiny_model_trained"


@dataclass
class AgreementConfig:
    """Check that botpsy eval through botpsy serve gives the in-process verdicts (device suite and BFCL)."""

    model: str = field(default="", metadata={"help": "GGUF file (default: the briefly trained tiny model, built once)."})
    device_limit: int = field(default=30, metadata={"help": "Device tasks."})
    bfcl_limit: int = field(default=2, metadata={"help": "BFCL items per category."})
    max_tokens: int = field(default=64, metadata={"help": "Token cap per generation."})
    max_turns: int = field(default=3, metadata={"help": "Most assistant turns per device task."})
    n_ctx: int = field(default=12288, metadata={"help": "Context size, in process and in the server (BFCL multi-turn prompts pass 9,000 tokens)."})
    threads: int = field(default=1, metadata={"help": "llama.cpp threads, in process and in the server."})
    train_steps: int = field(default=60, metadata={"help": "AdamW steps of the default model on gold conversations."})
    work: str = field(default="runs/serve_eval", metadata={"help": "Folder for the two evaluations (replaced)."})
    out: str = field(default="bench_out/serve_eval_agreement.json", metadata={"help": "Where to write the JSON results."})
    json: bool = field(default=False, metadata={"help": "Print the JSON results instead of the table."})


def trained_tiny_gguf(steps: int) -> Path:
    """The tiny model after ``steps`` AdamW steps on gold device conversations, exported to Q8_0 (built once)."""
    path = TRAINED_DIR / "gguf" / "model-q8_0.gguf"
    if path.is_file():
        return path
    import torch

    from botpsy.chat.template import render
    from botpsy.export.command import ExportConfig, export_checkpoint
    from botpsy.model.checkpoint import load_checkpoint, save_checkpoint
    from botpsy.world import generate_tasks, replay_gold
    from tiny_gguf import MODEL_DIR, tiny_gguf

    tiny_gguf()  # the base checkpoint and its tokenizer
    checkpoint = load_checkpoint(MODEL_DIR / "base")
    model, tokenizer = checkpoint.model, checkpoint.tokenizer
    texts = [render(replay_gold(task).messages, task.tools, add_generation_prompt=False)
             for task in generate_tasks("train", 48, seed=0)]
    ids = torch.tensor(tokenizer("<|endoftext|>".join(texts))["input_ids"])
    rows = ids[: len(ids) // 256 * 256].view(-1, 256)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        batch = rows[torch.randint(len(rows), (8,))]
        model(batch, labels=batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    save_checkpoint(model, tokenizer, TRAINED_DIR / "sft", stage="sft", meta={"purpose": "serve eval agreement",
                                                                             "steps": steps})
    export_checkpoint(ExportConfig(checkpoint=str(TRAINED_DIR / "sft"), out=str(TRAINED_DIR / "gguf"), formats="q8_0"))
    return path


def eval_args(cfg: AgreementConfig, model: str, label: str, out: Path) -> list[str]:
    return ["eval", "--suite", "device,bfcl", "--model", model, "--label", label, "--out", str(out),
            "--device-limit", str(cfg.device_limit), "--bfcl-limit", str(cfg.bfcl_limit),
            "--max-tokens", str(cfg.max_tokens), "--max-turns", str(cfg.max_turns), "--no-constrain-calls",
            "--threads", str(cfg.threads), "--n-ctx", str(cfg.n_ctx), "--json"]


def run_evals(cfg: AgreementConfig, model: str) -> dict[str, float]:
    """The in-process evaluation, then the same through a botpsy serve process; seconds each."""
    import contextlib
    import io

    from botpsy.cli import main as cli_main
    from serve_load import ServerProcess, free_port

    work = ROOT / cfg.work
    shutil.rmtree(work, ignore_errors=True)
    seconds = {}
    began = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli_main(eval_args(cfg, model, "local", work / "local")) == 0
    seconds["in_process"] = time.perf_counter() - began
    port = free_port()
    server = ServerProcess("botpsy serve", [sys.executable, "-m", "botpsy.cli", "serve", "--model", model, "--port",
                                            str(port), "--threads", str(cfg.threads), "--n-ctx", str(cfg.n_ctx),
                                            "--on-loop", "observe", "--max-tokens-limit", str(cfg.max_tokens)], port)
    try:
        began = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli_main(eval_args(cfg, f"http://127.0.0.1:{port}/v1", "http", work / "http")) == 0
        seconds["through_server"] = time.perf_counter() - began
    finally:
        server.stop()
    return seconds


def records(path: Path) -> dict[str, dict]:
    from botpsy.eval.harness import read_records

    return read_records(path)


def output_of(suite: str, record: dict):
    """What the model produced on an item: BFCL's raw text per turn, or the device task's whole transcript."""
    if suite == "bfcl":
        return record.get("raw")
    return [{k: m.get(k) for k in ("role", "content", "reasoning_content", "tool_calls")}
            for m in record.get("messages") or []]


def compare(work: Path) -> dict:
    suites = {}
    for suite in ("device", "bfcl"):
        local = records(work / "local" / "local" / f"{suite}.jsonl")  # eval writes OUT/LABEL/SUITE.jsonl
        http = records(work / "http" / "http" / f"{suite}.jsonl")
        ids = sorted(set(local) & set(http))
        rows = [{"id": i, "local": bool(local[i]["correct"]), "http": bool(http[i]["correct"]),
                 "same_output": output_of(suite, local[i]) == output_of(suite, http[i]),
                 "errors": [r.get("backend_error") for r in (local[i], http[i]) if r.get("backend_error")]}
                for i in ids]
        suites[suite] = {"items": len(rows), "missing": sorted(set(local) ^ set(http)),
                         "verdicts_agree": sum(r["local"] == r["http"] for r in rows),
                         "outputs_identical": sum(r["same_output"] for r in rows),
                         "correct_local": sum(r["local"] for r in rows), "correct_http": sum(r["http"] for r in rows),
                         "backend_errors": sum(bool(r["errors"]) for r in rows),
                         "disagreements": [r for r in rows if r["local"] != r["http"] or not r["same_output"]]}
    items = sum(s["items"] for s in suites.values())
    agree = sum(s["verdicts_agree"] for s in suites.values())
    return {"items": items, "verdicts_agree": agree, "agreement": round(agree / items, 4) if items else None,
            "outputs_identical": sum(s["outputs_identical"] for s in suites.values()), "suites": suites}


def run(cfg: AgreementConfig) -> dict:
    model = cfg.model or str(trained_tiny_gguf(cfg.train_steps))
    seconds = run_evals(cfg, model)
    result = compare(ROOT / cfg.work)
    return {"bench": asdict(cfg), "model": model, "seconds": {k: round(v, 1) for k, v in seconds.items()},
            **result, "all_agree": result["items"] >= 50 and result["verdicts_agree"] == result["items"]}


def human(result: dict) -> str:
    rows = [{"suite": name, "items": s["items"], "verdicts agree": s["verdicts_agree"],
             "outputs identical": s["outputs_identical"], "correct (in process / served)":
             f"{s['correct_local']} / {s['correct_http']}", "backend errors": s["backend_errors"]}
            for name, s in result["suites"].items()]
    return "\n".join([table(rows), "",
                      f"verdicts agree on {result['verdicts_agree']} of {result['items']} items; outputs identical on "
                      f"{result['outputs_identical']}; seconds {result['seconds']}"])


def main(cfg: AgreementConfig) -> int:
    result = run(cfg)
    write_benchmark(result, cfg.out, cfg.json, human)
    return 0 if result["all_agree"] else 1


if __name__ == "__main__":
    raise SystemExit(main(parse_config(AgreementConfig, prog="bench/serve_eval_agreement.py")))
