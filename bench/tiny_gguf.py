"""The model the runtime benchmarks run on: the default tiny Qwen3.5 spec, exported to GGUF once.

The spec is ``ModelSpec()`` (4 layers: three Gated DeltaNet, one gated attention; hidden 256),
untrained: decode speed and prefix-cache timing do not depend on the weights' values. Its
tokenizer is trained on the device world's tool declarations and a few chat texts, so the
tools block tokenizes about as compactly as with a real vocabulary. Built under
``bench_out/tiny_model/`` on first use and reused afterwards.

Example::

    path = tiny_gguf()            # bench_out/tiny_model/gguf/model-q8_0.gguf
    tools = device_tools()        # the world's tool declarations, in registry order
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / "bench_out" / "tiny_model"

CHAT_TEXTS = [
    "Set an alarm for 7:30 tomorrow and call it gym.",
    "Send a message to Alice saying I'll be late.",
    "The user wants an alarm. I will call set_alarm with the hour and minute.",
    "<tool_call>\n<function=set_alarm>\n<parameter=time>\n07:30\n</parameter>\n</function>\n</tool_call>",
    "Turn off Wi-Fi and lower the brightness, then tell me the weather for tomorrow.",
]


def device_tools() -> list[dict]:
    from botpsy.world.world import REGISTRY

    return [tool.spec() for tool in REGISTRY.values()]


def tiny_gguf(fmt: str = "q8_0", vocab_size: int = 4096) -> Path:
    """Path of the tiny model's GGUF in ``fmt``, building tokenizer, checkpoint and export if missing."""
    gguf_dir = MODEL_DIR / "gguf"
    path = gguf_dir / f"model-{fmt}.gguf"
    if path.is_file():
        return path
    from botpsy.export.command import ExportConfig, export_checkpoint
    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.model.reference import ModelSpec, build_model
    from botpsy.model.tokenizer import train_tokenizer

    texts = [json.dumps(tool, ensure_ascii=False) for tool in device_tools()] + CHAT_TEXTS
    tokenizer = train_tokenizer(texts * 3, vocab_size=vocab_size)
    model = build_model(ModelSpec(), tokenizer, seed=0)
    save_checkpoint(model, tokenizer, MODEL_DIR / "base", stage="base", meta={"purpose": "runtime benchmarks"})
    export_checkpoint(ExportConfig(checkpoint=str(MODEL_DIR / "base"), out=str(gguf_dir), formats=fmt))
    return path
