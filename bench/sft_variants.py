"""Inputs for three SFT experiments on the tools-block shortcut, and a table of their results.

The speedrun's SFT model picks a tool from the tools block more than from the request. Swapping in
another request barely changes its choice (README, "Does the model read the request at all?").
This script measures how far the tools block alone gets: ``tool_prior_rate`` scores "pick the offered
tool most often gold in training". It also builds what the experiments train on:

    .venv/bin/python bench/sft_variants.py balanced --data runs/speedrun/data --out runs/exp/data_bal
    .venv/bin/python bench/sft_variants.py no_tools --data runs/speedrun/data --out runs/exp/data_notools
    .venv/bin/python bench/sft_variants.py family_init --base runs/speedrun/base --out runs/exp/base_fam
    .venv/bin/botpsy sft --init runs/exp/base --data runs/exp/data_bal --out runs/exp/sft_bal   # and so on
    .venv/bin/python bench/sft_variants.py collect runs/exp/sft_plain runs/exp/sft_bal ... \
        --out bench_out/sft_variants.json

* ``balanced``: each training example's distractors are drawn again, from the tools that are the
  first call of some training example, keeping the count and the 70/30 same-domain split of
  ``botpsy.world.tasks.offer_tools``. Every offered tool is then a plausible first call, so the block
  no longer says which one is gold. The tool prior falls to about chance on the training split.
  "unavailable", "irrelevant" and "injection" examples keep their tools, because their right answer
  depends on which tools are offered. Only the train split changes.
* ``no_tools``: the training examples with an empty tools block (no ``<tools>`` section), leaving
  out "unavailable" and "irrelevant". A phase-one set, with contexts of about 250 tokens instead of 930.
* ``family_init``: a base whose word tokens led by a space or punctuation (`` Lunch``, ``"Lunch``)
  start from their bare word's embedding plus a vector shared by every token with that lead:
  ``(E[word] + P[lead]) / sqrt 2``. The embeddings are tied, so this holds at the input and the
  output. A request's `` Lunch`` is another id than a call's ``Lunch``. Here copying one into the
  other can start from their common part.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
from collections import Counter
from pathlib import Path

from botpsy.train.sft import read_jsonl, write_jsonl

SAME_DOMAIN_SHARE = 0.7  # as botpsy.world.tasks.offer_tools
KEEP_TOOLS_KINDS = ("unavailable", "irrelevant", "injection")
NO_TOOLS_SKIP_KINDS = ("unavailable", "irrelevant")


def call_names(example: dict) -> list[str]:
    """Names of every call the example's assistant turns make, in order."""
    return [c["function"]["name"] for m in example["messages"] for c in (m.get("tool_calls") or [])]


def tool_prior_rate(train: list[dict], scored: list[dict], kind: str = "single") -> float:
    """How often "the offered tool most often gold in ``train``" is the first call of ``scored``'s ``kind``.

    A tool's score is (times it is the first call + 0.5) / (times it is offered + 1) over ``train``.
    It uses no request at all.

    >>> tool = lambda name: {"function": {"name": name}}
    >>> ex = lambda gold, offered: {"kind": "single", "tools": [tool(n) for n in offered],
    ...     "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": gold}}]}]}
    >>> train = [ex("a", ["a", "b"]), ex("a", ["a", "c"]), ex("c", ["c", "b"])]
    >>> tool_prior_rate(train, [ex("a", ["a", "b"]), ex("b", ["b", "c"])])
    0.5
    """
    gold, offered = Counter(), Counter()
    for example in train:
        names = call_names(example)
        if names:
            gold[names[0]] += 1
            offered.update(t["function"]["name"] for t in example["tools"])
    right = total = 0
    for example in scored:
        names = call_names(example)
        if example["kind"] != kind or not names or not example["tools"]:
            continue
        offered_names = [t["function"]["name"] for t in example["tools"]]
        best = max(offered_names, key=lambda n: (gold[n] + 0.5) / (offered[n] + 1))
        right += best == names[0]
        total += 1
    return right / total if total else float("nan")


def balanced(train: list[dict], seed: int = 0) -> list[dict]:
    """``train`` with each example's distractors drawn again from the first-call tools (module docstring)."""
    from botpsy.world.registry import REGISTRY

    rng = random.Random(seed)
    pool = list(dict.fromkeys(names[0] for names in map(call_names, train) if names))
    out = []
    for example in train:
        if example["kind"] in KEEP_TOOLS_KINDS:
            out.append(example)
            continue
        needed = list(dict.fromkeys(call_names(example)))
        want = max(len(example["tools"]), len(needed)) - len(needed)
        same = [n for n in pool if REGISTRY[n].domain == example["domain"] and n not in needed]
        other = [n for n in pool if REGISTRY[n].domain != example["domain"] and n not in needed]
        n_same = min(len(same), round(want * SAME_DOMAIN_SHARE))
        names = needed + rng.sample(same, n_same) + rng.sample(other, min(len(other), want - n_same))
        rng.shuffle(names)
        out.append(dict(example, tools=[REGISTRY[n].spec() for n in names]))
    return out


