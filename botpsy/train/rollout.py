"""On-policy rollouts on a CPU: batched sampling from the student and scoring of its completions.

MOPD and RL both need the same two things from the current policy:

* ``sample_batch``: completions for many prompts at once. Prompts are sorted by length and
  generated ``batch_size`` at a time with left padding, an attention mask, explicit position
  ids (so RoPE sees each prompt from position 0) and a hand-written cached decode loop.
  Left padding is safe for Qwen3.5's Gated-DeltaNet layers: transformers zeroes padded
  hidden states before the linear-attention projections (which have no bias), so padded
  positions feed zeros into the causal convolution (the same as its own zero padding) and
  leave the recurrent state at zero; the full-attention layers mask them. The tests check
  batched greedy output against one-prompt-at-a-time greedy output. Each prompt draws its
  tokens from its own seeded generator, so a sample does not depend on which other prompts
  shared its batch. Finished rows are dropped from the batch (and the cache) as they end.
* ``score_completions``: one forward pass over prompt + completion (right-padded) that
  returns the logits predicting every completion token, their log-probabilities and a mask.
  It keeps the autograd graph when called under grad, so the same call serves the student
  (with grad) and a local teacher (under ``torch.no_grad``).

Example::

    from botpsy.model.checkpoint import load_checkpoint
    ckpt = load_checkpoint("runs/speedrun/sft")
    prompts = [first_turn_prompt(example) for example in examples]
    samples = sample_batch(ckpt.model, ckpt.tokenizer, prompts, max_new_tokens=160, temperature=1.0)
    scored = score_completions(ckpt.model, samples, ckpt.tokenizer.pad_token_id)

On GPUs the rollouts of the real 0.8B model come from a vLLM server instead (see
``botpsy/train/mopd.py``); scoring stays here.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import torch

from botpsy.chat.template import ENDOFTEXT, IM_END, render
from botpsy.runtime.hf_backend import mask_logits
from botpsy.train.encode import without_reasoning

STOP_TEXTS = (IM_END, ENDOFTEXT)


@dataclass
class Sample:
    prompt_ids: list[int]
    completion_ids: list[int]  # sampled ids; ends with <|im_end|> (or <|endoftext|>) when finished
    text: str  # decoded completion, special tokens kept
    finished: bool  # stopped at a stop token rather than at max_new_tokens


@dataclass
class Scored:
    logits: torch.Tensor | None  # [B, T, V] float32 logits predicting each completion token (None: not kept)
    token_logprobs: torch.Tensor  # [B, T] log-prob of each completion token
    mask: torch.Tensor  # [B, T] 1.0 for real completion tokens, 0.0 for padding


# --------------------------------------------------------------------------- prompts


def turn_prompts(example: dict) -> list[str]:
    """The rendered prompt before each assistant turn of ``example``, first turn first.

    Respects ``example["thinking"]`` the way training and ``dev_eval`` do: with thinking off,
    earlier assistant turns lose their reasoning and the prompt ends with an empty think block.
    Context is exactly what the model sees at inference: system, tools, user turns, tool results
    and its own earlier turns.
    """
    thinking = bool(example.get("thinking", True))
    messages = example["messages"] if thinking else [without_reasoning(m) for m in example["messages"]]
    tools = example.get("tools") or []
    return [render(messages[:i], tools, add_generation_prompt=True, enable_thinking=thinking)
            for i, message in enumerate(messages) if message.get("role") == "assistant" and i > 0]


def first_turn_prompt(example: dict) -> str:
    """The rendered prompt for the example's first assistant turn (like ``dev_eval`` renders it)."""
    prompts = turn_prompts(example)
    if not prompts:
        raise ValueError(f"example {example.get('id', '?')} has no assistant turn to prompt for")
    return prompts[0]


def stop_token_ids(tokenizer) -> set[int]:
    vocab = tokenizer.get_vocab()
    return {vocab[text] for text in STOP_TEXTS if text in vocab}


# --------------------------------------------------------------------------- sampling


def pick_tokens(logits: torch.Tensor, temperature: float, top_p: float, generators: list[torch.Generator]) -> torch.Tensor:
    """Next token per row of ``logits`` [B, V]: argmax at temperature 0, else a top-p draw per row."""
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # Drop a token when the tokens ranked above it already cover top_p (the first always stays).
        drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        probs = probs.scatter(-1, order, sorted_probs.masked_fill(drop, 0.0))
    return torch.stack([torch.multinomial(row, 1, generator=gen)[0] for row, gen in zip(probs, generators)])


