"""The transformers backend: a Hugging Face checkpoint folder, token by token with a KV/recurrent cache.

This is the one module that imports transformers for inference (through
``botpsy.model.checkpoint``). It runs teachers and un-exported checkpoints, and is the
reference the llama.cpp backend is checked against: with greedy sampling both must produce
the same tokens wherever the logits are not near-ties. Sampling follows llama.cpp's order
(penalties, top-k, top-p, min-p, temperature, draw) so the knobs mean the same on both.
There is no prefix cache here: every call prefills its whole prompt.

Example::

    backend = HFBackend("runs/speedrun/sft", BackendOptions(threads=2))
    text = "".join(t.text for t in backend.stream(prompt, SamplingConfig(temperature=0), 64))
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from botpsy.chat.constrain import outside
from botpsy.model.checkpoint import load_checkpoint
from botpsy.runtime.backend import (
    END_OF_TURN_TEXTS,
    Backend,
    BackendError,
    BackendOptions,
    Prompt,
    SamplingConfig,
    StreamInfo,
    TokenOut,
)


class HFBackend(Backend):
    name = "transformers"
    supports_constraint = True

    def __init__(self, checkpoint: str | Path, options: BackendOptions | None = None, dtype: str = "float32") -> None:
        self.options = options or BackendOptions()
        if self.options.threads > 0:
            torch.set_num_threads(self.options.threads)
        loaded = load_checkpoint(checkpoint, dtype=dtype)
        self.path = Path(checkpoint)
        self.model = loaded.model.eval()
        self.tokenizer = loaded.tokenizer
        known = set(self.tokenizer.get_vocab().values())
        ends = {self.tokenizer.convert_tokens_to_ids(text) for text in END_OF_TURN_TEXTS}
        ends.add(self.tokenizer.eos_token_id)
        self.end_ids = {i for i in ends if i in known}

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def token_table(self):
        from botpsy.chat.constrain import TokenTable

        if getattr(self, "_table", None) is None:
            self._table = TokenTable.from_tokenizer(self.tokenizer)
        return self._table

    @torch.inference_mode()
    def _stream(self, prompt: Prompt, sampling: SamplingConfig, max_tokens: int,
                prefix_tokens: int, info: StreamInfo, constraint=None) -> Iterator[TokenOut]:
        ids = self.prompt_ids(prompt)
        if not ids:
            raise BackendError("the prompt is empty")
        if len(ids) >= self.options.n_ctx:
            raise BackendError(f"the prompt has {len(ids)} tokens; the context holds {self.options.n_ctx}")
        max_tokens = min(max_tokens, self.options.n_ctx - len(ids))
        generator = torch.Generator().manual_seed(sampling.seed)
        start = time.perf_counter()
        out = self.model(torch.tensor([ids]), use_cache=True)
        info.prompt_tokens, info.prefill_ms = len(ids), (time.perf_counter() - start) * 1000
        history, pending = list(ids), []  # pending: ids of a character not yet complete
        generated = ""
        gate_at = getattr(constraint, "gate_at", None)
        for step in range(max_tokens):
            logits = out.logits[0, -1].float()
            allowed = constraint.allowed_ids(generated) if constraint is not None else None
            if allowed:
                logits = mask_logits(logits, allowed)
            gate = gate_at(generated) if gate_at is not None else None
            if gate is not None and gate.should_mask(logits.numpy()):
                logits = logits.clone()
                logits[torch.from_numpy(gate.call_ids)] = float("-inf")
            token = sample_token(logits, sampling, history, generator)
            history.append(token)
            end = token in self.end_ids
            pending.append(token)
            text = self.detokenize(pending)
            if text.endswith("\ufffd") and not (end or step == max_tokens - 1):
                text = ""  # a UTF-8 character split across tokens: wait for the rest of it
            else:
                pending = []
            generated += text
            yield TokenOut(token, text, logprob=float(torch.log_softmax(logits, -1)[token]))
            if end:
                info.finish_reason = "stop"
                return
            if step < max_tokens - 1:
                out = self.model(torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
        info.finish_reason = "length"

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": str(self.path)}


def mask_logits(logits: torch.Tensor, allowed: set[int] | frozenset[int]) -> torch.Tensor:
    """``logits`` with every token outside ``allowed`` at -inf (a copy). A shared (frozen) set
    drops its complement, built once (``constrain.outside``)."""
    if isinstance(allowed, frozenset):
        masked = logits.clone()
        masked[torch.from_numpy(outside(allowed, logits.shape[-1]))] = float("-inf")
        return masked
    keep = torch.tensor(sorted(allowed), dtype=torch.long)
    masked = torch.full_like(logits, float("-inf"))
    masked[keep] = logits[keep]
    return masked


def sample_token(logits: torch.Tensor, sampling: SamplingConfig, history: Sequence[int],
                 generator: torch.Generator) -> int:
    """One token from ``logits`` (1-D), llama.cpp's order: penalties, top-k, top-p, min-p, temperature."""
    logits = logits.clone()
    if sampling.has_penalties:
        seen = torch.tensor(sorted(set(history[-sampling.penalty_last_n:])), dtype=torch.long)
        values = logits[seen]
        values = torch.where(values > 0, values / sampling.repeat_penalty, values * sampling.repeat_penalty)
        logits[seen] = values - sampling.presence_penalty
    if sampling.greedy:
        return int(torch.argmax(logits))
    if 0 < sampling.top_k < logits.numel():
        kth = torch.topk(logits, sampling.top_k).values[-1]
        logits[logits < kth] = float("-inf")
    if sampling.top_p < 1.0:
        order = torch.argsort(logits, descending=True)
        cumulative = torch.cumsum(torch.softmax(logits[order], -1), -1)
        drop = cumulative - torch.softmax(logits[order], -1) >= sampling.top_p  # keep the token that crosses p
        logits[order[drop]] = float("-inf")
    if sampling.min_p > 0:
        probs = torch.softmax(logits, -1)
        logits[probs < sampling.min_p * probs.max()] = float("-inf")
    probs = torch.softmax(logits / sampling.temperature, -1)
    return int(torch.multinomial(probs, 1, generator=generator))
