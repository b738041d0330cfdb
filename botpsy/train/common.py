"""Pieces every training stage shares: batching, the LR schedule, resumable state, curves.

Resumption is exact: the model, optimizer, scheduler, RNG states and the position in the
data order are saved together (through ``accelerate``'s ``save_state``, which also handles
DeepSpeed / FSDP shards), and the data order is a pure function of the seed and epoch.
A killed run restarted with the same config ends with the same weights as one that never
stopped (tested).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.utils.checkpoint

from botpsy.train.encode import IGNORE, Encoded

DTYPES = ("auto", "float32", "bfloat16")


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` (empty where there is none, e.g. macOS)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    return {flag for line in cpuinfo.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[1].split()}


def resolve_dtype(dtype: str, cuda: bool | None = None, flags: set[str] | None = None) -> str:
    """``auto``: bfloat16 where the hardware computes it natively, else float32; other names pass through.

    bfloat16 halves the memory of the frozen weights and, on a CPU with AVX-512 BF16 or AMX, trains
    the 0.5B student's LoRA about 2.5x faster than float32 (250 against 104 tokens/s, Intel, 2 cores).
    A CPU without them emulates it: on an AMD EPYC with AVX2 only (2 cores, 2026-12-07) not one
    4,096-token SFT step of the student finished in 14 minutes in bfloat16, where float32 takes 50 s.

    >>> resolve_dtype("auto", cuda=False, flags={"avx2", "avx512_bf16"})
    'bfloat16'
    >>> resolve_dtype("auto", cuda=False, flags={"avx2"})
    'float32'
    >>> resolve_dtype("float32", cuda=True)
    'float32'
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    if dtype != "auto":
        return dtype
    if cuda is None:
        cuda = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if cuda:
        return "bfloat16"
    flags = cpu_flags() if flags is None else flags
    return "bfloat16" if flags & {"avx512_bf16", "amx_bf16"} else "float32"


