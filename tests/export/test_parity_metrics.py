"""The parity arithmetic on hand-made logits: KL, top-1 with and without ties, greedy divergence."""

from __future__ import annotations

import numpy as np
import pytest

from botpsy.export.parity import THRESHOLDS, Outputs, compare, missed_thresholds


class _Decoder:
    def decode(self, ids):
        return " ".join(map(str, ids))


def outputs(logits, greedy=(1, 2, 3), tokens=(5, 6)):
    return Outputs({"text": np.array(logits, dtype=np.float32)}, {"prompt": list(greedy)}, {"text": list(tokens)})


def test_identical_outputs_agree_fully():
    ref = outputs([[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]])
    metrics = compare(ref, outputs([[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]]), _Decoder())
    assert metrics["max_abs_logit_diff"] == 0 and metrics["mean_kl"] == pytest.approx(0, abs=1e-12)
    assert metrics["top1_agreement"] == metrics["top1_agreement_raw"] == 1.0
    assert metrics["greedy_identical"] == 1.0 and metrics["tokenizer_agreement"] == 1.0
    assert missed_thresholds("bf16", metrics, THRESHOLDS["bf16"]) == []


def test_kl_matches_the_formula():
    p_logits, q_logits = np.array([1.0, 2.0, 0.5]), np.array([1.5, 1.0, 0.5])
    p, q = np.exp(p_logits) / np.exp(p_logits).sum(), np.exp(q_logits) / np.exp(q_logits).sum()
    metrics = compare(outputs([p_logits]), outputs([q_logits]), _Decoder())
    assert metrics["mean_kl"] == pytest.approx(float((p * np.log(p / q)).sum()), rel=1e-6)


def test_near_ties_count_only_within_the_margin():
    ref = outputs([[1.00, 1.01, -3.0], [0.0, 2.0, -1.0]])
    flipped = outputs([[1.02, 1.01, -3.0], [0.0, 2.0, -1.0]])  # picks token 0, 0.01 below the reference best
    assert compare(ref, flipped, _Decoder(), tie_margin=0.05)["top1_agreement"] == 1.0
    strict = compare(ref, flipped, _Decoder(), tie_margin=0.0)
    assert strict["top1_agreement"] == strict["top1_agreement_raw"] == 0.5
    assert "top-1 agreement 50.00% < 90%" in missed_thresholds("q4_k_m", strict, THRESHOLDS["q4_k_m"])[0]


def test_greedy_divergence_and_tokenizer_mismatch_are_reported():
    ref = outputs([[0.0, 1.0]], greedy=(4, 5, 6, 7))
    other = outputs([[0.0, 1.0]], greedy=(4, 5, 9), tokens=(5, 7))
    metrics = compare(ref, other, _Decoder())
    assert metrics["greedy"]["prompt"] == {"identical": False, "first_difference": 2,
                                           "transformers": "4 5 6 7", "gguf": "4 5 9"}
    assert metrics["tokenizer_mismatches"] == ["text"]
    missed = missed_thresholds("bf16", metrics, THRESHOLDS["bf16"])
    assert any("greedy text differs on ['prompt']" in m for m in missed)
    assert any("llama.cpp tokenizes differently: ['text']" in m for m in missed)
    # A shorter continuation that is a prefix of the other still differs (one stopped early).
    prefix = compare(ref, outputs([[0.0, 1.0]], greedy=(4, 5)), _Decoder())
    assert prefix["greedy"]["prompt"]["first_difference"] == 2
