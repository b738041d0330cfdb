"""Release formats made from the float GGUF by llama.cpp's own quantizer, then checked.

``gguf`` (the Python package) cannot write K-quants, so every release format goes through
``llama_cpp.llama_model_quantize``. llama.cpp picks types per tensor (Q4_K_M mixes Q4_K and
Q6_K) and silently substitutes other types where a matrix does not fit the blocks, so each
output is read back and every quantized matrix's type is checked against ``Format.matrix_types``.

Example::

    quantize_gguf("gguf/model-f32.gguf", "gguf/model-q4_k_m.gguf", FORMATS["q4_k_m"])
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from botpsy.export.gguf_file import TensorInfo, tensor_table
from botpsy.export.gguf_writer import FLOAT_ONLY_SUFFIXES, ExportError


@dataclass(frozen=True)
class Format:
    name: str  # as given on the command line and in file names
    ftype_name: str  # the llama_ftype constant in llama_cpp
    matrix_types: frozenset[str]  # GGML types every quantized matrix may end up as
    description: str


FORMATS: dict[str, Format] = {
    "f32": Format("f32", "LLAMA_FTYPE_ALL_F32", frozenset({"F32"}), "float32, the writer's own output"),
    "bf16": Format("bf16", "LLAMA_FTYPE_MOSTLY_BF16", frozenset({"BF16"}), "bfloat16 matrices, float32 vectors"),
    "f16": Format("f16", "LLAMA_FTYPE_MOSTLY_F16", frozenset({"F16"}), "float16 matrices, float32 vectors"),
    "q8_0": Format("q8_0", "LLAMA_FTYPE_MOSTLY_Q8_0", frozenset({"Q8_0"}), "8-bit blocks of 32"),
    # Q4_K_M gives most matrices Q4_K and some (value projections, half the down projections,
    # the output/embedding matrix) Q6_K; Q5_K is part of the same K-quant family. Anything
    # else (Q4_0, Q5_0, Q8_0, F16 ...) is llama.cpp's fallback for misfitting shapes.
    "q4_k_m": Format("q4_k_m", "LLAMA_FTYPE_MOSTLY_Q4_K_M", frozenset({"Q4_K", "Q5_K", "Q6_K"}), "4-bit K-quant mix"),
}


def file_name(fmt: str) -> str:
    return f"model-{fmt}.gguf"


def resolve_format(name: str) -> tuple[Format, str | None]:
    """The format to write for ``name`` and a notice when it had to be replaced.

    bf16 needs a llama.cpp that knows ``LLAMA_FTYPE_MOSTLY_BF16``; without it f16 is written
    instead, and the notice says so.
    """
    from botpsy.runtime.llama_backend import has_ftype

    if name not in FORMATS:
        raise ExportError(f"unknown format {name!r}; choose from {', '.join(FORMATS)}")
    fmt = FORMATS[name]
    if not has_ftype(fmt.ftype_name):
        if name == "bf16" and has_ftype(FORMATS["f16"].ftype_name):
            return FORMATS["f16"], "this llama.cpp cannot write bf16; wrote f16 (model-f16.gguf) instead"
        raise ExportError(f"this llama.cpp build has no {fmt.ftype_name}; it cannot write {name}")
    return fmt, None


@contextmanager
def quiet_llama_log():
    """llama.cpp logs one line per tensor while quantizing; keep errors only."""
    logger = logging.getLogger("llama-cpp-python")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def quantize_gguf(source: str | Path, target: str | Path, fmt: Format, threads: int = 0,
                  allow_fallback: bool = False) -> Path:
    """Write ``target`` as ``fmt`` from the float GGUF ``source``; check the types; return ``target``.

    ``allow_fallback``: accept matrices llama.cpp gave another type (a pretrained model whose widths
    are not multiples of the format's block, such as the 0.5B student's 896); the caller records them.
    """
    from botpsy.runtime.llama_backend import quantize_file

    target = Path(target)
    with quiet_llama_log():
        status = quantize_file(source, target, fmt.ftype_name, threads)
    if status != 0:
        raise ExportError(f"llama.cpp could not quantize {source} to {fmt.name} (status {status}; its log above says why)")
    problems = misplaced_types(tensor_table(target), fmt)
    if problems and not allow_fallback:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ExportError(f"{target}: llama.cpp did not give every matrix a {fmt.name} type: {shown}")
    return target


def is_quantized_matrix(tensor: TensorInfo) -> bool:
    """Whether llama.cpp quantizes this tensor: matrices except its float-only kinds."""
    return len(tensor.shape) == 2 and not tensor.name.endswith(FLOAT_ONLY_SUFFIXES)


def misplaced_types(tensors: list[TensorInfo], fmt: Format) -> list[str]:
    """Matrices whose type is not one ``fmt`` allows, as readable lines."""
    return [
        f"{t.name} {list(t.shape)} is {t.type}"
        for t in tensors
        if is_quantized_matrix(t) and t.type not in fmt.matrix_types
    ]
