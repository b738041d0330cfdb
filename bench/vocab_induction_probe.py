"""Does the speedrun's base learn induction over its own vocabulary, and how fast?

    .venv/bin/python bench/vocab_induction_probe.py --base runs/speedrun/base --data runs/speedrun/data \
        --sampler corpus --steps 1000 --threads 1 --out bench_out/vocab_induction_corpus.json
    .venv/bin/python bench/vocab_induction_probe.py --sampler uniform --steps 750 --out bench_out/vocab_induction_uniform.json

``bench/copy_probe.py --task induction`` draws strings from a 100-id alphabet. Values in a
trajectory come from the whole vocabulary, so this probe trains a real base checkpoint (its
tokenizer's vocabulary size, its initialisation) on ``botpsy.model.probe.vocabulary_induction_batch``:
rows of four ``[filler] x [filler] x`` blocks whose tokens are drawn from every non-markup id,
either uniformly (``--sampler uniform``, 4,078 ids for the speedrun's tokenizer) or by how often
each id occurs in the speedrun's tokenizer corpus (``--sampler corpus``: what the model will see;
the unigram perplexity is printed). Teacher-forced accuracy on the repeats is recorded every
``--every`` steps; with ``--sampler corpus`` the accuracy of always predicting the commonest id is
given beside it, since that much needs no copying. ``--save DIR`` keeps the trained checkpoint (a
base to start SFT from).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from botpsy.config import parse_config
from botpsy.output import table, write_benchmark


@dataclass
class VocabInductionConfig:
    """Induction over a base checkpoint's full vocabulary: accuracy by step."""

    base: str = field(default="runs/speedrun/base", metadata={"help": "Base checkpoint (botpsy init) to train."})
    data: str = field(default="runs/speedrun/data", metadata={"help": "Data folder whose corpus.txt gives the corpus sampler's frequencies."})
    sampler: str = field(default="corpus", metadata={"help": "How tokens are drawn: by corpus frequency or uniformly.", "choices": ["corpus", "uniform"]})
    corpus_chars: int = field(default=2_000_000, metadata={"help": "Characters of corpus.txt counted for the frequencies."})
    steps: int = field(default=1000, metadata={"help": "Training steps."})
    batch: int = field(default=16, metadata={"help": "Rows per step (four blocks each)."})
    gap: int = field(default=16, metadata={"help": "Filler tokens per block, split around the first copy."})
    lr: float = field(default=1e-3, metadata={"help": "AdamW learning rate (constant)."})
    every: int = field(default=50, metadata={"help": "Steps between accuracy checks (64 fresh rows each)."})
    seed: int = field(default=1, metadata={"help": "Seed of the row generator."})
    threads: int = field(default=1, metadata={"help": "torch threads."})
    save: str = field(default="", metadata={"help": "Write the trained model here as a checkpoint (stage 'base'); empty: do not."})
    out: str = field(default="bench_out/vocab_induction.json", metadata={"help": "Result JSON."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def run(config: VocabInductionConfig) -> dict:
    import dataclasses
    import time
    from pathlib import Path

    import torch

    from botpsy.model.checkpoint import load_checkpoint, save_checkpoint
    from botpsy.model.probe import corpus_sampler, repeat_accuracy, vocabulary_alphabet, vocabulary_induction_batch

    torch.set_num_threads(config.threads)
    checkpoint = load_checkpoint(config.base)
    model, tokenizer = checkpoint.model, checkpoint.tokenizer
    alphabet = vocabulary_alphabet(tokenizer)
    weights, perplexity, commonest = None, float(len(alphabet)), 1 / len(alphabet)
    if config.sampler == "corpus":
        alphabet, weights = corpus_sampler(tokenizer, Path(config.data) / "corpus.txt", config.corpus_chars)
        p = weights / weights.sum()
        perplexity, commonest = float(torch.exp(-(p * p.log()).sum())), float(p.max())
    gen = torch.Generator().manual_seed(config.seed)
    batch = lambda n: vocabulary_induction_batch(gen, alphabet, weights, n=n, gap=config.gap,  # noqa: E731
                                                 pad_id=tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01, betas=(0.9, 0.95))
    curve, start = [], time.perf_counter()
    model.train()
    for step in range(1, config.steps + 1):
        ids, labels = batch(config.batch)
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % config.every == 0 or step == config.steps:
            model.eval()
            accuracy = repeat_accuracy(model, *batch(64))
            model.train()
            curve.append([step, round(float(loss), 3), round(accuracy, 4)])
            print(f"[vocab_induction] step {step}: loss {float(loss):.3f}, repeat accuracy {accuracy:.3f}", file=sys.stderr, flush=True)
    if config.save:
        save_checkpoint(model, tokenizer, config.save, stage="base",
                        meta={"induction_pretraining": dataclasses.asdict(config), "source": config.base})
    return {"config": dataclasses.asdict(config), "alphabet_size": len(alphabet), "unigram_perplexity": round(perplexity, 1),
            "commonest_token_accuracy": round(commonest, 4), "curve_step_loss_accuracy": curve,
            "final_accuracy": curve[-1][2], "seconds": round(time.perf_counter() - start, 1)}


def human(result: dict) -> str:
    rows = [{"step": s, "loss": f"{loss:.3f}", "repeat accuracy": f"{acc:.3f}"} for s, loss, acc in result["curve_step_loss_accuracy"]]
    return table(rows) + (f"\nsampler {result['config']['sampler']}: {result['alphabet_size']} ids, unigram perplexity "
                          f"{result['unigram_perplexity']}, commonest-id accuracy {result['commonest_token_accuracy']:.3f}")


def main(argv: list[str] | None = None) -> int:
    config = parse_config(VocabInductionConfig, argv, prog="vocab_induction_probe")
    write_benchmark(run(config), config.out, config.json, human)
    return 0


if __name__ == "__main__":
    sys.exit(main())