@torch.no_grad()
def generate_rows(model, rows: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                  generators: list[torch.Generator], stop_ids: set[int], pad_id: int,
                  constraints: list | None = None, pieces: list[str] | None = None) -> list[tuple[list[int], bool]]:
    """(completion ids, finished) for each prompt in ``rows``, generated together with a cache.

    ``constraints`` (one ``CallConstraint`` or None per row, with ``pieces``, every token's text)
    mask each row's logits to the tokens its constraint allows after the row's text so far.

    Identical prompts (a GRPO group's rollouts of one task) are prefilled once: the cache and the
    first logits are then copied to every row that shares the prompt, and the rows part ways
    from the first sampled token on.
    """
    count, width = len(rows), max(len(r) for r in rows)
    slot_of: dict[tuple[int, ...], int] = {}
    shared = torch.tensor([slot_of.setdefault(tuple(row), len(slot_of)) for row in rows])
    ids = torch.full((len(slot_of), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(slot_of), width), dtype=torch.long)
    for r, row in enumerate(slot_of):
        ids[r, width - len(row):] = torch.tensor(row)
        mask[r, width - len(row):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    cache, next_pos = out.cache, positions[:, -1] + 1
    logits = out.logits[:, -1]
    if len(slot_of) < count:  # one row per prompt so far: give every copy its own cache row
        cache.reorder_cache(shared)
        logits, mask, next_pos = logits[shared], mask[shared], next_pos[shared]
    active = list(range(count))  # original row of each row still in the batch
    completions: list[list[int]] = [[] for _ in rows]
    finished = [False] * count
    stops = torch.tensor(sorted(stop_ids), dtype=torch.long)
    texts = [""] * count
    for step in range(max_new_tokens):
        if constraints is not None:
            logits = _constrain(logits, [constraints[r] for r in active], [texts[r] for r in active])
        tokens = pick_tokens(logits, temperature, top_p, [generators[r] for r in active])
        for slot, r in enumerate(active):
            completions[r].append(int(tokens[slot]))
            if pieces is not None:
                texts[r] += pieces[int(tokens[slot])]
        ended = torch.isin(tokens, stops)
        for slot in ended.nonzero().flatten().tolist():
            finished[active[slot]] = True
        if step == max_new_tokens - 1 or bool(ended.all()):
            break
        if bool(ended.any()):  # drop finished rows so the rest decode in a smaller batch
            keep = (~ended).nonzero().flatten()
            cache.reorder_cache(keep)  # index_select on every layer: keys/values and conv/recurrent states
            active = [active[i] for i in keep.tolist()]
            tokens, mask, next_pos = tokens[keep], mask[keep], next_pos[keep]
        mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
        out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_pos[:, None], cache=cache,
                    use_cache=True)
        logits, next_pos = out.logits[:, -1], next_pos + 1
    return list(zip(completions, finished))


def _constrain(logits: torch.Tensor, constraints: list, texts: list[str]) -> torch.Tensor:
    """Rows of ``logits`` with the tokens their constraint forbids at -inf."""
    masked = None
    for row, (constraint, text) in enumerate(zip(constraints, texts)):
        allowed = constraint.allowed_ids(text) if constraint is not None else None
        if allowed:
            masked = logits.clone() if masked is None else masked
            masked[row] = mask_logits(masked[row], allowed)
    return logits if masked is None else masked


