"""Can a model of this architecture learn to copy at a given learning rate? A quick trainability probe.

An assistant has to copy: the time, name or order id in the request must reappear in the call.
The probe trains a freshly built model on the smallest task that needs it, repeating a random
string, ``<a> x1 .. xk <b> x1 .. xk`` with loss on the repeat, and reports the copy accuracy.

It found a trap in the speedrun's SFT learning rate (``bench/copy_probe.py``,
``bench_out/copy_probe.json``): at a peak of 2e-3 or 3e-3 the 3:1 hybrid model (three Gated
DeltaNet layers, one attention layer) never learns to copy within 150 steps (accuracy stays at
chance, loss at ln(alphabet)), while at 1e-3 it learns it in 75; an all-attention model learns
it at all three rates. In the failing runs the residual stream grows to tens or hundreds of times
the token embeddings; the all-attention model's grows as much and it still copies, so that
growth is a symptom to watch, not a proven cause. ``residual_norms`` shows it on any checkpoint:
the root-mean-square of the embeddings next to that of the residual stream after each layer.

That task can be solved without looking tokens up: the repeat always sits a fixed distance
after the original, and the string's tokens come from another range than the filler, so a
model can copy by position. ``induction_batch`` removes both shortcuts: filler and string are
drawn from the same alphabet, and a random gap separates the two copies, so only matching each
token to its earlier occurrence (an induction head) predicts the next one. That is what carrying
a value from a request into a call needs. On that task (gap 16, 800 steps of 16 rows at 1e-3,
``bench_out/induction_probe_*.json``) the 3:1 hybrid ``tiny`` model stayed at chance (0.9% at
the end, 1% is chance) and the all-attention one had only begun (7.6%). Those runs used AdamW's
default beta2 of 0.999; at SFT's 0.95 and 64 rows a step the hybrid reached 63% in 600 steps
(``bench_out/induction_probe_hybrid_batch64_beta95.json``).

``vocabulary_induction_batch`` draws the strings from a real tokenizer's whole vocabulary instead
(``bench/vocab_induction_probe.py``): by the speedrun corpus's token frequencies the ``tiny`` base
learns it (86% after 1,000 steps of 16 rows), uniformly over 4,078 ids it did not in 750.

>>> batch = copy_batch(__import__("torch").Generator().manual_seed(0), n=2, length=3)
>>> batch[0].shape, int((batch[1] != -100).sum())
(torch.Size([2, 8]), 6)
>>> ids, labels = induction_batch(__import__("torch").Generator().manual_seed(0), n=2, length=3, gap=4)
>>> ids.shape, int((labels != -100).sum())  # 2 rows of 4 filler + 2 copies; all but each repeat's first token
(torch.Size([2, 10]), 4)
>>> ids, labels = rotation_batch(__import__("torch").Generator().manual_seed(0), n=2, length=5)
>>> ids.shape, int((labels != -100).sum()), sorted(ids[0, :5].tolist()) == sorted(ids[0, 5:].tolist())
(torch.Size([2, 10]), 8, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from botpsy.train.encode import IGNORE

ALPHABET = range(100, 200)  # token ids to copy (any ids in the vocabulary will do)
FILLER = range(300, 400)  # distracting prefix tokens
OPEN, SEP = 5, 6


def copy_batch(gen: torch.Generator, n: int = 32, length: int = 8, prefix: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids ``OPEN [prefix random filler] x SEP x`` and labels that score only the repeated ``x``.

    ``prefix`` puts distracting tokens (from another range) before the string, as the tools and
    instructions come before a request in a trajectory.
    """
    x = torch.randint(ALPHABET.start, ALPHABET.stop, (n, length), generator=gen)
    filler = torch.randint(FILLER.start, FILLER.stop, (n, prefix), generator=gen)
    ids = torch.cat([torch.full((n, 1), OPEN), filler, x, torch.full((n, 1), SEP), x], 1)
    labels = ids.clone()
    labels[:, : prefix + length + 2] = IGNORE
    return ids, labels


