"""Read GGUF files back: a header check that names what is wrong, and tensor types per file.

llama.cpp given a damaged file may abort the process or print a cryptic loader error, and
``gguf.GGUFReader`` fails with numpy reshape messages. ``check_gguf_file`` walks the header,
metadata and tensor table itself and says plainly whether the file is not GGUF at all, of an
unknown version, or truncated (and where); only files that pass are handed on.

Example::

    layout = check_gguf_file("runs/speedrun/gguf/model-q8_0.gguf")   # raises GGUFFileError
    tensor_type_counts(layout.path)                                    # {"F32": 23, "Q8_0": 32}
"""

from __future__ import annotations

import mmap
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
HEADER_BYTES = 24  # magic, version (u32), tensor count (u64), metadata count (u64)
DEFAULT_ALIGNMENT = 32

# GGUF metadata value types -> struct format of one scalar (8 = string, 9 = array are special).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFFileError(ValueError):
    """A file that is not a loadable GGUF; the message names the file and what is wrong."""


@dataclass(frozen=True)
class GGUFLayout:
    path: Path
    version: int
    tensor_count: int
    metadata_count: int
    architecture: str | None
    data_offset: int  # where tensor data begins
    expected_size: int  # bytes the tensor table says the file needs
    file_size: int
    general_type: str | None = None  # "model", or "adapter" for a LoRA adapter file


class _Cursor:
    """Sequential little-endian reads that report truncation instead of raising struct.error."""

    def __init__(self, buffer, path: Path, size: int):
        self.buffer, self.path, self.size, self.offset = buffer, path, size, 0

    def take(self, fmt: str, what: str):
        width = struct.calcsize("<" + fmt)
        if self.offset + width > self.size:
            raise GGUFFileError(
                f"{self.path} is truncated: it ends at byte {self.size} while reading {what} at byte {self.offset}"
            )
        value = struct.unpack_from("<" + fmt, self.buffer, self.offset)
        self.offset += width
        return value[0] if len(value) == 1 else value

    def string(self, what: str) -> str:
        length = self.take("Q", what)
        if length > self.size:
            raise GGUFFileError(f"{self.path} is corrupt: {what} at byte {self.offset} claims {length:,} bytes, more than the whole file")
        if self.offset + length > self.size:
            raise GGUFFileError(f"{self.path} is truncated: {what} at byte {self.offset} runs past the end ({self.size} bytes)")
        raw = bytes(self.buffer[self.offset : self.offset + length])
        self.offset += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFFileError(f"{self.path} is corrupt: {what} at byte {self.offset - length} is not UTF-8") from None

    def value(self, kind: int, what: str):
        if kind in _SCALARS:
            return self.take(_SCALARS[kind], what)
        if kind == _STRING:
            return self.string(what)
        if kind == _ARRAY:
            item_kind, count = self.take("I", what), self.take("Q", what)
            if count > self.size:  # every item takes at least one byte
                raise GGUFFileError(f"{self.path} is corrupt: {what} claims {count:,} items, more than the file holds")
            if item_kind in _SCALARS:  # skip fixed-width arrays in one step
                width = struct.calcsize("<" + _SCALARS[item_kind])
                if self.offset + width * count > self.size:
                    raise GGUFFileError(f"{self.path} is truncated: {what} runs past the end ({self.size} bytes)")
                self.offset += width * count
                return None
            for _ in range(count):
                self.value(item_kind, what)
            return None
        raise GGUFFileError(f"{self.path} is corrupt: {what} has unknown value type {kind} at byte {self.offset - 4}")


