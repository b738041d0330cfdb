"""A tiny randomly initialised Qwen2 model, written as a GGUF file: the real student's family at test size.

The real student is Qwen2.5-Coder-0.5B, pulled as a GGUF; the tests build a model of the same
architecture (attention biases, untied head) with botpsy's tiny tokenizer, train it a few steps so
its greedy text is not one repeated token, and write it with botpsy's GGUF writer. Loading that
file goes through the same transformers GGUF path as the real base.
"""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE_TEXTS, train_briefly
from tests.export.conftest import single_torch_thread  # noqa: F401  (autouse: torch on one thread, as there)


def tiny_qwen2(tokenizer, seed: int = 0, hidden_size: int = 256):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384,
                         tie_word_embeddings=False, rms_norm_eps=1e-6, rope_theta=10000.0)
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="package")
def qwen2_gguf(tmp_path_factory, tiny_tokenizer):
    """(path of a float32 qwen2 GGUF, the trained transformers model it was written from)."""
    from botpsy.export.gguf_writer import write_gguf

    model = tiny_qwen2(tiny_tokenizer)
    train_briefly(model, tiny_tokenizer, SAMPLE_TEXTS[:6], steps=6, lr=3e-3)
    path = tmp_path_factory.mktemp("qwen2") / "tiny-qwen2.gguf"
    write_gguf(model, tiny_tokenizer, path, name="tiny-qwen2")
    return path, model


@pytest.fixture(scope="package")
def student_sft(qwen2_gguf, device_data, tmp_path_factory):
    """`botpsy sft` with LoRA from the GGUF base: the folder it writes."""
    from botpsy.cli import main as cli_main

    path, _ = qwen2_gguf
    out = tmp_path_factory.mktemp("student") / "sft"
    status = cli_main(["sft", "--init", str(path), "--data", str(device_data), "--out", str(out), "--steps", "3",
                       "--batch-tokens", "8192", "--max-length", "8192", "--lora-rank", "4", "--lora-alpha", "8",
                       "--detach-context", "--lr", "1e-2", "--warmup-steps", "1", "--eval-every", "0",
                       "--eval-examples", "2", "--no-eval-tool-choice", "--test-examples", "2", "--eval-max-new-tokens", "8",
                       "--dev-loss-sequences", "2", "--threads", "1"])
    assert status == 0
    return out
