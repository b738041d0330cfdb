"""botpsy's released models: a committed LoRA adapter on a pinned registry base, built locally into GGUF.

A release is small enough to live in the repository (the adapter, 17 MB) because its base comes
from the package registry, pinned and hash-checked (``botpsy.model.bases``). Building one writes
the file a user runs on their machine from parts anyone can check, with botpsy's own exporter:
for the ``lora`` format the adapter alone, as a llama.cpp adapter GGUF that runs on the untouched
base file (seconds, nothing merged); for a merged format (``q8_0``, ``q4_k_m``) the adapter merged
into the base and quantized (a few minutes):

    botpsy models --build botpsy-0.5b-sft        # pull the base if needed, write the adapter file (~15 s)
    botpsy chat --model botpsy-0.5b-sft          # a release name works wherever a model file does

The built file's sha256 is compared with the one recorded when the release was made. The adapter
file involves no torch arithmetic and should match everywhere; a merged build is deterministic on
one machine, but another CPU or torch version may round a few values differently, so a different
hash is reported, not refused (the parity check is the real test).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from botpsy.model.bases import BaseModelError, is_base_name, models_cache, pull

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Release:
    name: str
    folder: str  # the committed adapter folder, relative to the repository root
    base: str  # a known base name (botpsy models)
    format: str  # the GGUF format built for users: a merged quantization, or "lora" (adapter on the base file)
    sha256: str  # of the built file, as measured when the release was made
    stage: str  # which recipe stage the adapter comes from

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.format}.gguf"


RELEASES = {
    "botpsy-0.5b-sft": Release(
        # The adapter file on the untouched Q4_K_M base: 70.0% of the 150 device tasks, as bf16 (70.0%);
        # the merged model re-quantized to Q4_K_M solved 61.3% (botpsy.export.lora_gguf says why).
        name="botpsy-0.5b-sft", folder="release/botpsy-0.5b-sft", base="qwen2.5-coder-0.5b", format="lora",
        sha256="4c6980ebb96647b1d04044fd9ac5840941c48b683fd0a3c9e4b4f8a081c312fc", stage="sft"),
    "botpsy-0.5b-fn2": Release(
        # The SFT adapter trained 120 more steps with requests against 66 everyday functions: the device
        # tasks held (69.3% of 150), BFCL 42.0% of 300 with thinking on and 48.3% with it off (the SFT 26.7%).
        name="botpsy-0.5b-fn2", folder="release/botpsy-0.5b-fn2", base="qwen2.5-coder-0.5b", format="lora",
        sha256="9996fe19a6d8591a59d057c53ddb2e7f3821f5cd64b8e233ce3bbe7b257ebac1", stage="sft"),
}


def is_release_name(text: str) -> bool:
    return str(text) in RELEASES


def release(name: str) -> Release:
    if name not in RELEASES:
        raise BaseModelError(f"unknown release {name!r}; known: {', '.join(RELEASES)}")
    return RELEASES[name]


def adapter_folder(rel: Release, root: Path | None = None) -> Path:
    folder = (root or REPO_ROOT) / rel.folder
    if not (folder / "adapter_model.safetensors").is_file():
        raise BaseModelError(f"the adapter of {rel.name} is missing ({folder}); it is committed in the botpsy "
                             "repository: run from a clone")
    return folder


def built_path(name: str, cache: Path | None = None) -> Path:
    """The built release file in the cache; an error that says how to build it when absent."""
    rel = release(name)
    path = (cache or models_cache()) / rel.filename
    if not path.is_file():
        raise BaseModelError(f"release {name!r} is not built yet ({path}); run `botpsy models --build {name}`")
    return path


def build(name: str, cache: Path | None = None, threads: int = 0, root: Path | None = None) -> dict:
    """Merge the release's adapter into its base and export it; returns the build record.

    A file built before is reused when its build record is there. The export runs in a temporary
    folder inside the cache and only the finished file is moved in, so an interrupted build leaves
    nothing behind.
    """
    from botpsy.export.command import ExportConfig, export_checkpoint
    from botpsy.model.bases import file_digest

    rel = release(name)
    cache = cache or models_cache()
    target, record_file = cache / rel.filename, cache / f"{rel.name}.build.json"
    if target.is_file() and record_file.is_file():
        return json.loads(record_file.read_text())
    folder = adapter_folder(rel, root)
    if is_base_name(rel.base):
        pull(rel.base, cache)  # verified; a no-op when cached
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as tmp:
        # "lora": the adapter alone, which llama.cpp applies on the pulled base (seconds, nothing merged).
        exported = export_checkpoint(ExportConfig(checkpoint=str(folder), out=tmp, formats=rel.format,
                                                  threads=threads, name=rel.name, allow_fallback=True))
        size, sha256 = file_digest(Path(tmp) / exported["files"][rel.format]["file"])
        record = {"release": rel.name, "stage": rel.stage, "base": rel.base, "adapter": str(folder),
                  "format": rel.format, "file": str(target), "bytes": size, "sha256": sha256,
                  "recorded_sha256": rel.sha256, "matches_recorded": sha256 == rel.sha256,
                  "notices": exported.get("notices", [])}
        shutil.move(str(Path(tmp) / exported["files"][rel.format]["file"]), target)
    record_file.write_text(json.dumps(record, indent=2) + "\n")
    return record
