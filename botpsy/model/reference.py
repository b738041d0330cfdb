"""The reference model family: Qwen3.5's hybrid architecture at sizes a CPU can train.

A ``ModelSpec`` names every architectural choice of a ``Qwen3_5ForCausalLM``: hidden size,
depth, the mix of Gated-DeltaNet (``linear_attention``) and ``full_attention`` layers, head
counts and sizes. Presets keep every quantised matrix dimension a multiple of 256, so
Q4_K_M applies to every tensor without llama.cpp silently falling back to other types.

``botpsy init`` writes an untrained model (the "base" stage of the speedrun)::

    botpsy init --tokenizer runs/speedrun/tokenizer --preset tiny --out runs/speedrun/base
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from botpsy.output import emit


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one reference model (vocabulary size comes from the tokenizer)."""

    hidden_size: int = 256
    num_hidden_layers: int = 4
    full_attention_interval: int = 4  # every Nth layer is full attention, the rest Gated DeltaNet
    intermediate_size: int = 512
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    linear_num_key_heads: int = 4
    linear_num_value_heads: int = 8
    linear_key_head_dim: int = 64
    linear_value_head_dim: int = 64
    linear_conv_kernel_dim: int = 4
    max_position_embeddings: int = 8192
    rope_theta: float = 10_000_000.0
    partial_rotary_factor: float = 0.25
    tie_word_embeddings: bool = True

    @property
    def layer_types(self) -> list[str]:
        n = self.full_attention_interval
        return ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(self.num_hidden_layers)]

    def quantization_problems(self, block: int = 256) -> list[str]:
        """Dimensions that are not multiples of ``block`` (K-quants need 256, Q8_0 needs 32)."""
        dims = {
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads x head_dim": self.num_attention_heads * self.head_dim,
            "linear_num_value_heads x linear_value_head_dim": self.linear_num_value_heads * self.linear_value_head_dim,
            "linear_num_key_heads x linear_key_head_dim": self.linear_num_key_heads * self.linear_key_head_dim,
        }
        return [f"{name} = {value} is not a multiple of {block}" for name, value in dims.items() if value % block]


PRESETS: dict[str, ModelSpec] = {
    # The speedrun student: about 3-5M parameters with a few-thousand-token vocabulary.
    "tiny": ModelSpec(),
    # A wider, deeper sibling (same tokenizer) used as a domain teacher.
    "small": ModelSpec(hidden_size=512, num_hidden_layers=8, intermediate_size=1024, num_attention_heads=8,
                       num_key_value_heads=2, linear_num_key_heads=8, linear_num_value_heads=16),
}


def mrope_sections(pairs: int) -> list[int]:
    """Split ``pairs`` rotary frequency pairs into 3 near-equal sections, larger ones first."""
    base, extra = divmod(pairs, 3)
    return [base + (1 if i < extra else 0) for i in range(3)]


def hf_config(spec: ModelSpec, vocab_size: int, eos_token_id: int, pad_token_id: int):
    """The transformers ``Qwen3_5TextConfig`` for ``spec``."""
    from transformers import Qwen3_5TextConfig

    head_dim = spec.head_dim
    rotary = int(head_dim * spec.partial_rotary_factor)
    return Qwen3_5TextConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=head_dim,
        layer_types=spec.layer_types,
        linear_num_key_heads=spec.linear_num_key_heads,
        linear_num_value_heads=spec.linear_num_value_heads,
        linear_key_head_dim=spec.linear_key_head_dim,
        linear_value_head_dim=spec.linear_value_head_dim,
        linear_conv_kernel_dim=spec.linear_conv_kernel_dim,
        max_position_embeddings=spec.max_position_embeddings,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": spec.rope_theta,
            "partial_rotary_factor": spec.partial_rotary_factor,
            # Interleaved multimodal RoPE sections (temporal, height, width) over the rotary
            # pairs, split like Qwen3.5's 11/11/10; for text all three positions coincide.
            "mrope_section": mrope_sections(rotary // 2),
            "mrope_interleaved": True,
        },
        tie_word_embeddings=spec.tie_word_embeddings,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
    )


DECAY_INITS = ("log_uniform", "transformers")


