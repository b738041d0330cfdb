"""Quick in-training evaluation: held-out loss and whether greedy calls match the gold calls.

For an example whose first assistant turn calls tools, the model sees the conversation up to
that turn and generates greedily; the output is parsed and compared with the gold calls:

* ``parse_rate``: at least one call parsed without errors;
* ``schema_valid_rate``: every parsed call names an offered tool and its arguments validate
  against that tool's JSON schema;
* ``exact_call_rate``: the parsed calls equal the gold calls (names and arguments, in any order).

Each miss falls in exactly one of three bins, so a report can say what fails:
``miss_no_call_rate`` (no call parsed: the model answered, asked back, or wrote a broken call),
``miss_wrong_tool_rate`` (calls parsed, but not the gold set of tool names) and
``miss_wrong_arguments_rate`` (the right tools with other arguments). (The ``no_call_rate`` of
``rollout.first_turn_accuracy`` is another figure: right abstentions where no call is due.)
``call_accuracy(..., records=[])`` also fills the list with one record per example (request,
gold calls, parsed calls, the raw text and its verdict), which ``botpsy sft`` writes to
``test_calls.jsonl``.

``tool_choice`` asks a narrower question, to tell a model that cannot write a call from one that
cannot pick the tool: with thinking off and the turn forced up to ``<function=``, which offered
tool's name (with its closing ``>``) is most likely? ``tool_choice_rate`` is how often that is a
gold tool, next to ``chance_rate``, the mean of 1 / (tools offered). The same ranking with the
request swapped for another one (``tool_choice_rate_other_request``) tells whether the choice
comes from the request at all.
"""

from __future__ import annotations

import json

import torch
from jsonschema import Draft202012Validator

from botpsy.chat.template import render
from botpsy.train.common import causal_lm_loss, collate
from botpsy.train.encode import IGNORE, Encoded, without_reasoning
from botpsy.train.lora import bare_causal_lm


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


def miss_kind(parsed_ok: bool, calls: list, gold: list[dict]) -> str | None:
    """Why a first call is not exact: None when it is, else no_call / wrong_tool / wrong_arguments.

    >>> from botpsy.chat.types import ToolCall
    >>> gold = [{"function": {"name": "set_alarm", "arguments": {"time": "07:00"}}}]
    >>> miss_kind(True, [ToolCall("set_alarm", {"time": "07:00"})], gold) is None
    True
    >>> miss_kind(True, [ToolCall("set_alarm", {"time": "12:30"})], gold)
    'wrong_arguments'
    >>> miss_kind(True, [ToolCall("list_alarms", {})], gold), miss_kind(False, [], gold)
    ('wrong_tool', 'no_call')
    """
    if not (parsed_ok and calls):
        return "no_call"
    if calls_match(calls, gold):
        return None
    same_tools = sorted(c.name for c in calls) == sorted(c["function"]["name"] for c in gold)
    return "wrong_arguments" if same_tools else "wrong_tool"


MISS_KINDS = ("no_call", "wrong_tool", "wrong_arguments")


@torch.no_grad()
def call_accuracy(model, tokenizer, examples: list[dict], max_new_tokens: int = 160, batch_size: int = 16,
                  constrained: bool = False, records: list | None = None) -> dict:
    """Greedy-generate the first call turn of each example (batched) and score it (see module docstring).

    ``constrained``: decode with ``botpsy.chat.constrain`` (call names and parameters kept to the
    offered tools), as the runtime does by default. ``records``: a list to receive one dict per
    scored example.
    """
    from botpsy.chat.parse import parse_output
    from botpsy.train.rollout import sample_batch

    cases = []
    for example in examples:
        turn = first_call_turn(example)
        if turn is None:
            continue
        context, gold = turn
        thinking = bool(example.get("thinking", True))
        if not thinking:
            context = [without_reasoning(m) for m in context]
        prompt = render(context, example.get("tools"), add_generation_prompt=True, enable_thinking=thinking)
        cases.append((prompt, gold, example.get("tools") or [], thinking, example, context))
    samples = sample_batch(model, tokenizer, [c[0] for c in cases], max_new_tokens=max_new_tokens, temperature=0.0,
                           batch_size=batch_size, tools=[c[2] for c in cases] if constrained else None)
    counts = dict.fromkeys(("parsed", "schema_valid", "exact", *MISS_KINDS), 0)
    for (_prompt, gold, tools, thinking, example, context), sample in zip(cases, samples):
        parsed = parse_output(sample.text, tools, thinking=thinking)
        valid = parsed.ok and schema_valid(parsed.tool_calls, tools)
        miss = miss_kind(parsed.ok, parsed.tool_calls, gold)
        counts["parsed"] += int(bool(parsed.tool_calls) and parsed.ok)
        counts["schema_valid"] += int(valid)
        counts["exact"] += int(miss is None)
        if miss is not None:
            counts[miss] += 1
        if records is not None:
            records.append({
                "id": example.get("id"), "thinking": thinking, "constrained": constrained,
                "request": next((m.get("content") for m in reversed(context) if m.get("role") == "user"), None),
                "gold": [{"name": c["function"]["name"], "arguments": _arguments(c["function"])} for c in gold],
                "calls": [{"name": c.name, "arguments": c.arguments} for c in parsed.tool_calls],
                "schema_valid": valid, "exact": miss is None, "miss": miss, "text": sample.text})
    n = max(1, len(cases))
    return {
        "call_examples": len(cases),
        "parse_rate": counts["parsed"] / n,
        "schema_valid_rate": counts["schema_valid"] / n,
        "exact_call_rate": counts["exact"] / n,
        **{f"miss_{kind}_rate": counts[kind] / n for kind in MISS_KINDS},
    }