def no_tools(train: list[dict]) -> list[dict]:
    return [dict(e, tools=[]) for e in train if e["kind"] not in NO_TOOLS_SKIP_KINDS]


def write_variant(data: Path, out: Path, train: list[dict]) -> None:
    """A data folder like ``data`` (dev, test, corpus and meta copied) with ``train`` as its train split."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("dev.jsonl", "test.jsonl", "corpus.txt", "meta.json"):
        shutil.copy(data / name, out / name)
    write_jsonl(out / "train.jsonl", train)


def family_pairs(tokenizer) -> list[tuple[int, int, str]]:
    """(id, bare word's id, lead character) for every token that is one non-alphanumeric lead plus a word
    that is itself a token."""
    vocab = {}
    for i in range(len(tokenizer)):
        vocab.setdefault(tokenizer.decode([i]), i)
    return [(i, vocab[s[1:]], s[0]) for s, i in vocab.items()
            if len(s) >= 2 and not s[0].isalnum() and s[1:].isalpha() and s[1:] in vocab]


def family_init(base: str, out: str, seed: int = 0) -> dict:
    import torch

    from botpsy.model.checkpoint import load_checkpoint, save_checkpoint

    checkpoint = load_checkpoint(base)
    model, tokenizer = checkpoint.model, checkpoint.tokenizer
    weight = model.get_input_embeddings().weight
    generator = torch.Generator().manual_seed(seed)
    scale = float(weight.detach().std())
    leads: dict[str, torch.Tensor] = {}
    pairs = family_pairs(tokenizer)
    with torch.no_grad():
        for token, word, lead in pairs:
            if lead not in leads:
                leads[lead] = torch.randn(weight.shape[1], generator=generator) * scale
            weight[token] = (weight[word] + leads[lead]) / math.sqrt(2)
    info = {"family_pairs": len(pairs), "leads": sorted(leads), "source": base}
    save_checkpoint(model, tokenizer, out, stage="base", meta={"family_init": info})
    return info


def collect(runs: list[str]) -> list[dict]:
    """Each SFT run's test single-call figures (its meta.json), plain and constrained."""
    rows = []
    for run in runs:
        meta_file = Path(run) / "meta.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{meta_file} does not exist; is {run} a finished `botpsy sft` run?")
        meta = json.loads(meta_file.read_text())
        figures = meta.get("test_single_call") or {}
        constrained = figures.get("constrained", {})
        rows.append({"run": run, "init": meta.get("config", {}).get("init"), "data": meta.get("config", {}).get("data"),
                     "steps": meta.get("config", {}).get("steps"), "dev_loss": (meta.get("dev") or {}).get("loss"),
                     "plain_exact": figures.get("exact_call_rate"), "plain_schema_valid": figures.get("schema_valid_rate"),
                     "constrained_exact": constrained.get("exact_call_rate"),
                     "constrained_schema_valid": constrained.get("schema_valid_rate"),
                     "no_call": constrained.get("miss_no_call_rate"), "wrong_tool": constrained.get("miss_wrong_tool_rate"),
                     "wrong_arguments": constrained.get("miss_wrong_arguments_rate"),
                     "right_tool": figures.get("tool_choice_rate"),
                     "right_tool_other_request": figures.get("tool_choice_rate_other_request")})
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    from botpsy.output import table, write_benchmark

    parser = argparse.ArgumentParser(prog="sft_variants", description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["balanced", "no_tools", "family_init", "collect"])
    parser.add_argument("runs", nargs="*", help="collect: finished `botpsy sft` run folders")
    parser.add_argument("--data", default="runs/speedrun/data", help="Data folder (botpsy data) to vary.")
    parser.add_argument("--base", default="runs/speedrun/base", help="family_init: base checkpoint.")
    parser.add_argument("--out", required=True, help="Data folder, checkpoint folder or (collect) result JSON.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.what == "family_init":
        print(json.dumps(family_init(args.base, args.out, args.seed)))
        return 0
    if args.what == "collect":
        if not args.runs:
            parser.error("collect needs run folders")
        rows = collect(args.runs)
        fmt = lambda r: {k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items() if k not in ("init", "data")}  # noqa: E731
        write_benchmark({"runs": rows}, args.out, False, lambda res: table([fmt(r) for r in res["runs"]]))
        return 0
    data = Path(args.data)
    if not (data / "train.jsonl").is_file():
        raise SystemExit(f"{data}/train.jsonl does not exist; run `botpsy data` (or the speedrun) first")
    train, test = read_jsonl(data / "train.jsonl"), read_jsonl(data / "test.jsonl")
    varied = balanced(train, args.seed) if args.what == "balanced" else no_tools(train)
    write_variant(data, Path(args.out), varied)
    summary = {"variant": args.what, "train_examples": len(varied),
               "tool_prior_rate_train": round(tool_prior_rate(train, train), 4),
               "tool_prior_rate_test": round(tool_prior_rate(train, test), 4)}
    if args.what == "balanced":
        summary["tool_prior_rate_train_after"] = round(tool_prior_rate(varied, varied), 4)
        summary["tool_prior_rate_test_after"] = round(tool_prior_rate(varied, test), 4)
    (Path(args.out) / "variant.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
