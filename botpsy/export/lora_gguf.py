"""A LoRA stage folder -> a llama.cpp adapter GGUF that runs on the untouched base file.

Why this format exists: the student is a LoRA adapter trained on the *dequantized* Q4_K_M base
(most of its matrices are 5-bit Q5_0 blocks, some 4-bit Q4_K). Merging the adapter and quantizing
the merged weights again to the same grid rounds much of the fine-tuning away: on the SFT
student, matrices re-quantized to 4-5 bits keep 11-90% of the adapter's change (cosine 0.18-0.82 between the
intended and the surviving change), and the re-quantized Q4_K_M solves 9 points fewer device tasks
than Q8_0. llama.cpp can instead apply a float LoRA adapter at run time on a quantized base, so
the base stays bit for bit the file the student was trained on and nothing is rounded away.

The file is what llama.cpp's adapter loader reads:

* ``general.type = "adapter"``, ``adapter.type = "lora"``, ``general.architecture`` the base's;
* for each adapted matrix ``W`` (``[out, in]``): ``<name>.lora_a`` ``[r, in]`` and ``<name>.lora_b``
  ``[out, r]``, float32. ``adapter.lora.alpha`` is left out, which makes llama.cpp's scale 1, and
  peft's ``alpha / r`` is folded into ``lora_b``;
* the token rows peft trains beside the adapter (``trainable_token_indices``: the embedding and
  output rows of ``<tool_call>`` and ``</tool_call>``) replace rows of the base. Their change is a
  matrix of rank k (the number of rows), written as an exact rank-k pair: for ``output.weight``
  ``lora_a`` holds the k row changes and ``lora_b`` picks their rows; llama.cpp looks embeddings
  up in ``lora_a`` and multiplies by ``lora_b``, so for ``token_embd.weight`` the pair is flipped;
* ``botpsy.adapter.base`` (a known base name or a file), its size and sha256, checked before the
  pair is loaded, and botpsy's chat template, which the base file does not carry;
* ``botpsy.adapter.strength`` when the file is written at a strength below 1: every LoRA matrix's
  change is scaled by it (a weight-space interpolation between the base and the fine-tuned model,
  as in WiSE-FT), while the trained token rows are kept whole: the base never learned the
  tool-call tokens, and a scaled row would be a token neither model was trained with.

    write_lora_gguf("release/botpsy-0.5b-sft", "gguf/model-lora.gguf")
    write_lora_gguf("release/botpsy-0.5b-sft", "gguf-half/model-lora.gguf", strength=0.5)
    pair = find_adapter("gguf/model-lora.gguf")   # -> base file, adapter file, template (None: not an adapter)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from botpsy.export.gguf_writer import ExportError

KEY_BASE = "botpsy.adapter.base"
KEY_BASE_BYTES = "botpsy.adapter.base_bytes"
KEY_BASE_SHA256 = "botpsy.adapter.base_sha256"
KEY_STRENGTH = "botpsy.adapter.strength"
PEFT_PREFIX = "base_model.model."
TOKEN_ROWS_SUFFIX = ".token_adapter.trainable_tokens_delta"
# peft options that change what an adapter computes; botpsy's LoRA settings leave them off.
UNSUPPORTED_OPTIONS = ("use_dora", "use_rslora", "lora_bias", "fan_in_fan_out", "rank_pattern", "alpha_pattern")
# Base tensors whose adapter pairs carry trained token rows, not LoRA matrices.
EMBEDDING, OUTPUT = "token_embd.weight", "output.weight"
TOKEN_ROW_TARGETS = (EMBEDDING, OUTPUT)


class AdapterFileError(ValueError):
    """An adapter GGUF that cannot be used: its base is missing or not the recorded file, or it is damaged."""


@dataclass(frozen=True)
class AdapterPair:
    """What llama.cpp loads for an adapter GGUF: the base model file and the adapter on top."""

    adapter: Path
    base: Path
    chat_template: str
    base_ref: str  # as recorded: a known base name or a path


# ---------------------------------------------------------------- writing


def write_lora_gguf(adapter_dir: str | Path, out: str | Path, base: str | None = None, name: str = "botpsy",
                    strength: float = 1.0) -> dict:
    """Write the adapter of a LoRA stage folder as a llama.cpp adapter GGUF; return a record of it.

    ``base`` (a known base name or a ``.gguf`` file) defaults to the base named in the folder's
    ``meta.json``. ``strength`` in (0, 1] scales the LoRA matrices' change (1: the adapter as
    trained). The file is written as ``<out>.partial`` and renamed once complete.
    """
    import gguf

    from botpsy.model.bases import KNOWN_BASES, file_digest, resolve_base
    from botpsy.model.checkpoint import adapter_base, is_adapter_folder

    adapter_dir, out = Path(adapter_dir), Path(out)
    if not 0.0 < strength <= 1.0:
        raise ExportError(f"the adapter strength is {strength}; give a number in (0, 1] (1: the adapter as trained)")
    if not is_adapter_folder(adapter_dir):
        raise ExportError(f"{adapter_dir} is not a LoRA stage folder (no adapter_config.json); the lora format "
                          "needs the adapter, not a merged or fully trained checkpoint")
    base_ref = base or adapter_base(adapter_dir)
    base_path = resolve_base(base_ref)
    if base_path.is_dir() or base_path.suffix != ".gguf":
        raise ExportError(f"the lora format runs on a GGUF base, and {base_ref} is {base_path}; "
                          "export the base to GGUF first and give that file as the base")
    if base_ref in KNOWN_BASES:
        base_bytes, base_sha = KNOWN_BASES[base_ref].size, KNOWN_BASES[base_ref].sha256  # verified when pulled
    else:
        base_bytes, base_sha = file_digest(base_path)
        base_ref = str(base_path.resolve())
    reader = gguf.GGUFReader(str(base_path))
    arch = _field(reader, "general.architecture")
    tensors = lora_tensors(adapter_dir, reader, arch, strength)

    partial = out.with_name(out.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        _write(partial, arch, name, base_ref, base_bytes, base_sha, tensors, strength)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, out)
    adapted = [n for n, _ in tensors if n.endswith(".lora_a") and n.removesuffix(".lora_a") not in TOKEN_ROW_TARGETS]
    return {"file": out.name, "format": "lora", "architecture": arch, "base": base_ref, "base_sha256": base_sha,
            "adapted_matrices": len(adapted), "strength": strength}


def _write(path: Path, arch: str, name: str, base_ref: str, base_bytes: int, base_sha: str, tensors,
           strength: float) -> None:
    import gguf

    from botpsy.model.tokenizer import CHAT_TEMPLATE

    writer = gguf.GGUFWriter(str(path), arch)
    try:
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_name(name)
        writer.add_chat_template(CHAT_TEMPLATE)
        writer.add_string(KEY_BASE, base_ref)
        writer.add_uint64(KEY_BASE_BYTES, base_bytes)
        writer.add_string(KEY_BASE_SHA256, base_sha)
        if strength != 1.0:
            writer.add_float32(KEY_STRENGTH, strength)
        for tensor_name, data in tensors:
            writer.add_tensor(tensor_name, data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()


def lora_tensors(adapter_dir: Path, base_reader, arch: str, strength: float = 1.0) -> list[tuple[str, np.ndarray]]:
    """The ``(name, float32 array)`` pairs of the adapter file, checked against the base's shapes.

    ``strength`` scales the LoRA matrices (folded into ``lora_b`` with peft's ``alpha / r``); the
    trained token rows are written whole.
    """
    import gguf
    from safetensors.torch import load_file

    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    if config.get("peft_type") != "LORA":
        raise ExportError(f"{adapter_dir}: a {config.get('peft_type')!r} adapter; only LoRA can be written for llama.cpp")
    used = [k for k in UNSUPPORTED_OPTIONS if config.get(k)]
    if used:
        raise ExportError(f"{adapter_dir}: adapter options llama.cpp's LoRA cannot express: {', '.join(used)}")
    scale = strength * float(config["lora_alpha"]) / float(config["r"])
    base = {t.name: t for t in base_reader.tensors}
    arch_id = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}.get(arch)
    if arch_id is None:
        raise ExportError(f"the base's architecture {arch!r} is not one gguf knows")
    n_layers = int(_field(base_reader, f"{arch}.block_count"))
    name_map = gguf.get_tensor_name_map(arch_id, n_layers)

    def gguf_name(module: str) -> str:
        found = name_map.get_name(module + ".weight", try_suffixes=(".weight",))
        if found is None or found not in base:
            raise ExportError(f"the adapter changes {module!r}, which the base GGUF has no tensor for")
        return found

    def base_shape(tensor_name: str) -> tuple[int, int]:
        return tuple(int(d) for d in reversed(base[tensor_name].shape))  # ggml order -> [out, in]

    weights = {k: v.float().numpy() for k, v in load_file(str(adapter_dir / "adapter_model.safetensors")).items()}
    out: list[tuple[str, np.ndarray]] = []
    for key in sorted(weights):
        if key.endswith(".lora_A.weight"):
            module = key[len(PEFT_PREFIX):-len(".lora_A.weight")]
            target = gguf_name(module)
            a, b = weights[key], weights[key.replace(".lora_A.", ".lora_B.")] * scale
            if (b.shape[0], a.shape[1]) != base_shape(target):
                raise ExportError(f"the adapter for {target} is {b.shape[0]}x{a.shape[1]}, the base's matrix is "
                                  f"{base_shape(target)[0]}x{base_shape(target)[1]}: not this adapter's base")
            out += [(target + ".lora_a", np.ascontiguousarray(a)), (target + ".lora_b", np.ascontiguousarray(b))]
        elif key.endswith(TOKEN_ROWS_SUFFIX):
            out += token_row_pair(key, weights[key], config, base, gguf_name)
        elif not key.endswith(".lora_B.weight"):
            raise ExportError(f"{adapter_dir}: unexpected adapter tensor {key!r}")
    if not out:
        raise ExportError(f"{adapter_dir}: the adapter holds no LoRA matrices")
    return out


def token_row_pair(key: str, rows: np.ndarray, config: dict, base: dict, gguf_name) -> list[tuple[str, np.ndarray]]:
    """The exact rank-k pair for k token rows that training replaced (peft stores the new rows)."""
    from gguf.quants import dequantize

    module = key[len(PEFT_PREFIX):-len(TOKEN_ROWS_SUFFIX)]
    short = module.rsplit(".", 1)[-1]
    ids = (config.get("trainable_token_indices") or {}).get(short)
    if not ids or len(ids) != rows.shape[0]:
        raise ExportError(f"adapter_config.json's trainable_token_indices does not list the {rows.shape[0]} rows of {module}")
    target = gguf_name(module)
    if short == "lm_head" and target == EMBEDDING:
        raise ExportError("the base ties its output head to the embedding; trained token rows of a tied head "
                          "cannot be written as a llama.cpp adapter")
    tensor = base[target]
    width, vocab = (int(d) for d in tensor.shape)  # ggml order: row length first
    if rows.shape[1] != width or max(ids) >= vocab:
        raise ExportError(f"the adapter's {module} rows are {rows.shape[1]} wide for token ids up to {max(ids)}; the "
                          f"base's {target} has {vocab} rows of {width}: not this adapter's base")
    original = dequantize(np.asarray(tensor.data[ids]), tensor.tensor_type).astype(np.float32).reshape(len(ids), -1)
    delta = rows.astype(np.float32) - original
    pick = np.zeros((vocab, len(ids)), dtype=np.float32)
    pick[ids, np.arange(len(ids))] = 1.0
    if target == EMBEDDING:  # embeddings are looked up in lora_a, then multiplied by lora_b
        return [(target + ".lora_a", pick), (target + ".lora_b", np.ascontiguousarray(delta.T))]
    return [(target + ".lora_a", np.ascontiguousarray(delta)), (target + ".lora_b", pick)]


def _field(reader, key: str):
    fld = reader.fields.get(key)
    if fld is None:
        raise ExportError(f"the base GGUF has no {key!r}")
    return fld.contents()


# ---------------------------------------------------------------- reading


def is_adapter_gguf(path: str | Path) -> bool:
    """Whether ``path`` is a GGUF whose ``general.type`` is ``adapter`` (a quick header read)."""
    from botpsy.export.gguf_file import GGUFFileError, check_gguf_file

    path = Path(path)
    if path.suffix != ".gguf" or not path.is_file():
        return False
    try:
        return check_gguf_file(path).general_type == "adapter"
    except GGUFFileError as exc:
        raise AdapterFileError(str(exc)) from None


def find_adapter(path: str | Path) -> AdapterPair | None:
    """The verified pair for an adapter GGUF, ``None`` for any other file (``AdapterFileError`` as below)."""
    return open_adapter_gguf(path) if is_adapter_gguf(path) else None


def open_adapter_gguf(path: str | Path, cache: Path | None = None) -> AdapterPair:
    """The base file and chat template for an adapter GGUF; ``AdapterFileError`` when the base is
    missing, or its size or sha256 is not the recorded one."""
    import gguf

    from botpsy.model.bases import BaseModelError, KNOWN_BASES, resolve_base

    path = Path(path)
    values = _header_values(path)
    if values.get("general.type") != "adapter" or values.get(gguf.Keys.Adapter.TYPE) != "lora":
        raise AdapterFileError(f"{path} is not a LoRA adapter GGUF")
    ref = values.get(KEY_BASE)
    if not ref:
        raise AdapterFileError(f"{path} does not name its base model ({KEY_BASE}); give the base file with the adapter")
    try:
        base = resolve_base(ref, cache) if ref in KNOWN_BASES else Path(ref)
    except BaseModelError as exc:
        raise AdapterFileError(f"{path} runs on {ref}: {exc}") from None
    if not base.is_file():
        raise AdapterFileError(f"{path} runs on the base file {base}, which does not exist")
    size, digest = _digest(str(base), base.stat().st_size, base.stat().st_mtime_ns)
    if size != values.get(KEY_BASE_BYTES) or digest != values.get(KEY_BASE_SHA256):
        raise AdapterFileError(f"{path} was made for a base of {values.get(KEY_BASE_BYTES)} bytes, sha256 "
                               f"{str(values.get(KEY_BASE_SHA256))[:16]}...; {base} is {size} bytes, {digest[:16]}...")
    return AdapterPair(adapter=path, base=base, chat_template=values.get("tokenizer.chat_template", ""), base_ref=ref)


@lru_cache(maxsize=8)
def _digest(path: str, size: int, mtime_ns: int) -> tuple[int, str]:
    """(size, sha256) of a base file, computed once per file version in a process."""
    from botpsy.model.bases import file_digest

    return file_digest(Path(path))


def _header_values(path: Path) -> dict:
    """The scalar and string metadata of a GGUF file (tensor data is not read)."""
    from gguf import GGUFReader

    from botpsy.export.gguf_file import GGUFFileError, check_gguf_file

    try:
        check_gguf_file(path)
        reader = GGUFReader(str(path))
    except GGUFFileError as exc:
        raise AdapterFileError(str(exc)) from None
    except (ValueError, OSError) as exc:
        raise AdapterFileError(f"{path} could not be read as GGUF ({exc})") from None
    values = {}
    for key, fld in reader.fields.items():
        if len(fld.types) == 1 and key != "tokenizer.ggml.tokens":  # scalars and strings, not arrays
            values[key] = fld.contents()
    return values