def init_linear_decay(model, seed: int = 0, dt_min: float = 1e-3, dt_max: float = 0.1) -> None:
    """Give each Gated DeltaNet head a time step ``dt`` drawn log-uniformly from [dt_min, dt_max].

    A head's state decays per token by ``exp(-A * softplus(a_t + dt_bias))``; with the input
    term ``a_t`` near 0 at initialisation, ``softplus(dt_bias) = dt``. transformers' own init
    (meant for loading trained weights) sets ``dt_bias = 1``, so with ``A`` up to 16 most heads
    forget within a token or two, and a from-scratch model must first learn to remember. Here
    ``dt_bias`` is the inverse softplus of ``dt``, as the Mamba and flash-linear-attention
    layers initialise it, so heads start with memories from about one token to thousands.
    """
    import math

    import torch

    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if not (hasattr(module, "dt_bias") and hasattr(module, "A_log")):
            continue
        heads = module.dt_bias.shape[0]
        dt = torch.exp(torch.rand(heads, generator=generator) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        with torch.no_grad():
            module.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) == dt


def build_model(spec: ModelSpec, tokenizer, seed: int = 0, decay_init: str = "log_uniform"):
    """A freshly initialised ``Qwen3_5ForCausalLM`` sized for ``tokenizer``.

    ``decay_init`` sets the Gated DeltaNet time steps: ``"log_uniform"`` (``init_linear_decay``)
    or ``"transformers"`` (the library's ``dt_bias = 1``).
    """
    if decay_init not in DECAY_INITS:
        raise ValueError(f"unknown decay_init {decay_init!r}; choose from {', '.join(DECAY_INITS)}")
    import torch
    from transformers import Qwen3_5ForCausalLM

    from botpsy.model import cpu_kernels

    cpu_kernels.install()
    torch.manual_seed(seed)
    config = hf_config(
        spec,
        vocab_size=len(tokenizer),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3_5ForCausalLM(config)
    if decay_init == "log_uniform":
        init_linear_decay(model, seed=seed)
    model.generation_config.eos_token_id = [config.eos_token_id, tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    model.generation_config.pad_token_id = config.pad_token_id
    return model


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


@dataclass
class InitConfig:
    """Create an untrained reference model for a tokenizer and save it as the "base" checkpoint."""

    tokenizer: str = field(default="runs/speedrun/tokenizer", metadata={"help": "Tokenizer folder from `botpsy tokenizer`."})
    out: str = field(default="runs/speedrun/base", metadata={"help": "Checkpoint folder to write."})
    preset: str = field(default="tiny", metadata={"help": "Model size preset.", "choices": sorted(PRESETS)})
    hidden_size: int | None = field(default=None, metadata={"help": "Override the preset's hidden size."})
    num_hidden_layers: int | None = field(default=None, metadata={"help": "Override the preset's number of layers."})
    intermediate_size: int | None = field(default=None, metadata={"help": "Override the preset's MLP width."})
    full_attention_interval: int | None = field(default=None, metadata={"help": "Override how often a layer is full attention (every Nth; the rest are Gated DeltaNet)."})
    seed: int = field(default=0, metadata={"help": "Initialisation seed."})
    decay_init: str = field(default="log_uniform", metadata={
        "help": "Gated DeltaNet time steps: log-uniform in [0.001, 0.1] (Mamba-style, for training from scratch) or "
                "transformers' dt_bias = 1 (most heads then forget within a token or two).", "choices": list(DECAY_INITS)})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def spec_from_config(config: InitConfig) -> ModelSpec:
    overrides = {k: getattr(config, k) for k in ("hidden_size", "num_hidden_layers", "intermediate_size", "full_attention_interval")}
    return dataclasses.replace(PRESETS[config.preset], **{k: v for k, v in overrides.items() if v is not None})


def main(config: InitConfig) -> int:
    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.model.tokenizer import load_tokenizer

    spec = spec_from_config(config)
    tokenizer = load_tokenizer(config.tokenizer)
    model = build_model(spec, tokenizer, seed=config.seed, decay_init=config.decay_init)
    meta: dict[str, Any] = {"spec": dataclasses.asdict(spec), "preset": config.preset, "seed": config.seed,
                            "decay_init": config.decay_init,
                            "tokenizer": config.tokenizer, "quantization_problems": spec.quantization_problems()}
    save_checkpoint(model, tokenizer, config.out, stage="base", meta=meta)
    result = {"out": config.out, "parameters": count_parameters(model), "layer_types": spec.layer_types,
              "quantization_problems": spec.quantization_problems()}
    emit(result, config.json, lambda r: f"base model: {r['parameters']:,} parameters, layers {r['layer_types']} -> {r['out']}")
    return 0
