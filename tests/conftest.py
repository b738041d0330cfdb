"""Shared fixtures: a tiny tokenizer and reference model, and a small `botpsy data` folder, built offline once per session."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `botpsy chat` and `serve` keep prefix states on disk by default; tests never write to the user's cache.
os.environ["BOTPSY_PREFIX_STATES"] = tempfile.mkdtemp(prefix="botpsy-test-prefix-states-")
atexit.register(shutil.rmtree, os.environ["BOTPSY_PREFIX_STATES"], True)

SAMPLE_TEXTS = [
    "Set an alarm for 7:30 tomorrow and call it gym.",
    "Send a message to Alice saying I'll be late.",
    '{"name": "set_alarm", "arguments": {"hour": 7, "minute": 30}}',
    "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n</function>\n</tool_call>",
    "The user wants an alarm. I will call set_alarm with the hour and minute.",
    "请帮我明天早上七点叫醒我。",
] * 20


def _shared_data_missing() -> bool:
    from botpsy.eval.instructions.agreement import default_data_dir

    return not (default_data_dir() / "ifeval" / "input_data.jsonl").is_file()


# IFEval / IFBench prompts ship inside the package (botpsy/evaldata); $BOTPSY_DATA_DIR may point
# elsewhere. Tests that read them still say so and skip if a pointed-to copy lacks them.
needs_shared_data = pytest.mark.skipif(_shared_data_missing(), reason="IFEval/IFBench data not found (botpsy/evaldata or $BOTPSY_DATA_DIR)")


def write_task_splits(folder, counts: dict[str, int], seed: int):
    """``folder``/{split}.jsonl with ``counts[split]`` device-world tasks each, as `botpsy tasks` writes them."""
    from botpsy.world import generate_tasks

    folder.mkdir(parents=True, exist_ok=True)
    for split, n in counts.items():
        (folder / f"{split}.jsonl").write_text("".join(t.to_json() + "\n" for t in generate_tasks(split, n, seed=seed)))
    return folder


def train_briefly(model, tokenizer, texts: list[str], steps: int, lr: float, seq_len: int | None = None) -> float:
    """A few full-batch next-token steps on ``texts`` joined with <|endoftext|>, so greedy outputs are
    not one repeated token; one row, or rows of ``seq_len`` tokens. Returns the last loss."""
    import torch

    torch.manual_seed(0)
    ids = torch.tensor(tokenizer("<|endoftext|>".join(texts))["input_ids"])
    batch = ids[None] if seq_len is None else ids[: len(ids) // seq_len * seq_len].view(-1, seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return loss.item()


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory):
    from botpsy.model.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(SAMPLE_TEXTS, vocab_size=512)
    path = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(str(path))
    tokenizer.path = path
    return tokenizer


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tiny_tokenizer):
    """A saved, untrained two-layer reference model (one Gated DeltaNet, one attention layer)."""
    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.model.reference import ModelSpec, build_model

    spec = ModelSpec(num_hidden_layers=2, full_attention_interval=2)
    model = build_model(spec, tiny_tokenizer, seed=0)
    path = tmp_path_factory.mktemp("ckpt") / "base"
    save_checkpoint(model, tiny_tokenizer, path, stage="base", meta={"spec": "test"})
    return path


@pytest.fixture(scope="session")
def device_data(tmp_path_factory):
    """A `botpsy data` folder (train.jsonl, dev, test, corpus.txt, meta.json) of 120 / 20 / 20 seed-3 tasks. Read it; do not write into it."""
    from botpsy.cli import main as cli_main

    root = tmp_path_factory.mktemp("device_data")
    tasks = write_task_splits(root / "tasks", {"train": 120, "dev": 20, "test": 20}, seed=3)
    assert cli_main(["data", "--tasks", str(tasks), "--out", str(root / "data")]) == 0
    return root / "data"
