"""``botpsy export``: a checkpoint -> the release GGUF files (bf16, Q8_0, Q4_K_M) + meta.json.

Steps: refuse what cannot be exported (architecture, matrix widths the formats cannot
block), write a float32 GGUF with botpsy's writer (tokenizer and chat template embedded),
make each format from it with llama.cpp's quantizer, read every file back and check its
tensor types, and record sizes, SHA-256 and type counts in ``DIR/meta.json``.

A LoRA stage folder can also be written as ``lora``: the adapter alone, as a llama.cpp adapter
GGUF that runs on the untouched base file (``botpsy.export.lora_gguf``; seconds, no merge). A
quantized base keeps all of the fine-tuning that way, which re-quantizing merged weights does not.

Example::

    botpsy export runs/speedrun/sft --out runs/speedrun/gguf --formats bf16,q8_0,q4_k_m
    botpsy export release/botpsy-0.5b-sft --out gguf --formats lora
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import botpsy
from botpsy.config import config_to_dict
from botpsy.model.bases import file_digest
from botpsy.export.gguf_file import check_gguf_file, tensor_type_counts
from botpsy.export.gguf_writer import (
    ExportError,
    gguf_architecture,
    gguf_tensors,
    quantization_problems,
    tokenizer_notices,
    write_gguf,
)
from botpsy.export.quantize import FORMATS, Format, file_name, quantize_gguf, resolve_format
from botpsy.output import emit, table

DEFAULT_FORMATS = "bf16,q8_0,q4_k_m"
# Not a quantization of the merged model but the adapter alone, applied by llama.cpp on its base.
LORA = Format("lora", "", frozenset({"F32"}), "LoRA adapter (float32) on the untouched base GGUF, applied at run time")


@dataclass
class ExportConfig:
    """Export a checkpoint to GGUF in the release formats, checking every file it writes."""

    checkpoint: str = field(default="runs/speedrun/sft", metadata={"help": "Checkpoint folder to export.", "positional": True})
    out: str = field(default="runs/speedrun/gguf", metadata={"help": "Folder for the GGUF files and meta.json."})
    formats: str = field(default=DEFAULT_FORMATS, metadata={"help": f"Comma-separated formats from {', '.join(FORMATS)}, lora (a LoRA stage folder's adapter on its base GGUF)."})
    keep_f32: bool = field(default=False, metadata={"help": "Keep the float32 intermediate model-f32.gguf."})
    threads: int = field(default=0, metadata={"help": "Quantizer threads (0: all cores)."})
    name: str = field(default="botpsy", metadata={"help": "Model name written into the GGUF metadata."})
    adapter_strength: float = field(default=1.0, metadata={"help": "lora format only: scale the adapter's LoRA change by this number in (0, 1], a weight-space interpolation between the base and the fine-tuned model (the trained tool-call token rows stay whole). 1: the adapter as trained."})
    allow_fallback: bool = field(default=False, metadata={"help": "Export even where llama.cpp must give some matrices another type than the format's (a pretrained model whose widths are not multiples of the block, e.g. the 0.5B student's 896 under Q4_K_M); the fallbacks are listed in meta.json's notices. Off: refuse, as for the reference family whose widths botpsy chooses."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def parse_formats(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise ExportError("--formats is empty; give e.g. bf16,q8_0,q4_k_m")
    unknown = [n for n in names if n not in FORMATS and n != LORA.name]
    if unknown:
        raise ExportError(f"unknown format(s) {unknown}; choose from {', '.join(FORMATS)}, {LORA.name}")
    return list(dict.fromkeys(names))


def describe_file(path: Path, fmt: Format) -> dict:
    return {"file": path.name, "format": fmt.name, "description": fmt.description, "bytes": path.stat().st_size,
            "sha256": file_digest(path)[1], "tensor_types": tensor_type_counts(path)}


def export_checkpoint(config: ExportConfig) -> dict:
    """Do the export described by ``config``; return the record written to ``meta.json``."""
    from botpsy.model.checkpoint import load_checkpoint, read_model_type

    model_type = read_model_type(config.checkpoint)  # refuses unsupported models before loading anything
    names = parse_formats(config.formats)
    out = Path(config.out)
    files: dict[str, dict] = {}
    if config.adapter_strength != 1.0 and names != [LORA.name]:
        raise ExportError("--adapter-strength applies to the lora format alone; export the merged formats separately")
    if LORA.name in names:
        files[LORA.name] = export_lora(config, out)
        names.remove(LORA.name)
    if not names:  # the adapter alone: no merged model to load or write
        return write_record(config, out, files, [], model_type, files[LORA.name]["architecture"], None, config.checkpoint, None)
    resolved = [resolve_format(n) for n in names]
    checkpoint = load_checkpoint(config.checkpoint, dtype="float32")
    model, model_config = checkpoint.model, checkpoint.model.config
    arch = gguf_architecture(model_config)
    tensors = list(gguf_tensors(model))
    problems = [p for fmt, _ in resolved for p in quantization_problems(tensors, model_config, fmt.name)]
    if problems and not config.allow_fallback:
        raise ExportError("refusing to export, llama.cpp would silently use other types: " + "; ".join(problems))

    out.mkdir(parents=True, exist_ok=True)
    float_path = write_gguf(model, checkpoint.tokenizer, out / (file_name("f32") + ".partial"), name=config.name, tensors=tensors)
    check_gguf_file(float_path)
    notices = tokenizer_notices(checkpoint.tokenizer)
    notices += [f"fallback allowed: {p}" for p in problems]
    try:
        for fmt, notice in resolved:
            if notice:
                notices.append(notice)
            target = out / file_name(fmt.name)
            if fmt.name == "f32":
                continue  # renamed from the intermediate below
            partial = quantize_gguf(float_path, target.with_name(target.name + ".partial"), fmt, config.threads,
                                    allow_fallback=config.allow_fallback)
            os.replace(partial, target)  # only checked files get their final name
            files[fmt.name] = describe_file(target, fmt)
    finally:
        keep = any(fmt.name == "f32" for fmt, _ in resolved) or config.keep_f32
        if keep:
            os.replace(float_path, out / file_name("f32"))
            files["f32"] = describe_file(out / file_name("f32"), FORMATS["f32"])
        else:
            float_path.unlink(missing_ok=True)

    return write_record(config, out, files, notices, model_config.model_type, arch, model_config.vocab_size,
                        checkpoint.path, checkpoint.meta.get("stage"))


def export_lora(config: ExportConfig, out: Path) -> dict:
    """Write the checkpoint's adapter as ``model-lora.gguf``; its file record, base included."""
    from botpsy.export.lora_gguf import write_lora_gguf

    target = out / file_name(LORA.name)
    written = write_lora_gguf(config.checkpoint, target, name=config.name, strength=config.adapter_strength)
    return {**describe_file(target, LORA), "architecture": written["architecture"], "base": written["base"],
            "base_sha256": written["base_sha256"], "adapted_matrices": written["adapted_matrices"],
            "strength": written["strength"]}


