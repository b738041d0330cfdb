"""Checkpoints: one folder per stage, loaded by path or by stage name.

A botpsy checkpoint is a Hugging Face model folder (``config.json`` + safetensors) with the
tokenizer beside it and a ``meta.json`` saying which stage made it, from what config and data::

    runs/speedrun/
      tokenizer/  base/  sft/  mopd/  rl1/  rl2/  gguf/  eval/  bench/

``load_checkpoint("runs/speedrun/sft")`` and ``load_stage("runs/speedrun", "sft")`` are the
same. The loader also opens a real Qwen3.5 checkpoint downloaded elsewhere (for example
Qwen3.5-0.8B): give its local folder. Nothing is fetched from a hub.

Two model families go through the same loader, so no stage branches on the family:

* the **Qwen3.5 reference family** (``qwen3_5_text``; the tiny hybrid model of CI, or a local
  Qwen3.5-0.8B), and dense Qwen3;
* the **Qwen2 student** (``qwen2``): a pretrained base given as a known base name
  (``qwen2.5-coder-0.5b``, see ``botpsy.model.bases``) or a ``.gguf`` file, which transformers
  dequantizes into plain float layers, and the **LoRA stage folders** trained from it, which hold
  only the adapter (``adapter_config.json``) and name their base in ``meta.json``. Loading such a
  folder loads the base and the adapter; ``merge=True`` (the default) folds the adapter into the
  weights, which is what export, parity and evaluation want.
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
QWEN2_TYPES = ("qwen2",)
SUPPORTED_TYPES = QWEN35_TEXT_TYPES + QWEN35_MULTIMODAL_TYPES + DENSE_QWEN3_TYPES + QWEN2_TYPES
ADAPTER_CONFIG = "adapter_config.json"


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
    had_card = (out / "README.md").exists()
    model.save_pretrained(str(out))
    if hasattr(model, "peft_config"):
        # An adapter folder: the tokenizer comes with the base it names, and the adapter is
        # stored in bfloat16 (the precision the base trains in) to keep it small enough to commit.
        halve_adapter(out)
        if not had_card:
            # peft writes a placeholder model card ("Model Card for Model ID", naming the
            # machine's cache path as the base); a release folder brings its own card.
            (out / "README.md").unlink(missing_ok=True)
    else:
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


def halve_adapter(folder: Path) -> None:
    """Rewrite ``adapter_model.safetensors`` with its float32 tensors in bfloat16."""
    import torch
    from safetensors.torch import load_file, save_file

    path = folder / "adapter_model.safetensors"
    tensors = load_file(str(path))
    save_file({k: v.to(torch.bfloat16) if v.dtype == torch.float32 else v for k, v in tensors.items()}, str(path),
              metadata={"format": "pt"})


def is_adapter_folder(path: str | Path) -> bool:
    """A LoRA stage folder: an adapter that names its base in ``meta.json``, not a whole model."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def weight_files(path: str | Path) -> list[Path]:
    """The files that identify a model's weights (eval hashes them): a model file itself,
    or a checkpoint folder's weight files (.safetensors, .bin, .gguf) and config.json; [] otherwise."""
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf") or p.name == "config.json")
    return []


def read_model_type(path: str | Path) -> str:
    """The ``model_type`` of a checkpoint (folder, adapter folder, base name or GGUF), with a clear error."""
    from botpsy.model.bases import is_gguf_source, resolve_base

    if is_gguf_source(path):
        return gguf_model_type(resolve_base(path))
    path = Path(path)
    if is_adapter_folder(path):
        return read_model_type(adapter_base(path))
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
    if model_type not in SUPPORTED_TYPES:
        raise CheckpointError(
            f"{path} holds a {model_type!r} model; botpsy supports {', '.join(SUPPORTED_TYPES)}"
        )
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise CheckpointError(f"{path} has a config.json but no weights (*.safetensors)")
    return model_type


def load_checkpoint(path: str | Path, dtype: str = "float32", merge: bool = True) -> Checkpoint:
    """Load a checkpoint for training or inference: a botpsy or Hugging Face folder, a LoRA stage
    folder (base + adapter; merged unless ``merge=False``), a known base name or a ``.gguf`` file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from botpsy.model import cpu_kernels
    from botpsy.model.bases import is_gguf_source, resolve_base

    cpu_kernels.install()
    if is_gguf_source(path):
        return load_gguf(resolve_base(path), dtype)
    path = Path(path)
    if is_adapter_folder(path):
        return load_adapter(path, dtype, merge)
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


def gguf_model_type(path: Path) -> str:
    """The transformers model type of a GGUF file's architecture (only families botpsy trains)."""
    from botpsy.model.bases import gguf_metadata

    arch = gguf_metadata(path).get("general.architecture")
    model_type = {"qwen2": "qwen2", "qwen3": "qwen3", "qwen35": "qwen3_5_text"}.get(arch)
    if model_type is None:
        raise CheckpointError(f"{path} is a {arch!r} GGUF; botpsy trains from qwen2, qwen3 or qwen35 GGUFs")
    return model_type


def load_gguf(path: Path, dtype: str = "float32") -> Checkpoint:
    """A pretrained GGUF (a pulled base), dequantized by transformers into plain float layers.

    Loading straight into bf16 would keep packed quantized weights that run several times slower
    on the CPU, so the load is float32 and the cast follows.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_model_type(path)  # a clear refusal before transformers tries an architecture it cannot map
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    if dtype != "float32":
        model = model.to(getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = "<|endoftext|>"
    meta = {"stage": "base", "source": str(path), "family": model.config.model_type}
    return Checkpoint(model=model, tokenizer=tokenizer, meta=meta, path=path)


def adapter_base(path: Path) -> str:
    """The base a LoRA stage folder was trained from (``meta.json``'s ``base``)."""
    meta_file = path / "meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    if not meta.get("base"):
        raise CheckpointError(f"{path} holds a LoRA adapter but its meta.json names no base model")
    return meta["base"]


def load_adapter(path: Path, dtype: str = "float32", merge: bool = True) -> Checkpoint:
    """A LoRA stage folder: its base (by name, GGUF or folder), then the adapter on top."""
    from peft import PeftModel

    base = load_checkpoint(adapter_base(path), dtype=dtype)
    model = PeftModel.from_pretrained(base.model, str(path), is_trainable=not merge)
    if merge:
        model = model.merge_and_unload()
    meta = json.loads((path / "meta.json").read_text())
    return Checkpoint(model=model, tokenizer=base.tokenizer, meta=meta, path=path)


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