def sample_batch(model, tokenizer, prompts: list[str], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int = 0, batch_size: int = 16, tools: list | None = None) -> list[Sample]:
    """Sample one completion per prompt (``temperature=0``: greedy), in the order of ``prompts``.

    Prompts of similar length share a batch (less padding); prompt ``i`` samples from its own
    generator seeded with ``(seed, i)``, so results do not depend on ``batch_size``. With
    ``tools`` (the offered tools of each prompt), calls are constrained to them
    (``botpsy.chat.constrain``).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    was_training = model.training
    model.eval()
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    if any(not ids for ids in encoded):
        raise ValueError("an empty prompt cannot be continued")
    generators = [torch.Generator().manual_seed(seed * 1_000_003 + i) for i in range(len(prompts))]
    stop_ids, pad_id = stop_token_ids(tokenizer), tokenizer.pad_token_id
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
    constraints, pieces = None, None
    if tools is not None:
        from botpsy.chat.constrain import CallConstraint, TokenTable

        table = TokenTable.from_tokenizer(tokenizer)
        constraints, pieces = [CallConstraint(t, table) if t else None for t in tools], table.pieces
    results: dict[int, tuple[list[int], bool]] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        outs = generate_rows(model, [encoded[i] for i in chunk], max_new_tokens=max_new_tokens, temperature=temperature,
                             top_p=top_p, generators=[generators[i] for i in chunk], stop_ids=stop_ids, pad_id=pad_id,
                             constraints=[constraints[i] for i in chunk] if constraints else None, pieces=pieces)
        results.update(zip(chunk, outs))
    model.train(was_training)
    samples = []
    for i, ids in enumerate(encoded):
        completion, finished = results[i]
        text = tokenizer.decode(completion, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        samples.append(Sample(prompt_ids=list(ids), completion_ids=completion, text=text, finished=finished))
    return samples


# --------------------------------------------------------------------------- scoring


def completion_batch(samples: list[Sample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded prompt+completion ids [B, W], the positions predicting each completion token
    [B, T], the completion tokens [B, T] and their mask [B, T]."""
    if not samples:
        raise ValueError("no samples to score")
    width = max(len(s.prompt_ids) + len(s.completion_ids) for s in samples)
    steps = max(1, max(len(s.completion_ids) for s in samples))
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    index = torch.zeros((len(samples), steps), dtype=torch.long)
    targets = torch.full((len(samples), steps), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), steps))
    for r, s in enumerate(samples):
        row, n = s.prompt_ids + s.completion_ids, len(s.completion_ids)
        ids[r, : len(row)] = torch.tensor(row)
        # Position p predicts token p + 1: the first completion token is predicted at the prompt's last token.
        index[r] = torch.arange(len(s.prompt_ids) - 1, len(s.prompt_ids) - 1 + steps).clamp(max=width - 1)
        targets[r, :n] = torch.tensor(s.completion_ids, dtype=torch.long)
        mask[r, :n] = 1.0
    return ids, index, targets, mask