def read_layout(path: str | Path) -> GGUFLayout:
    """Parse header, metadata and tensor table of ``path`` (tensor data is not read)."""
    path = Path(path)
    if not path.is_file():
        raise GGUFFileError(f"{path} does not exist or is not a file")
    size = path.stat().st_size
    if size < HEADER_BYTES:
        raise GGUFFileError(f"{path} is truncated: {size} bytes, shorter than the {HEADER_BYTES}-byte GGUF header")
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        magic = bytes(buffer[:4])
        if magic != GGUF_MAGIC:
            raise GGUFFileError(f"{path} is not a GGUF file: it starts with {magic!r}, not {GGUF_MAGIC!r}")
        cursor = _Cursor(buffer, path, size)
        cursor.offset = 4
        version = cursor.take("I", "the version")
        if version not in SUPPORTED_VERSIONS:
            raise GGUFFileError(f"{path} has GGUF version {version}; supported versions are {SUPPORTED_VERSIONS}")
        tensor_count, metadata_count = cursor.take("Q", "the tensor count"), cursor.take("Q", "the metadata count")
        if tensor_count > size or metadata_count > size:  # each entry needs at least one byte
            raise GGUFFileError(f"{path} is corrupt: it claims {tensor_count} tensors and {metadata_count} metadata keys in {size} bytes")
        architecture, alignment, general_type = _read_metadata(cursor, metadata_count)
        tensors_end = _read_tensor_table(cursor, tensor_count)
        data_offset = -(-cursor.offset // alignment) * alignment
    return GGUFLayout(path, version, tensor_count, metadata_count, architecture, data_offset, data_offset + tensors_end,
                      size, general_type)


def _read_metadata(cursor: _Cursor, count: int) -> tuple[str | None, int, str | None]:
    architecture, alignment, general_type = None, DEFAULT_ALIGNMENT, None
    for index in range(count):
        key = cursor.string(f"metadata key #{index}")
        value = cursor.value(cursor.take("I", f"the type of {key!r}"), f"the value of {key!r}")
        if key == "general.architecture":
            architecture = value
        elif key == "general.alignment":
            alignment = value
        elif key == "general.type":
            general_type = value
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise GGUFFileError(f"{cursor.path} is corrupt: general.alignment {alignment!r} is not a power of two")
    return architecture, alignment, general_type


def _read_tensor_table(cursor: _Cursor, count: int) -> int:
    """Walk the tensor infos; return where the last tensor's data ends, relative to the data start."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    end = 0
    for index in range(count):
        name = cursor.string(f"the name of tensor #{index}")
        n_dims = cursor.take("I", f"the rank of {name!r}")
        if n_dims > 8:
            raise GGUFFileError(f"{cursor.path} is corrupt: tensor {name!r} claims {n_dims} dimensions")
        dims = [cursor.take("Q", f"the shape of {name!r}") for _ in range(n_dims)]
        type_id = cursor.take("I", f"the type of {name!r}")
        offset = cursor.take("Q", f"the data offset of {name!r}")
        try:
            block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
        except (ValueError, KeyError):
            raise GGUFFileError(f"{cursor.path} is corrupt: tensor {name!r} has unknown type id {type_id}") from None
        elements = 1
        for d in dims:
            elements *= d
        end = max(end, offset + elements // block * block_bytes)
    return end


def check_gguf_file(path: str | Path) -> GGUFLayout:
    """``read_layout`` plus the size check: the file must hold every byte its tensor table names."""
    layout = read_layout(path)
    if layout.file_size < layout.expected_size:
        raise GGUFFileError(
            f"{layout.path} is truncated: it has {layout.file_size:,} bytes but its tensors need "
            f"{layout.expected_size:,} ({layout.expected_size - layout.file_size:,} missing)"
        )
    return layout


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type: str  # GGML type name: "F32", "BF16", "Q8_0", "Q4_K", ...
    shape: tuple[int, ...]  # GGML order: the row length (input dimension) first


def tensor_table(path: str | Path) -> list[TensorInfo]:
    """Every tensor's name, type and shape, from a file that passed ``check_gguf_file``."""
    from gguf import GGUFReader

    check_gguf_file(path)
    return [TensorInfo(t.name, t.tensor_type.name, tuple(int(d) for d in t.shape)) for t in GGUFReader(str(path)).tensors]


def tensor_type_counts(path: str | Path) -> dict[str, int]:
    """How many tensors of each GGML type, e.g. ``{"F32": 23, "Q8_0": 32}``."""
    return dict(sorted(Counter(t.type for t in tensor_table(path)).items()))