def token_budget_batches(items: list[Encoded], max_tokens: int, seed: int, epoch: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, each at most ``max_tokens`` padded tokens.

    Similar lengths waste little padding (packing across examples would leak the recurrent
    Gated-DeltaNet state between unrelated conversations). Order is shuffled per epoch.
    """
    rng = random.Random(seed * 1_000_003 + epoch)
    order = sorted(range(len(items)), key=lambda i: (len(items[i].input_ids), rng.random()))
    batches, current, longest = [], [], 0
    for i in order:
        n = len(items[i].input_ids)
        if current and max(longest, n) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(items: list[Encoded], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids`` and ``labels`` (padding never carries loss)."""
    width = max(len(x.input_ids) for x in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    labels = torch.full((len(items), width), IGNORE, dtype=torch.long)
    for row, item in enumerate(items):
        ids[row, : len(item.input_ids)] = torch.tensor(item.input_ids)
        labels[row, : len(item.labels)] = torch.tensor(item.labels)
    return ids, labels


def causal_lm_loss(model, input_ids: torch.Tensor, labels: torch.Tensor, detach_context: bool = False) -> torch.Tensor:
    """Mean next-token loss over labelled positions, projecting only those to the vocabulary.

    Equal to ``model(input_ids, labels=labels).loss``, but the LM head runs on the few
    positions that carry loss (under 10% of an agent trajectory: the rest is system prompt,
    tools and tool results), which saves a fifth of a tiny model's step and the full
    [batch, length, vocab] logits tensor. ``model`` is the ``*ForCausalLM`` or a ``peft``
    wrapper of it (callers under multi-process accelerate use the model's own loss instead).

    ``detach_context``: the context before the first labelled token of the batch (system prompt,
    tools, request: about nine tenths of a first-turn example) is encoded forward-only, without
    gradient, and the rest attends to its cached keys and values. The adapter still shapes how
    the context is encoded; it just learns only from positions from the first answer on. On the
    0.5B student this makes a step about 2.5x faster (``README``, real student).
    """
    from botpsy.train.lora import bare_causal_lm

    model = bare_causal_lm(model)
    cut = first_label_cut(labels) if detach_context else 0
    hidden, targets = hidden_after(model, input_ids, cut)[:, :-1], labels[:, cut + 1:]
    keep = targets != IGNORE
    return head_loss(model.lm_head, hidden[keep], targets[keep])


LOSS_CHUNK = 512  # labelled positions projected to the vocabulary at a time


def head_loss(lm_head, hidden: torch.Tensor, targets: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """Mean cross-entropy of ``lm_head(hidden)`` against ``targets``, ``chunk`` (default ``LOSS_CHUNK``) positions at a time.

    A batch of everyday answers is labelled almost everywhere, and its logits over Qwen's 151,936
    tokens, with their float32 copies and gradients, ran the 0.5B student out of 23 GB on a 4,096-token
    batch. Each chunk's logits are recomputed in the backward pass instead of kept
    (``torch.utils.checkpoint``), so the peak is one chunk's logits; a batch with at most ``chunk``
    labelled positions (most agent batches) takes the plain path. Same value and gradients.
    """
    return -head_token_logprobs(lm_head, hidden, targets, chunk).sum() / len(targets)


def head_token_logprobs(lm_head, hidden: torch.Tensor, targets: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """Log-prob of each ``targets`` token under ``lm_head(hidden)`` (``hidden`` [N, H], ``targets`` [N]),
    ``chunk`` positions at a time and recomputed in the backward pass (what ``head_loss`` sums): the peak is one
    chunk's logits, not [N, vocabulary] with its float32 and softmax copies (RL's rollouts of up to a
    thousand tokens, four to a batch, would hold some 2.4 GB of each). Same values and gradients."""
    n, chunk = len(targets), chunk or LOSS_CHUNK
    parts = [(hidden[s:s + chunk], targets[s:s + chunk]) for s in range(0, max(n, 1), chunk)]
    if len(parts) > 1 and torch.is_grad_enabled():  # one chunk's logits at a time, recomputed in backward
        return torch.cat([torch.utils.checkpoint.checkpoint(_token_logprobs, lm_head, h, t, use_reentrant=False)
                          for h, t in parts])
    return torch.cat([_token_logprobs(lm_head, h, t) for h, t in parts])


def _token_logprobs(lm_head, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return -torch.nn.functional.cross_entropy(lm_head(hidden).float(), targets, reduction="none")


def attention_only(model) -> bool:
    """Are all of the model's layers attention layers (Qwen2), none recurrent (Qwen3.5's Gated DeltaNet)?"""
    return all(t in ("full_attention", "sliding_attention") for t in getattr(model.config, "layer_types", None) or [])


def hidden_after(model, input_ids: torch.Tensor, cut: int) -> torch.Tensor:
    """Last hidden states of positions ``cut`` onwards of a bare ``*ForCausalLM``; the first ``cut``
    positions are encoded without gradient and cached, and the rest attends to them (``cut`` 0:
    one ordinary forward pass).

    Only for attention-only models: a recurrent layer updates its cached state in place, which the
    backward pass then finds modified, so a hybrid model gets the ordinary pass (all positions,
    sliced to ``cut`` onwards; same values, gradient through the context too).

    Rows whose first ``cut`` tokens are the same (a GRPO group's rollouts of one prompt) have that
    context encoded once; the cache is then copied to each of them."""
    if cut <= 0 or not attention_only(model):
        return model.model(input_ids=input_ids).last_hidden_state[:, max(cut, 0):]
    contexts, row_of = torch.unique(input_ids[:, :cut], dim=0, return_inverse=True)
    with torch.no_grad():
        context = model.model(input_ids=contexts, use_cache=True)
    cache = getattr(context, "cache", None) or context.past_key_values
    if not torch.equal(row_of, torch.arange(len(input_ids), device=row_of.device)):  # copied, or sorted by unique
        cache.reorder_cache(row_of)
    return model.model(input_ids=input_ids[:, cut:], cache=cache, use_cache=True).last_hidden_state


def first_label_cut(labels: torch.Tensor) -> int:
    """How many leading positions no row needs gradient for: up to the token before the first label."""
    labelled = (labels != IGNORE).any(0).nonzero()
    return max(0, int(labelled[0]) - 1) if len(labelled) else 0


def cosine_with_warmup(warmup_steps: int, total_steps: int, min_ratio: float):
    """LR multiplier: linear warm-up, then cosine decay to ``min_ratio``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


@dataclass
class Progress:
    """Where a run is: registered with accelerate so it is saved and restored with the weights."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    tokens_seen: int = 0

    def state_dict(self) -> dict:
        return dict(vars(self))

    def load_state_dict(self, state: dict) -> None:
        for key, value in state.items():
            setattr(self, key, value)


def save_training_state(accelerator, out: Path) -> None:
    """Write the resumable state atomically: a kill during the write leaves the old state."""
    final = out / "train_state"
    tmp = out / "train_state.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    accelerator.save_state(str(tmp))
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def load_training_state(accelerator, out: Path) -> bool:
    state = out / "train_state"
    if not state.is_dir():
        return False
    accelerator.load_state(str(state))
    return True


class CurveWriter:
    """Appends one JSON object per logged step to ``curves.jsonl`` (read by the report)."""

    def __init__(self, path: Path, resume_from_step: int):
        self.path = path
        if path.exists():
            # Drop lines past the restored step so a resumed run does not log twice.
            kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= resume_from_step]
            path.write_text("".join(line + "\n" for line in kept))

    def write(self, record: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")


class Throughput:
    """Tokens per second over the run (shown in the progress bar)."""

    def __init__(self):
        self.start, self.tokens = time.perf_counter(), 0

    def add(self, n: int) -> float:
        self.tokens += n
        return self.tokens / max(1e-9, time.perf_counter() - self.start)
