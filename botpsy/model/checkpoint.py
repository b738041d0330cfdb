"""Checkpoints: one folder per stage, loaded by path or by stage name.

A botpsy checkpoint is a Hugging Face model folder (``config.json`` + safetensors) with the
tokenizer beside it and a ``meta.json`` saying which stage made it, from what config and data::

    runs/speedrun/
      tokenizer/  base/  sft/  mopd/  rl1/  rl2/  gguf/  eval/  bench/

``load_checkpoint("runs/speedrun/sft")`` and ``load_stage("runs/speedrun", "sft")`` are the
same. The loader also opens a real Qwen3.5 checkpoint downloaded elsewhere (for example
Qwen3.5-0.8B): give its local folder. Nothing is fetched from a hub.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import botpsy

STAGE_NAMES = ("base", "sft", "teacher", "mopd", "rl1", "rl2")
QWEN35_TEXT_TYPES = ("qwen3_5_text",)
QWEN35_MULTIMODAL_TYPES = ("qwen3_5",)
DENSE_QWEN3_TYPES = ("qwen3",)


class CheckpointError(ValueError):
    """A checkpoint folder that is missing, incomplete or not a supported model."""


@dataclass
class Checkpoint:
    model: Any
    tokenizer: Any
    meta: dict
    path: Path


def save_checkpoint(model, tokenizer, out: str | Path, stage: str, meta: dict | None = None) -> Path:
    """Save model, tokenizer and ``meta.json`` (stage, time, botpsy version, plus ``meta``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    record = {
        "stage": stage,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "botpsy_version": botpsy.__version__,
        "model_type": model.config.model_type,
        **(meta or {}),
    }
    (out / "meta.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    return out


def read_model_type(path: str | Path) -> str:
    """The ``model_type`` of a checkpoint folder, with a clear error when it is not one."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint folder {path} does not exist (no hub is reachable: give a local path)")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{path} is not a Hugging Face checkpoint: it has no config.json")
    try:
        config = json.loads(config_file.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{config_file} is not valid JSON: {exc}") from None
    model_type = config.get("model_type")
    supported = QWEN35_TEXT_TYPES + QWEN35_MULTIMODAL_TYPES + DENSE_QWEN3_TYPES
    if model_type not in supported:
        raise CheckpointError(
            f"{path} holds a {model_type!r} model; botpsy supports Qwen3.5 ({', '.join(supported)})"
        )
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise CheckpointError(f"{path} has a config.json but no weights (*.safetensors)")
    return model_type


def load_checkpoint(path: str | Path, dtype: str = "float32") -> Checkpoint:
    """Load a botpsy or Hugging Face Qwen3.5 checkpoint folder for training or inference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from botpsy.model import cpu_kernels

    cpu_kernels.install()
    path = Path(path)
    model_type = read_model_type(path)
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
        raise CheckpointError(f"{path} has no tokenizer files (tokenizer.json)")
    torch_dtype = getattr(torch, dtype)
    if model_type in QWEN35_MULTIMODAL_TYPES:
        model = load_text_model_from_multimodal(path, torch_dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    meta_file = path / "meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {"stage": "external", "source": str(path)}
    return Checkpoint(model=model, tokenizer=tokenizer, meta=meta, path=path)


def load_text_model_from_multimodal(path: Path, torch_dtype):
    """Qwen3.5 releases are image-text models; take their language model as a ``Qwen3_5ForCausalLM``.

    The text weights live under ``model.language_model.*``; the vision tower is not loaded.
    """
    from safetensors.torch import load_file
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    config = json.loads((path / "config.json").read_text())
    if "text_config" not in config:
        raise CheckpointError(f"{path}: a qwen3_5 config.json without text_config")
    text_config = Qwen3_5TextConfig(**config["text_config"])
    model = Qwen3_5ForCausalLM(text_config).to(torch_dtype)
    state = {}
    for shard in sorted(path.glob("*.safetensors")):
        for name, tensor in load_file(str(shard)).items():
            if name.startswith("model.language_model."):
                state["model." + name[len("model.language_model."):]] = tensor
            elif name.startswith("lm_head."):
                state[name] = tensor
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not (m == "lm_head.weight" and text_config.tie_word_embeddings)]
    if missing:
        raise CheckpointError(f"{path}: language-model weights missing from the shards: {missing[:5]}")
    if text_config.tie_word_embeddings:
        model.tie_weights()
    return model


def stage_path(run_dir: str | Path, stage: str) -> Path:
    return Path(run_dir) / stage


def load_stage(run_dir: str | Path, stage: str, dtype: str = "float32") -> Checkpoint:
    """Load the checkpoint a stage wrote into a run folder, e.g. ``load_stage(run, "sft")``."""
    path = stage_path(run_dir, stage)
    if not path.exists():
        known = [p.name for p in Path(run_dir).iterdir() if (p / "config.json").is_file()] if Path(run_dir).is_dir() else []
        raise CheckpointError(f"run {run_dir} has no {stage!r} checkpoint; it has: {known or 'none'}")
    return load_checkpoint(path, dtype=dtype)
