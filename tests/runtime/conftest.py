"""Fixtures for the runtime backend tests: a briefly trained hybrid checkpoint and its GGUF exports.

The checkpoint is the two-layer reference spec (one Gated DeltaNet layer, one attention
layer: the hybrid architecture whose recurrent state cannot be truncated). Eight AdamW
steps on chat-formatted texts make its greedy continuations decisive and varied; an
untrained model repeats one token, which would make greedy comparisons mean little.
"""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE_TEXTS, train_briefly

CHAT_TEXTS = [
    "<|im_start|>user\nSet an alarm for 7:30.<|im_end|>\n<|im_start|>assistant\n<think>\nThe user wants an alarm."
    "\n</think>\n\n<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n</function>\n"
    "</tool_call><|im_end|>\n",
    "<|im_start|>user\n请帮我明天早上七点叫醒我。<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n好的。<|im_end|>\n",
]


@pytest.fixture(scope="session")
def runtime_checkpoint(tmp_path_factory, tiny_tokenizer):
    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.model.reference import ModelSpec, build_model

    model = build_model(ModelSpec(num_hidden_layers=2, full_attention_interval=2), tiny_tokenizer, seed=0)
    loss = train_briefly(model, tiny_tokenizer, SAMPLE_TEXTS[:6] + CHAT_TEXTS, steps=8, lr=1e-2, seq_len=64)
    path = tmp_path_factory.mktemp("runtime") / "sft"
    save_checkpoint(model, tiny_tokenizer, path, stage="sft", meta={"test_train_loss": loss})
    return path


@pytest.fixture(scope="session")
def runtime_ggufs(tmp_path_factory, runtime_checkpoint):
    """{"f32": path, "q8_0": path} exported by ``botpsy export``."""
    from botpsy.export.command import ExportConfig, export_checkpoint

    out = tmp_path_factory.mktemp("runtime_gguf")
    export_checkpoint(ExportConfig(checkpoint=str(runtime_checkpoint), out=str(out), formats="f32,q8_0", threads=2))
    return {"f32": out / "model-f32.gguf", "q8_0": out / "model-q8_0.gguf"}


@pytest.fixture(scope="session")
def llama_f32(runtime_ggufs):
    from botpsy.runtime.backend import BackendOptions
    from botpsy.runtime.llama_backend import LlamaBackend

    # One thread: on a busy machine llama.cpp's worker threads wait on each other at every op.
    backend = LlamaBackend(runtime_ggufs["f32"], BackendOptions(threads=1, n_ctx=1024, prefix_cache_mb=64))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def hf_backend(runtime_checkpoint):
    from botpsy.runtime.backend import BackendOptions
    from botpsy.runtime.hf_backend import HFBackend

    return HFBackend(runtime_checkpoint, BackendOptions(threads=0, n_ctx=1024))  # 0: leave torch's threads alone
