"""Fixtures for the bench tests: the untrained two-layer checkpoint exported to two GGUF formats."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def bench_ggufs(tmp_path_factory, tiny_checkpoint):
    """{"f32": path, "q8_0": path}: a tiny hybrid Qwen3.5 model, the speed of any real one irrelevant here."""
    from botpsy.export.command import ExportConfig, export_checkpoint

    out = tmp_path_factory.mktemp("bench_gguf")
    export_checkpoint(ExportConfig(checkpoint=str(tiny_checkpoint), out=str(out), formats="f32,q8_0", threads=1))
    return {"f32": out / "model-f32.gguf", "q8_0": out / "model-q8_0.gguf"}
