"""botpsy's own GGUF writer: a transformers checkpoint -> one float GGUF file llama.cpp can load.

Two architectures are written:

* ``qwen35`` for Qwen3.5 text models (``Qwen3_5ForCausalLM``, model type ``qwen3_5_text``):
  hybrid Gated-DeltaNet / gated-attention layers. Their tensors need transforms on the way
  out (see ``qwen35_tensor``): llama.cpp stores ``-exp(A_log)``, plain RMSNorm scales (Hugging
  Face stores offsets from 1), squeezed conv kernels, and value heads tiled rather than grouped.
* ``qwen3`` for dense Qwen3 models (``Qwen3ForCausalLM``): tensors are written as they are.
* ``qwen2`` for the pretrained Qwen2.5 student (``Qwen2ForCausalLM``, its LoRA adapter merged
  first): tensors as they are, attention biases included.

The tokenizer (byte-level BPE, ``tokenizer.ggml.model = gpt2``, ``pre = qwen2``) and botpsy's
chat template are embedded, so the file is self-contained. Quantized formats are made from the
float file by ``botpsy.export.quantize``.

Example (normally run through ``botpsy export``)::

    write_gguf(checkpoint.model, checkpoint.tokenizer, "runs/speedrun/gguf/model-f32.gguf")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

# Hugging Face model type -> GGUF architecture name.
ARCHITECTURES = {"qwen3_5_text": "qwen35", "qwen3": "qwen3", "qwen2": "qwen2"}

# Tensors llama.cpp's quantizer keeps in float whatever the target type: 1-D vectors (norms,
# biases, A) and the Gated-DeltaNet convolution kernel, too small for quantization blocks.
FLOAT_ONLY_SUFFIXES = ("ssm_conv1d.weight",)


class ExportError(ValueError):
    """A checkpoint that cannot be exported as asked; the message says what and why."""


@dataclass(frozen=True)
class GGUFTensor:
    name: str  # GGUF name, e.g. "blk.0.attn_qkv.weight"
    data: np.ndarray  # float32, in PyTorch (row-major, output-dim-first) shape
    source: str  # Hugging Face name it came from

    @property
    def quantizable(self) -> bool:
        """Whether llama.cpp quantizes this tensor (2-D and not one of its float-only kinds)."""
        return self.data.ndim == 2 and not self.name.endswith(FLOAT_ONLY_SUFFIXES)


def gguf_architecture(config) -> str:
    """The GGUF architecture for a transformers config, or a clear refusal."""
    arch = ARCHITECTURES.get(config.model_type)
    if arch is None:
        supported = ", ".join(f"{k} -> {v}" for k, v in ARCHITECTURES.items())
        raise ExportError(f"cannot export a {config.model_type!r} model to GGUF; supported: {supported}")
    if arch == "qwen35":
        full_attention_interval(config)  # refuses layer layouts llama.cpp cannot express
    if getattr(config, "use_sliding_window", False):
        raise ExportError("sliding-window attention is not supported by llama.cpp's qwen3 architecture; export refused")
    return arch


def full_attention_interval(config) -> int:
    """The N of "every Nth layer is full attention": llama.cpp's qwen35 only knows that layout."""
    layer_types = list(config.layer_types)
    full = [i for i, kind in enumerate(layer_types) if kind == "full_attention"]
    interval = full[0] + 1 if full else len(layer_types) + 1
    expected = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(len(layer_types))]
    if layer_types != expected:
        raise ExportError(
            f"layer_types {layer_types} is not 'every {interval}th layer full attention', "
            "the only hybrid layout llama.cpp's qwen35 architecture can load"
        )
    return interval


# ---------------------------------------------------------------- tensors


def gguf_tensors(model) -> Iterator[GGUFTensor]:
    """Every tensor of ``model`` under its GGUF name, transformed for llama.cpp, as float32."""
    import gguf

    config = model.config
    arch = gguf_architecture(config)
    gguf_arch = {"qwen35": gguf.MODEL_ARCH.QWEN35, "qwen3": gguf.MODEL_ARCH.QWEN3, "qwen2": gguf.MODEL_ARCH.QWEN2}[arch]
    name_map = gguf.get_tensor_name_map(gguf_arch, config.num_hidden_layers)
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and config.tie_word_embeddings:
            continue  # llama.cpp reuses token_embd when output.weight is absent
        data = tensor.detach().to("cpu").float().numpy()
        if arch == "qwen35":
            hf_name, data = qwen35_tensor(hf_name, data, config)
        name = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ExportError(f"no GGUF name for tensor {hf_name!r} of a {config.model_type} model")
        yield GGUFTensor(name=name, data=np.ascontiguousarray(data, dtype=np.float32), source=hf_name)


