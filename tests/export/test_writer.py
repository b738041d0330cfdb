"""botpsy's GGUF writer: tensor transforms, metadata, embedded tokenizer, and its refusals."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from botpsy.export.gguf_writer import (
    ExportError,
    gguf_architecture,
    gguf_tensors,
    quantization_problems,
    tile_value_heads,
    write_gguf,
)
from botpsy.model.reference import ModelSpec, build_model


@pytest.fixture(scope="module")
def hybrid_model(tiny_tokenizer):
    """An untrained two-layer model (one Gated DeltaNet, one attention layer), random norms and A."""
    import torch

    model = build_model(ModelSpec(num_hidden_layers=2, full_attention_interval=2), tiny_tokenizer, seed=1)
    with torch.no_grad():  # fresh norms are all zero offsets; make every transform visible
        for name, param in model.named_parameters():
            if param.ndim == 1:
                param.copy_(torch.randn_like(param) * 0.1)
    return model


@pytest.fixture(scope="module")
def written(tmp_path_factory, hybrid_model, tiny_tokenizer):
    import gguf

    path = write_gguf(hybrid_model, tiny_tokenizer, tmp_path_factory.mktemp("writer") / "model-f32.gguf")
    return gguf.GGUFReader(str(path))


def meta(reader, key):
    return reader.fields[key].contents()


def test_transforms_match_llama_cpp_conventions(hybrid_model):
    state = {k: v.float().numpy() for k, v in hybrid_model.state_dict().items()}
    out = {t.name: t.data for t in gguf_tensors(hybrid_model)}
    config = hybrid_model.config
    n_k, n_v = config.linear_num_key_heads, config.linear_num_value_heads
    r = n_v // n_k
    tiled = [g * r + t for t in range(r) for g in range(n_k)]  # position -> original value head

    np.testing.assert_array_equal(out["blk.0.ssm_a"], -np.exp(state["model.layers.0.linear_attn.A_log"])[tiled])
    np.testing.assert_array_equal(out["blk.0.ssm_dt.bias"], state["model.layers.0.linear_attn.dt_bias"][tiled])
    np.testing.assert_array_equal(out["blk.0.attn_norm.weight"], state["model.layers.0.input_layernorm.weight"] + 1)
    np.testing.assert_array_equal(out["blk.1.attn_q_norm.weight"], state["model.layers.1.self_attn.q_norm.weight"] + 1)
    np.testing.assert_array_equal(out["output_norm.weight"], state["model.norm.weight"] + 1)
    # The gated norm inside the linear-attention block stores its scale as is.
    np.testing.assert_array_equal(out["blk.0.ssm_norm.weight"], state["model.layers.0.linear_attn.norm.weight"])
    assert out["blk.0.ssm_conv1d.weight"].shape == (state["model.layers.0.linear_attn.conv1d.weight"].shape[0], 4)
    assert "output.weight" not in out  # tied: llama.cpp reuses token_embd
    # Value rows of the z projection: head at position t*K+g is original head g*r+t.
    dv = config.linear_value_head_dim
    z = state["model.layers.0.linear_attn.in_proj_z.weight"]
    for position, head in enumerate(tiled):
        np.testing.assert_array_equal(out["blk.0.attn_gate.weight"][position * dv:(position + 1) * dv], z[head * dv:(head + 1) * dv])
    # out_proj carries the value heads in its columns.
    w = state["model.layers.0.linear_attn.out_proj.weight"]
    np.testing.assert_array_equal(out["blk.0.ssm_out.weight"][:, dv:2 * dv], w[:, tiled[1] * dv:(tiled[1] + 1) * dv])


def test_value_heads_untouched_when_counts_match():
    same = SimpleNamespace(linear_num_key_heads=4, linear_num_value_heads=4, linear_value_head_dim=64, linear_key_head_dim=64)
    data = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    assert tile_value_heads("model.layers.0.linear_attn.in_proj_a.weight", data, same) is data


def test_metadata_and_tokenizer_read_back(written, tiny_tokenizer, hybrid_model):
    from botpsy.model.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS

    config = hybrid_model.config
    assert meta(written, "general.architecture") == "qwen35"
    expected = {
        "qwen35.block_count": 2, "qwen35.embedding_length": 256, "qwen35.context_length": 8192,
        "qwen35.attention.head_count": 4, "qwen35.attention.head_count_kv": 2, "qwen35.attention.key_length": 64,
        "qwen35.rope.dimension_count": 16, "qwen35.rope.dimension_sections": [3, 3, 2, 0],
        "qwen35.full_attention_interval": 2, "qwen35.ssm.conv_kernel": 4, "qwen35.ssm.state_size": 64,
        "qwen35.ssm.group_count": 4, "qwen35.ssm.time_step_rank": 8, "qwen35.ssm.inner_size": 512,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.eos_token_id": tiny_tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "tokenizer.ggml.padding_token_id": tiny_tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        "tokenizer.ggml.add_bos_token": False,
    }
    assert {k: meta(written, k) for k in expected} == expected
    assert meta(written, "qwen35.attention.layer_norm_rms_epsilon") == pytest.approx(config.rms_norm_eps)
    assert meta(written, "tokenizer.chat_template") == CHAT_TEMPLATE
    tokens = meta(written, "tokenizer.ggml.tokens")
    types = meta(written, "tokenizer.ggml.token_type")
    assert len(tokens) == config.vocab_size
    vocab = tiny_tokenizer.get_vocab()
    assert all(tokens[i] == t for t, i in vocab.items())
    control = {tokens[i] for i, kind in enumerate(types) if kind == 3}
    assert control == set(SPECIAL_TOKENS)
    backend = json.loads(tiny_tokenizer.backend_tokenizer.to_str())
    assert len(meta(written, "tokenizer.ggml.merges")) == len(backend["model"]["merges"])


def test_tensors_read_back_exactly(written, hybrid_model):
    expected = {t.name: t.data for t in gguf_tensors(hybrid_model)}
    stored = {t.name: np.asarray(t.data).reshape(expected[t.name].shape) for t in written.tensors}
    assert set(stored) == set(expected)
    for name, data in expected.items():
        np.testing.assert_array_equal(stored[name], data, err_msg=name)


def test_widths_that_k_quants_cannot_block_are_named(tiny_tokenizer):
    spec = ModelSpec(num_hidden_layers=2, full_attention_interval=2, hidden_size=320, intermediate_size=384)
    model = build_model(spec, tiny_tokenizer)
    tensors = list(gguf_tensors(model))
    problems = quantization_problems(tensors, model.config, "q4_k_m")
    assert any("hidden_size = 320" in p and "multiples of 256" in p for p in problems)
    assert any("intermediate_size = 384" in p and "ffn_down" in p for p in problems)
    assert quantization_problems(tensors, model.config, "q8_0") == []  # both are multiples of 32
    assert quantization_problems(tensors, model.config, "bf16") == []


def test_unsupported_architectures_are_refused():
    from transformers import LlamaConfig, Qwen3_5TextConfig

    with pytest.raises(ExportError, match="cannot export a 'llama' model"):
        gguf_architecture(LlamaConfig())
    odd_layout = Qwen3_5TextConfig(num_hidden_layers=4, layer_types=["full_attention", "linear_attention",
                                                                    "linear_attention", "full_attention"])
    with pytest.raises(ExportError, match="only hybrid layout"):
        gguf_architecture(odd_layout)


def test_tokenizer_differences_from_llama_cpp_are_noted(tiny_tokenizer):
    import copy

    from tokenizers import normalizers

    from botpsy.export.gguf_writer import tokenizer_notices

    assert tokenizer_notices(tiny_tokenizer) == []
    normalizing = copy.deepcopy(tiny_tokenizer)
    normalizing.backend_tokenizer.normalizer = normalizers.NFC()
    assert any("NFC normalizer" in n for n in tokenizer_notices(normalizing))