def write_record(config: ExportConfig, out: Path, files: dict, notices: list[str], model_type: str, arch: str,
                 vocab_size: int | None, checkpoint_path, stage: str | None) -> dict:
    """Write and return ``meta.json``: what was exported from what, and every file's size, hash and types."""
    if stage is None:
        meta_file = Path(config.checkpoint) / "meta.json"
        stage = json.loads(meta_file.read_text()).get("stage") if meta_file.is_file() else None
    kept, kept_notices, kept_vocab = earlier_files(out, checkpoint_path, files)
    files = {**kept, **files}
    notices = list(dict.fromkeys([*kept_notices, *notices]))
    vocab_size = vocab_size if vocab_size is not None else kept_vocab
    record = {
        "stage": "gguf",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "botpsy_version": botpsy.__version__,
        "checkpoint": str(checkpoint_path),
        "checkpoint_files": checkpoint_files(checkpoint_path),
        "checkpoint_stage": stage,
        "model_type": model_type,
        "architecture": arch,
        "vocab_size": vocab_size,
        "chat_template": "botpsy.model.tokenizer.CHAT_TEMPLATE (Qwen3.5 wire format)",
        "notices": notices,
        "files": files,
        "config": config_to_dict(config),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def checkpoint_files(checkpoint_path) -> dict[str, list[int]]:
    """Name -> [size, mtime in ns] of a checkpoint's weight files (the ones eval's records are
    fingerprinted by): what tells a retrained checkpoint in the same folder from the one an earlier
    export read."""
    from botpsy.model.checkpoint import weight_files

    return {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in weight_files(str(checkpoint_path))}


def earlier_files(out: Path, checkpoint_path, written: dict) -> tuple[dict, list[str], int | None]:
    """(file records, notices, vocab size) that a call writing only some formats keeps from ``out/meta.json``.

    Exporting ``lora`` into a folder of merged files (or one format again) must not drop the
    records of the files it left alone. Records are kept only when they came from the same
    checkpoint, unchanged since (its files' sizes and times), and their file is still there with
    the recorded size; another checkpoint's, or a retrained one's, go.
    """
    meta = out / "meta.json"
    try:
        old = json.loads(meta.read_text()) if meta.is_file() else {}
    except json.JSONDecodeError:
        old = {}
    if not old or Path(str(old.get("checkpoint", ""))).resolve() != Path(str(checkpoint_path)).resolve() \
            or old.get("checkpoint_files") != checkpoint_files(checkpoint_path):
        return {}, [], None
    kept = {name: f for name, f in (old.get("files") or {}).items()
            if name not in written and (out / str(f.get("file", ""))).is_file()
            and (out / str(f.get("file", ""))).stat().st_size == f.get("bytes")}
    return kept, (list(old.get("notices") or []) if kept else []), old.get("vocab_size")


def human_summary(record: dict) -> str:
    rows = [{"format": name, "file": f["file"], "MiB": f"{f['bytes'] / 2**20:.2f}",
             "tensor types": ", ".join(f"{k} {v}" for k, v in f["tensor_types"].items())}
            for name, f in record["files"].items()]
    lines = [f"exported {record['checkpoint']} ({record['model_type']} -> GGUF {record['architecture']})", table(rows)]
    lines += [f"note: {n}" for n in record["notices"]]
    return "\n".join(lines)


def main(config: ExportConfig) -> int:
    record = export_checkpoint(config)
    emit(record, config.json, human_summary)
    return 0