def qwen35_tensor(hf_name: str, data: np.ndarray, config) -> tuple[str, np.ndarray]:
    """One Qwen3.5 tensor as llama.cpp's qwen35 graph expects it: (renamed HF name, data)."""
    if hf_name.endswith("norm.weight") and ".linear_attn.norm." not in hf_name:
        # Qwen3_5RMSNorm scales by (1 + w); llama.cpp's RMSNorm by w. The gated norm inside
        # the linear-attention block already stores the plain scale.
        data = data + 1.0
    if ".linear_attn." not in hf_name:
        return hf_name, data
    if hf_name.endswith(".A_log"):
        data = -np.exp(data)
    if hf_name.endswith(".dt_bias"):
        hf_name = hf_name[: -len("dt_bias")] + "dt_proj.bias"
    if hf_name.endswith(".conv1d.weight"):
        data = data.squeeze(1)  # [channels, 1, kernel] -> [channels, kernel]
    return hf_name, tile_value_heads(hf_name, data, config)


def tile_value_heads(hf_name: str, data: np.ndarray, config) -> np.ndarray:
    """Reorder value heads from grouped (HF) to tiled (llama.cpp) where they are carried.

    With K key heads and V = K*r value heads, Hugging Face repeats each key head r times in
    place (value head j reads key head j // r); ggml broadcasts by tiling (value head j reads
    key head j % K). Storing value head g*r + t at position t*K + g makes the two agree.
    """
    n_k, n_v = config.linear_num_key_heads, config.linear_num_value_heads
    if n_v == n_k:
        return data
    repeat = n_v // n_k
    value_width = n_v * config.linear_value_head_dim
    key_width = n_k * config.linear_key_head_dim

    def tile_rows(rows: np.ndarray) -> np.ndarray:  # rows: [n_v * per_head, ...]
        per_head = rows.shape[0] // n_v
        grouped = rows.reshape(n_k, repeat, per_head, *rows.shape[1:])
        return grouped.swapaxes(0, 1).reshape(rows.shape)

    name = hf_name.rsplit(".", 2)[-2] if hf_name.endswith((".weight", ".bias")) else hf_name.rsplit(".", 1)[-1]
    if name in ("in_proj_qkv", "conv1d"):  # value channels follow query and key channels
        qk, v = data[: 2 * key_width], data[2 * key_width :]
        return np.concatenate([qk, tile_rows(v)], axis=0)
    if name in ("in_proj_z", "in_proj_a", "in_proj_b", "A_log", "dt_proj"):
        return tile_rows(data)
    if name == "out_proj":  # value heads are the input (column) dimension
        return tile_rows(data.T).T
    if data.shape and data.shape[0] == value_width:
        raise ExportError(f"{hf_name}: a value-head tensor this writer does not know how to reorder")
    return data


# ---------------------------------------------------------------- shape checks

# The smallest unit a format quantizes along a row: K-quants use 256-wide super-blocks.
QUANT_BLOCK = {"q8_0": 32, "q4_k_m": 256}


def dimension_names(config) -> dict[int, list[str]]:
    """Config dimensions by value, so a bad matrix width can be named the way the config names it."""
    dims = {
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_attention_heads x head_dim": config.num_attention_heads * head_dim(config),
    }
    if config.model_type == "qwen3_5_text":
        dims["linear_num_value_heads x linear_value_head_dim"] = config.linear_num_value_heads * config.linear_value_head_dim
    by_value: dict[int, list[str]] = {}
    for name, value in dims.items():
        by_value.setdefault(value, []).append(name)
    return by_value


def quantization_problems(tensors: list[GGUFTensor], config, fmt: str) -> list[str]:
    """Why ``fmt`` would silently fall back to other types for some matrices (empty when fine).

    llama.cpp quantizes each row in blocks; a matrix whose input dimension (its row length)
    is not a multiple of the block gets another type without an error.
    """
    block = QUANT_BLOCK.get(fmt)
    if block is None:
        return []
    offenders: dict[int, list[str]] = {}
    for t in tensors:
        if t.quantizable and t.data.shape[1] % block:
            offenders.setdefault(t.data.shape[1], []).append(t.name)
    names = dimension_names(config)
    problems = []
    for width, tensor_names in sorted(offenders.items()):
        what = " / ".join(names.get(width, ["input dimension"]))
        shown = ", ".join(tensor_names[:3]) + (f" and {len(tensor_names) - 3} more" if len(tensor_names) > 3 else "")
        problems.append(f"{fmt} needs matrix input dimensions that are multiples of {block}: {what} = {width} ({shown})")
    return problems


# ---------------------------------------------------------------- metadata


def add_model_metadata(writer, config, arch: str) -> None:
    """The hyper-parameters llama.cpp reads for ``arch``."""
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_key_length(head_dim(config))
    writer.add_value_length(head_dim(config))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    rope = dict(getattr(config, "rope_parameters", None) or {})
    writer.add_rope_freq_base(float(rope.get("rope_theta", getattr(config, "rope_theta", 10_000.0))))
    if rope.get("rope_type", "default") != "default":
        raise ExportError(f"rope_type {rope['rope_type']!r} is not supported by this writer (only 'default')")
    if arch == "qwen35":
        add_qwen35_metadata(writer, config, rope)


