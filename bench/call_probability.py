"""How sure is a model that it should call a tool? The probability of ``<tool_call>`` as the first
token of the answer, per BFCL item, thinking off (the decision the call gate thresholds).

For each single-turn item of the draw it renders the prompt as ``botpsy eval`` does (botpsy's
format, thinking off), evaluates it with llama.cpp and reads the softmax of the last position:
the call token's share of the probability that is not on whitespace, as ``CallGate`` computes it.
Resumes from its output file; items of ``irrelevance`` first, then the rest interleaved.

    python bench/call_probability.py MODEL.gguf OUT.jsonl [--category C ...] [--limit 50] [--threads 2]
    python bench/call_probability.py --summarize OUT.jsonl [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple"]
THRESHOLDS = (0.3, 0.5, 0.7, 0.9)


def measure(model: str, out: Path, categories: list[str], limit: int, threads: int) -> None:
    from botpsy.chat.constrain import CallGate
    from botpsy.chat.native import ChatFormat
    from botpsy.eval.bfcl import bfcl_items
    from botpsy.runtime.backend import BackendOptions
    from botpsy.runtime.llama_backend import LlamaBackend

    by_category = defaultdict(list)
    for item in bfcl_items(categories, limit):
        if not item.multi_turn:
            by_category[item.category].append(item)
    first = by_category.pop("irrelevance", [])
    items = first + [item for group in zip(*by_category.values()) for item in group]
    done = {json.loads(line)["id"] for line in out.read_text().splitlines() if line.strip()} if out.is_file() else set()
    backend = LlamaBackend(model, BackendOptions(n_ctx=8192, threads=threads, prefix_cache_mb=0))
    gate = CallGate(backend.token_table(), 1.0, thinking=False)
    with out.open("a") as handle:
        for item in items:
            if item.id in done:
                continue
            prompt, _ = ChatFormat.botpsy().prompt(item.messages, item.tools_at(0), False)
            backend._clear()
            backend._decode(backend.prompt_ids(prompt))
            logits = backend._logits()
            share, _ = gate.call_share(logits)
            handle.write(json.dumps({"id": item.id, "category": item.category, "call_share": round(share, 5),
                                     "top": backend.piece(int(logits.argmax())).decode("utf-8", "replace")}) + "\n")
            handle.flush()
    backend.close()


def summarize(path: Path) -> dict:
    """Per category: items, the median share, and how many fall below each threshold (a row written
    by the first version of this probe has ``call_prob``, the share of all tokens)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out: dict = {"file": str(path), "thresholds": list(THRESHOLDS), "categories": {}}
    for category in sorted({row["category"] for row in rows}):
        shares = sorted(row.get("call_share", row.get("call_prob")) for row in rows if row["category"] == category)
        out["categories"][category] = {
            "items": len(shares), "median_share": shares[len(shares) // 2],
            "below": {str(t): sum(share < t for share in shares) for t in THRESHOLDS}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="MODEL.gguf OUT.jsonl, or OUT.jsonl with --summarize")
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--category", action="append", default=None)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.summarize:
        text = json.dumps(summarize(Path(args.paths[0])), indent=1)
        Path(args.out).write_text(text + "\n") if args.out else print(text)
        return
    model, out = args.paths
    measure(model, Path(out), args.category or CATEGORIES, args.limit, args.threads)


if __name__ == "__main__":
    main()