def induction_batch(gen: torch.Generator, n: int = 32, length: int = 8, gap: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``[filler a] x [filler b] x`` with ``a + b = gap``, ``b`` uniform in 1..gap, all tokens from
    ``ALPHABET``; labels score the repeat's tokens after its first (which nothing predicts)."""
    rows = []
    for _ in range(n):
        b = int(torch.randint(1, gap + 1, (1,), generator=gen)) if gap else 0
        x = torch.randint(ALPHABET.start, ALPHABET.stop, (length,), generator=gen)
        filler = torch.randint(ALPHABET.start, ALPHABET.stop, (gap,), generator=gen)
        rows.append(torch.cat([filler[: gap - b], x, filler[gap - b:], x]))
    ids = torch.stack(rows)
    labels = torch.full_like(ids, IGNORE)
    labels[:, -(length - 1):] = ids[:, -(length - 1):]
    return ids, labels


def rotation_batch(gen: torch.Generator, n: int = 32, length: int = 48, prefix: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``[prefix filler] x roll(x, -s)``: ``x`` is ``length`` distinct ``ALPHABET`` tokens, the
    repeat starts at a random offset ``s`` (1..length-1) and wraps around.

    A denser induction task than ``induction_batch``: every token of the repeat after its first
    is predicted by finding the token before it in ``x`` (the tokens are distinct, so the answer is
    unique), and the distance back varies from row to row. A row scores ``length - 1`` tokens, not
    ``length - 1`` of ``2 * length + gap``. ``prefix`` puts filler tokens (another range) in front.
    """
    if not 1 < length <= len(ALPHABET):
        raise ValueError(f"length must be in 2..{len(ALPHABET)}, got {length}")
    rows = []
    for _ in range(n):
        x = torch.randperm(len(ALPHABET), generator=gen)[:length] + ALPHABET.start
        shift = int(torch.randint(1, length, (1,), generator=gen))
        filler = torch.randint(FILLER.start, FILLER.stop, (prefix,), generator=gen)
        rows.append(torch.cat([filler, x, torch.roll(x, -shift)]))
    ids = torch.stack(rows)
    labels = torch.full_like(ids, IGNORE)
    labels[:, -(length - 1):] = ids[:, -(length - 1):]
    return ids, labels


def vocabulary_alphabet(tokenizer) -> torch.Tensor:
    """Every id of ``tokenizer`` that is not a special or markup token (nothing starting with ``<``), sorted."""
    markup = set(tokenizer.all_special_ids) | {i for t, i in tokenizer.get_vocab().items() if t.startswith("<")}
    return torch.tensor(sorted(set(range(len(tokenizer))) - markup))


def corpus_weights(tokenizer, alphabet: torch.Tensor, text: str) -> torch.Tensor:
    """Sampling weights for ``alphabet``: each id's count in ``text`` plus 0.1 (so unseen ids stay possible)."""
    from collections import Counter

    counts = Counter(tokenizer(text)["input_ids"])
    return torch.tensor([float(counts.get(int(i), 0)) + 0.1 for i in alphabet])


def corpus_sampler(tokenizer, corpus, chars: int = 2_000_000) -> tuple[torch.Tensor, torch.Tensor]:
    """``(alphabet, weights)`` for ``vocabulary_induction_batch``: ``tokenizer``'s non-markup ids, weighted by
    their counts in the first ``chars`` characters of the file ``corpus`` (``botpsy data``'s corpus.txt)."""
    from pathlib import Path

    corpus = Path(corpus)
    if not corpus.is_file():
        raise FileNotFoundError(f"{corpus} does not exist; `botpsy data` writes it beside train.jsonl")
    alphabet = vocabulary_alphabet(tokenizer)
    return alphabet, corpus_weights(tokenizer, alphabet, corpus.read_text(encoding="utf-8")[:chars])


def vocabulary_induction_batch(gen: torch.Generator, alphabet: torch.Tensor, weights: torch.Tensor | None = None,
                               n: int = 16, blocks: int = 4, gap: int = 16,
                               pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``induction_batch`` over a real vocabulary: each row is ``blocks`` blocks ``[filler a] x [filler b] x``.

    ``x`` is 3-8 tokens, ``a + b = gap`` with ``b`` uniform in 1..gap, and every token is drawn from
    ``alphabet`` (uniformly, or by ``weights``, e.g. ``corpus_weights``: the speedrun's own token
    frequencies). Labels score each repeat after its first token. A row carries the state of its
    earlier blocks, as a trajectory carries its tools block into the request. Rows are right-padded.
    """
    def draw(count: int) -> torch.Tensor:
        if weights is None:
            return alphabet[torch.randint(0, len(alphabet), (count,), generator=gen)]
        return alphabet[torch.multinomial(weights, count, replacement=True, generator=gen)]

    rows, row_labels = [], []
    for _ in range(n):
        parts, labels = [], []
        for _ in range(blocks):
            length = int(torch.randint(3, 9, (1,), generator=gen))
            b = int(torch.randint(1, gap + 1, (1,), generator=gen))
            x, filler = draw(length), draw(gap)
            part = torch.cat([filler[: gap - b], x, filler[gap - b:], x])
            label = torch.full_like(part, IGNORE)
            label[-(length - 1):] = x[1:]
            parts.append(part)
            labels.append(label)
        rows.append(torch.cat(parts))
        row_labels.append(torch.cat(labels))
    width = max(len(r) for r in rows)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    out = torch.full((n, width), IGNORE, dtype=torch.long)
    for i, (row, label) in enumerate(zip(rows, row_labels)):
        ids[i, : len(row)], out[i, : len(label)] = row, label
    return ids, out


BATCHES = {"copy": copy_batch, "induction": induction_batch, "rotation": rotation_batch}


@torch.no_grad()
def copy_accuracy(model, gen: torch.Generator, n: int = 64, length: int = 8, prefix: int = 0, task: str = "copy") -> float:
    """Share of repeated tokens the model predicts (argmax, teacher-forced)."""
    return repeat_accuracy(model, *BATCHES[task](gen, n, length, prefix))


@torch.no_grad()
def repeat_accuracy(model, ids: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of labelled tokens that are the model's argmax next token (teacher-forced)."""
    predicted = model(input_ids=ids).logits[:, :-1].argmax(-1)
    keep = labels[:, 1:] != IGNORE
    return float((predicted[keep] == labels[:, 1:][keep]).float().mean())


@torch.no_grad()
def residual_norms(model, input_ids: torch.Tensor) -> list[float]:
    """RMS of the embeddings, then of the residual stream after each layer (the last is normed)."""
    out = model(input_ids=input_ids, output_hidden_states=True)
    return [float(h.float().pow(2).mean().sqrt()) for h in out.hidden_states]


@dataclass
class ProbeResult:
    lr: float
    steps: int
    accuracy: list[tuple[int, float]]  # (step, copy accuracy)
    norms: list[float]  # residual_norms at the end
    steps_to_95: int | None  # first evaluated step with accuracy >= 0.95

    @property
    def final_accuracy(self) -> float:
        return self.accuracy[-1][1]


def copy_probe(model, lr: float, steps: int = 150, every: int = 25, seed: int = 0, grad_clip: float = 1.0,
               length: int = 8, prefix: int = 0, batch: int = 32, task: str = "copy", beta2: float = 0.999) -> ProbeResult:
    """Train ``model`` on the copy task with AdamW at ``lr`` (clipped like SFT) and track accuracy.

    ``task="induction"`` trains on ``induction_batch`` instead, with ``prefix`` as its gap;
    ``task="rotation"`` on ``rotation_batch``.
    """
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, beta2))
    curve, reached = [], None
    model.train()
    for step in range(1, steps + 1):
        ids, labels = BATCHES[task](gen, batch, length, prefix)
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        if step % every == 0 or step == steps:
            model.eval()
            accuracy = copy_accuracy(model, gen, length=length, prefix=prefix, task=task)
            model.train()
            curve.append((step, accuracy))
            if reached is None and accuracy >= 0.95:
                reached = step
    model.eval()
    norms = residual_norms(model, BATCHES[task](gen, 4, length, prefix)[0])
    return ProbeResult(lr, steps, curve, norms, reached)
