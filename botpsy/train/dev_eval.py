"""Quick in-training evaluation: held-out loss and whether greedy calls match the gold calls.

For an example whose first assistant turn calls tools, the model sees the conversation up to
that turn and generates greedily; the output is parsed and compared with the gold calls:

* ``parse_rate``: at least one call parsed without errors;
* ``schema_valid_rate``: every parsed call names an offered tool and its arguments validate
  against that tool's JSON schema;
* ``exact_call_rate``: the parsed calls equal the gold calls (names and arguments, in any order).
"""

from __future__ import annotations

import json

import torch
from jsonschema import Draft202012Validator

from botpsy.chat.template import render
from botpsy.train.common import causal_lm_loss, collate
from botpsy.train.encode import Encoded, without_reasoning


def call_key(name: str, arguments: dict) -> tuple[str, str]:
    return name, json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def calls_match(parsed: list, gold: list[dict]) -> bool:
    """Same multiset of (name, arguments); ``gold`` items are OpenAI-style calls."""
    gold_keys = sorted(call_key(c["function"]["name"], _arguments(c["function"])) for c in gold)
    return sorted(call_key(c.name, c.arguments) for c in parsed) == gold_keys


def _arguments(fn: dict) -> dict:
    args = fn.get("arguments") or {}
    return json.loads(args) if isinstance(args, str) else args


def schema_valid(calls: list, tools: list[dict]) -> bool:
    by_name = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}
    for call in calls:
        schema = by_name.get(call.name)
        if schema is None or not Draft202012Validator(schema).is_valid(call.arguments):
            return False
    return bool(calls)


def first_call_turn(example: dict) -> tuple[list[dict], list[dict]] | None:
    """(messages before the first assistant turn, its gold calls) if that turn calls tools."""
    for i, message in enumerate(example["messages"]):
        if message.get("role") == "assistant":
            calls = message.get("tool_calls") or []
            return (example["messages"][:i], calls) if calls else None
    return None


@torch.no_grad()
def call_accuracy(model, tokenizer, examples: list[dict], max_new_tokens: int = 160) -> dict:
    """Greedy-generate the first call turn of each example and score it (see module docstring)."""
    from botpsy.chat.parse import parse_output

    model.eval()
    counts = {"n": 0, "parsed": 0, "schema_valid": 0, "exact": 0}
    stop_ids = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    for example in examples:
        turn = first_call_turn(example)
        if turn is None:
            continue
        context, gold = turn
        thinking = bool(example.get("thinking", True))
        if not thinking:
            context = [without_reasoning(m) for m in context]
        prompt = render(context, example.get("tools"), add_generation_prompt=True, enable_thinking=thinking)
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop_ids,
                             pad_token_id=tokenizer.pad_token_id)
        text = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=False)
        parsed = parse_output(text, example.get("tools"), thinking=thinking)
        counts["n"] += 1
        counts["parsed"] += int(bool(parsed.tool_calls) and parsed.ok)
        counts["schema_valid"] += int(parsed.ok and schema_valid(parsed.tool_calls, example.get("tools") or []))
        counts["exact"] += int(parsed.ok and calls_match(parsed.tool_calls, gold))
    n = max(1, counts["n"])
    return {
        "call_examples": counts["n"],
        "parse_rate": counts["parsed"] / n,
        "schema_valid_rate": counts["schema_valid"] / n,
        "exact_call_rate": counts["exact"] / n,
    }


@torch.no_grad()
def mean_loss(model, items: list[Encoded], pad_id: int, batch_size: int = 8) -> float:
    """Token-weighted mean loss over ``items``."""
    model.eval()
    total, tokens = 0.0, 0
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        ids, labels = collate(chunk, pad_id)
        n = int((labels[:, 1:] != -100).sum())
        if n == 0:
            continue
        total += float(causal_lm_loss(model, ids, labels)) * n
        tokens += n
    return total / max(1, tokens)