def length_chunks(samples: list[Sample], size: int) -> list[list[int]]:
    """Sample indices in scoring passes of ``size`` (0: one pass), similar lengths together: less
    padding, and with ``detach_prompt`` less of each prompt behind the pass's shortest one carries
    gradient (activation memory grows with it: 8 MOPD rollouts of the 0.5B in one pass ran out of 23 GB)."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].prompt_ids) + len(samples[i].completion_ids))
    size = size or max(1, len(order))
    return [order[i : i + size] for i in range(0, len(order), size)]


def score_completions(model, samples: list[Sample], pad_id: int, detach_prompt: bool = False,
                      keep_logits: bool = True) -> Scored:
    """Logits and log-probs of each sample's completion tokens, from one forward pass.

    Right padding needs no attention mask: every real token comes before the padding of its
    row, and attention and the recurrent layers are causal. Only completion positions are
    projected onto the vocabulary when ``model`` is a bare ``*ForCausalLM`` or a ``peft``
    wrapper of one.

    ``detach_prompt``: the positions before the shortest prompt's last token are encoded
    forward-only and cached, and only the rest carries gradient (as SFT's ``detach_context``).
    The completion still attends to the whole prompt as the current weights encode it; what is
    dropped is the gradient through the prompt's keys and values. Agent prompts are mostly
    system prompt and tools, so this saves most of a 0.5B student's backward pass.

    ``keep_logits=False`` (RL, which needs only the sampled tokens' log-probs): ``logits`` is None
    and the log-probs come from ``common.head_token_logprobs``, a chunk of positions at a time, so
    a batch of long rollouts never holds its [B, T, vocabulary] logits. MOPD's divergences need
    the whole distribution and keep them. A wrapped model (DDP, DeepSpeed) is called through its
    own forward, which projects the positions from the earliest completion start to the latest end.
    """
    from botpsy.train.common import head_token_logprobs, hidden_after
    from botpsy.train.lora import bare_causal_lm

    ids, index, targets, mask = completion_batch(samples, pad_id)
    device = next(model.parameters()).device
    ids, index, targets, mask = ids.to(device), index.to(device), targets.to(device), mask.to(device)
    bare = bare_causal_lm(model)
    if hasattr(bare, "lm_head") and hasattr(bare, "model"):
        cut = int(index[:, 0].min()) if detach_prompt and torch.is_grad_enabled() else 0
        hidden = hidden_after(bare, ids, cut)
        picked = hidden.gather(1, (index - cut)[..., None].expand(-1, -1, hidden.shape[-1]))
        if not keep_logits:
            flat = head_token_logprobs(bare.lm_head, picked.reshape(-1, picked.shape[-1]), targets.reshape(-1))
            return Scored(logits=None, token_logprobs=flat.view_as(mask) * mask, mask=mask)
        logits = bare.lm_head(picked).float()
    else:  # a wrapped model (DDP / DeepSpeed): its own forward keeps gradient synchronisation,
        # and ``logits_to_keep`` projects only the span the completions cover, not the prompts
        start, stop = int(index.min()), int(index.max()) + 1
        span = model(input_ids=ids, logits_to_keep=torch.arange(start, stop, device=device)).logits
        logits = span.gather(1, (index - start)[..., None].expand(-1, -1, span.shape[-1])).float()
    token_logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0] * mask
    return Scored(logits=logits if keep_logits else None, token_logprobs=token_logprobs, mask=mask)


# --------------------------------------------------------------------------- batched call accuracy


def first_turn_calls(example: dict) -> list[dict] | None:
    """The gold calls of the example's first assistant turn ([] when it answers without calling; None: no turn)."""
    for message in example["messages"]:
        if message.get("role") == "assistant":
            return message.get("tool_calls") or []
    return None


def call_examples(rows: list[dict], n: int) -> list[dict]:
    """The first ``n`` rows that have an assistant turn (what ``first_turn_accuracy`` scores)."""
    return [r for r in rows if first_turn_calls(r) is not None][:n]


def first_turn_accuracy(model, tokenizer, examples: list[dict], max_new_tokens: int = 160, batch_size: int = 16) -> dict:
    """``dev_eval.call_accuracy`` (batched greedy) plus the first turns that should call nothing.

    Examples whose first turn calls tools are scored by ``dev_eval.call_accuracy`` (rates over
    ``call_examples``). Examples whose first turn answers without a call (most special cases: ask
    for a missing detail, refuse, explain) count as right when the greedy output parses and calls
    nothing (``no_call_rate`` over ``no_call_examples``). ``first_turn_rate`` is the share of all
    first turns right by either rule.
    """
    from botpsy.chat.parse import parse_output
    from botpsy.train.dev_eval import call_accuracy

    calling = [e for e in examples if first_turn_calls(e)]
    silent = [e for e in examples if first_turn_calls(e) == []]
    scores = call_accuracy(model, tokenizer, calling, max_new_tokens, batch_size)
    samples = sample_batch(model, tokenizer, [first_turn_prompt(e) for e in silent], max_new_tokens=max_new_tokens,
                           temperature=0, batch_size=batch_size) if silent else []
    right = 0
    for example, sample in zip(silent, samples):
        parsed = parse_output(sample.text, example.get("tools") or [], thinking=bool(example.get("thinking", True)))
        right += int(parsed.ok and not parsed.tool_calls)
    exact = round(scores["exact_call_rate"] * scores["call_examples"])
    return {**scores, "no_call_examples": len(silent), "no_call_rate": right / max(1, len(silent)),
            "first_turn_rate": (exact + right) / max(1, len(calling) + len(silent))}


# --------------------------------------------------------------------------- endpoints


def check_endpoint(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """An OpenAI-compatible base URL (``http(s)://host[:port]/v1``): well formed, and what ``GET /models`` says."""
    parts = urllib.parse.urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--rollout-endpoint {url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")
    base = url.rstrip("/")
    try:
        with urllib.request.urlopen(base + "/models", timeout=timeout_s) as response:
            body = json.loads(response.read().decode("utf-8"))
        models = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
        return {"url": base, "reachable": True, "models": models, "completions": base + "/completions"}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"url": base, "reachable": False, "error": str(getattr(exc, "reason", exc))}
