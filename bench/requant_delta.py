"""How much of a LoRA fine-tune survives quantizing the merged weights again.

    .venv/bin/python bench/requant_delta.py    # -> bench_out/student_eval_2026-12-05/requant_delta.json

The student trains a LoRA adapter on the *dequantized* base (mostly Q5_0 and Q4_K blocks). Export
merges the adapter and quantizes the merged weights; a change smaller than the quantization step
can be rounded back onto the base's grid. For a sample of matrices this compares the change the
adapter intended (merged bf16 file minus the base) with the change that survived in each quantized
file (that file minus the base), all dequantized with ``gguf``:

* ``kept``: the projection of the surviving change on the intended one, relative to its size
  (1 = all of it; 0 = none);
* ``cos``: the cosine between the two changes;
* ``error``: the norm of (surviving - intended) relative to the intended change.

Reads the files ``botpsy student`` wrote (``runs/student/gguf``) and the pulled base.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LAYERS = (0, 12, 23)
MATRICES = ("attn_q", "attn_v", "ffn_gate", "ffn_down")


def dequantized(reader, name: str) -> tuple[np.ndarray, str]:
    from gguf.quants import dequantize

    tensor = next(t for t in reader.tensors if t.name == name)
    return dequantize(tensor.data, tensor.tensor_type).astype(np.float32).reshape(-1), tensor.tensor_type.name


def compare(intended: np.ndarray, survived: np.ndarray) -> dict:
    return {"kept": round(float(intended @ survived / (intended @ intended)), 4),
            "cos": round(float(intended @ survived / np.linalg.norm(intended) / np.linalg.norm(survived)), 4),
            "error": round(float(np.linalg.norm(survived - intended) / np.linalg.norm(intended)), 4)}


def main() -> int:
    from gguf import GGUFReader

    from botpsy.model.bases import resolve_base

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf-dir", default="runs/student/gguf")
    parser.add_argument("--base", default="qwen2.5-coder-0.5b")
    parser.add_argument("--out", default="bench_out/student_eval_2026-12-05/requant_delta.json")
    args = parser.parse_args()
    gguf_dir = Path(args.gguf_dir)
    readers = {"base": GGUFReader(str(resolve_base(args.base)))}
    for fmt in ("bf16", "q8_0", "q4_k_m"):
        readers[fmt] = GGUFReader(str(gguf_dir / f"model-{fmt}.gguf"))
    rows = []
    for layer in LAYERS:
        for matrix in MATRICES:
            name = f"blk.{layer}.{matrix}.weight"
            weights = {key: dequantized(reader, name) for key, reader in readers.items()}
            base = weights["base"][0]
            intended = weights["bf16"][0] - base
            row = {"tensor": name, "types": {key: t for key, (_, t) in weights.items()},
                   "change_relative_to_weights": round(float(np.linalg.norm(intended) / np.linalg.norm(base)), 4)}
            for fmt in ("q8_0", "q4_k_m"):
                row[fmt] = compare(intended, weights[fmt][0] - base)
            rows.append(row)
            print(json.dumps(row))
    summary = {fmt: {stat: [min(r[fmt][stat] for r in rows), max(r[fmt][stat] for r in rows)]
                     for stat in ("kept", "cos")} for fmt in ("q8_0", "q4_k_m")}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"what": __doc__.split("\n\n")[0], "gguf_dir": str(gguf_dir), "base": args.base,
                               "range": summary, "matrices": rows}, indent=1) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