def _tool_scores(model, tokenizer, context: list[dict], tools: list[dict]) -> list[float]:
    """Log-likelihood of each offered tool's name (with its closing ``>``) right after ``<function=``."""
    from botpsy.chat.template import TOOL_CALL_OPEN

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prompt = render([without_reasoning(m) for m in context], tools, add_generation_prompt=True, enable_thinking=False)
    prompt += f"{TOOL_CALL_OPEN}\n<function="
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    rows = [tokenizer(prompt + t["function"]["name"] + ">", add_special_tokens=False)["input_ids"] for t in tools]
    # Score from the first token where a candidate can differ from the prompt (BPE may merge "=" and the name).
    start = next((i for i in range(len(prompt_ids)) if any(r[i] != prompt_ids[i] for r in rows)), len(prompt_ids))
    ids, labels = collate([Encoded(input_ids=r, labels=[IGNORE] * start + r[start:]) for r in rows], pad_id)
    first = max(0, start - 1)
    logits = candidate_logits(model, ids, first).float()
    targets = labels[:, first + 1:]
    keep = targets != IGNORE
    token_lp = torch.log_softmax(logits, -1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (token_lp * keep).sum(-1).tolist()


def candidate_logits(model, ids: torch.Tensor, first: int) -> torch.Tensor:
    """Logits from position ``first`` on. Only those positions go through the head: a 152k-token
    vocabulary over a whole prompt for every offered tool would be gigabytes of logits."""
    lm = bare_causal_lm(model)
    if hasattr(lm, "lm_head") and hasattr(lm, "model"):
        return lm.lm_head(lm.model(input_ids=ids).last_hidden_state[:, first:-1])
    return model(input_ids=ids).logits[:, first:-1]  # any callable model (the tests' fakes)


def _with_request(context: list[dict], request: str) -> list[dict]:
    """``context`` with its last user turn's text replaced by ``request``."""
    last = max(i for i, m in enumerate(context) if m.get("role") == "user")
    return [dict(m, content=request) if i == last else m for i, m in enumerate(context)]


@torch.no_grad()
def tool_choice(model, tokenizer, examples: list[dict]) -> dict:
    """Rank the offered tools by likelihood at the call's name (see module docstring).

    Each example is also ranked with its request swapped for that of the next example whose
    gold tool differs (same tools, same system turn): ``tool_choice_rate_other_request`` is how
    often the original gold tool still comes first. A model that reads the request falls well
    below ``tool_choice_rate`` there; one that picks from the offered tools alone does not.
    """
    model.eval()
    cases = []
    for example in examples:
        turn = first_call_turn(example)
        tools = example.get("tools") or []
        if turn is not None and tools:
            context, gold = turn
            cases.append((context, tools, {c["function"]["name"] for c in gold}))
    right = swapped_right = swaps = 0
    chance = 0.0
    for i, (context, tools, gold) in enumerate(cases):
        names = [t["function"]["name"] for t in tools]
        scores = _tool_scores(model, tokenizer, context, tools)
        right += int(names[max(range(len(names)), key=scores.__getitem__)] in gold)
        chance += 1 / len(names)
        other = next((c for c in cases[i + 1:] + cases[:i] if not (c[2] & gold)), None)
        if other is not None:
            request = next(m["content"] for m in reversed(other[0]) if m.get("role") == "user")
            scores = _tool_scores(model, tokenizer, _with_request(context, request), tools)
            swapped_right += int(names[max(range(len(names)), key=scores.__getitem__)] in gold)
            swaps += 1
    n = max(1, len(cases))
    return {"choice_examples": len(cases), "tool_choice_rate": right / n, "chance_rate": chance / n,
            "tool_choice_rate_other_request": swapped_right / swaps if swaps else None}


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