def head_dim(config) -> int:
    """Per-head width: Qwen3/3.5 configs state it; Qwen2's is hidden size / heads."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def add_qwen35_metadata(writer, config, rope: dict) -> None:
    rotary_dims = int(config.head_dim * rope.get("partial_rotary_factor", 0.25))
    writer.add_rope_dimension_count(rotary_dims)
    # llama.cpp reads four multimodal-RoPE sections (Qwen3.5 uses three); for text the
    # positions of all sections coincide, so this is plain partial RoPE.
    sections = list(rope.get("mrope_section") or [rotary_dims // 2, 0, 0])
    writer.add_rope_dimension_sections((sections + [0, 0, 0, 0])[:4])
    writer.add_full_attention_interval(full_attention_interval(config))
    writer.add_ssm_conv_kernel(config.linear_conv_kernel_dim)
    writer.add_ssm_state_size(config.linear_key_head_dim)
    writer.add_ssm_group_count(config.linear_num_key_heads)
    writer.add_ssm_time_step_rank(config.linear_num_value_heads)
    writer.add_ssm_inner_size(config.linear_value_head_dim * config.linear_num_value_heads)


def add_tokenizer_metadata(writer, tokenizer, vocab_size: int, chat_template: str) -> None:
    """Embed a byte-level BPE tokenizer as llama.cpp's ``gpt2`` model with Qwen's pre-tokenizer."""
    import gguf

    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    if backend["model"]["type"] != "BPE":
        raise ExportError(f"only byte-level BPE tokenizers can be embedded, not {backend['model']['type']}")
    by_id = {i: tok for tok, i in tokenizer.get_vocab().items()}
    if max(by_id) >= vocab_size:
        raise ExportError(f"tokenizer has id {max(by_id)} but the model's vocabulary holds only {vocab_size} rows")
    added = {t["id"]: t for t in backend.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(vocab_size):  # rows past the tokenizer (padding) become unused tokens
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        tokens.append(by_id[i])
        if i in added:
            types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in backend["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    writer.add_eos_token_id(eos)
    writer.add_pad_token_id(pad)
    # Qwen models use no BOS; naming <|endoftext|> keeps llama.cpp from guessing one.
    writer.add_bos_token_id(pad)
    writer.add_add_bos_token(False)
    writer.add_chat_template(chat_template)


def tokenizer_notices(tokenizer) -> list[str]:
    """Ways ``tokenizer`` may tokenize differently in llama.cpp (``gpt2`` model, ``qwen2`` pre-type).

    botpsy's own tokenizer has none. A downloaded Qwen tokenizer normalizes to NFC, which
    llama.cpp does not do, so text that is not already NFC splits differently there.
    """
    from botpsy.model.tokenizer import QWEN_SPLIT_REGEX

    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    notices = []
    if backend.get("normalizer"):
        notices.append(f"the tokenizer applies a {backend['normalizer'].get('type')} normalizer that llama.cpp does not; "
                       "non-normalized text may tokenize differently (botpsy parity measures it)")
    regexes = _find_regexes(backend.get("pre_tokenizer"))
    if regexes != [QWEN_SPLIT_REGEX]:
        notices.append("the tokenizer's split pattern is not Qwen2's, which llama.cpp's 'qwen2' pre-tokenizer uses; "
                       "text may tokenize differently (botpsy parity measures it)")
    return notices


def _find_regexes(node) -> list[str]:
    if isinstance(node, dict):
        found = [node["Regex"]] if isinstance(node.get("Regex"), str) else []
        return found + [r for key, value in node.items() if key != "Regex" for r in _find_regexes(value)]
    if isinstance(node, list):
        return [r for item in node for r in _find_regexes(item)]
    return []


# ---------------------------------------------------------------- the file


def write_gguf(model, tokenizer, path: str | Path, name: str = "botpsy", chat_template: str | None = None,
               tensors: list[GGUFTensor] | None = None) -> Path:
    """Write ``model`` (float32 tensors) and ``tokenizer`` to one GGUF file; return its path."""
    import gguf

    from botpsy.model.tokenizer import CHAT_TEMPLATE

    config = model.config
    arch = gguf_architecture(config)
    tensors = tensors if tensors is not None else list(gguf_tensors(model))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    try:
        writer.add_name(name)
        writer.add_file_type(gguf.LlamaFileType.ALL_F32)
        add_model_metadata(writer, config, arch)
        add_tokenizer_metadata(writer, tokenizer, config.vocab_size, chat_template or CHAT_TEMPLATE)
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        for t in tensors:
            writer.add_tensor(t.name, t.data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return path
