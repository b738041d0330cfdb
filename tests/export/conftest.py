"""Fixtures for the export tests: a briefly trained default-spec model and its exported GGUFs.

The model is the default 4-layer spec (three Gated-DeltaNet layers, one attention layer,
4 key / 8 value linear heads, so value-head tiling is exercised). Six AdamW steps on the
parity texts make its greedy continuations real text (an untrained model repeats one
token), so the greedy-text comparison means something. (Fewer texts trained harder, e.g.
eight steps at 5e-3 on 90 tokens, overfit into near-flat logits elsewhere whose top-1 flips
under any rounding: Q8_0 then misses 99% while its KL stays at 6e-4.)

Torch runs single-threaded here: these tensors are tiny, and on a busy 2-core machine two
spinning threads made a training step ten times slower than one.
"""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE_TEXTS, train_briefly


@pytest.fixture(scope="package", autouse=True)
def single_torch_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="package")
def hybrid_checkpoint(tmp_path_factory, tiny_tokenizer):
    """The default-spec reference model, trained for six steps and saved."""
    from botpsy.export.parity import MIXED_TEXTS, chat_texts
    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.model.reference import ModelSpec, build_model

    # transformers' DeltaNet init: six steps from it give varied greedy text, so greedy parity
    # compares real continuations (the log-uniform default collapses to one token here).
    model = build_model(ModelSpec(), tiny_tokenizer, seed=0, decay_init="transformers")
    texts = SAMPLE_TEXTS[:6] + list(MIXED_TEXTS.values()) + [chat_texts()["chat"]]
    loss = train_briefly(model, tiny_tokenizer, texts, steps=6, lr=3e-3)
    path = tmp_path_factory.mktemp("hybrid") / "sft"
    save_checkpoint(model, tiny_tokenizer, path, stage="sft", meta={"test_train_loss": loss})
    return path


@pytest.fixture(scope="package")
def exported(tmp_path_factory, hybrid_checkpoint):
    """(meta.json record, folder) of ``botpsy export`` on the hybrid checkpoint, the three release formats."""
    from botpsy.export.command import ExportConfig, export_checkpoint

    out = tmp_path_factory.mktemp("gguf")
    record = export_checkpoint(ExportConfig(checkpoint=str(hybrid_checkpoint), out=str(out), threads=1))
    return record, out
