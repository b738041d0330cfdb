"""The reference model must be able to learn to copy at the SFT default learning rate.

At the old default (3e-3) the 3:1 hybrid model never learned the copy task, while an
all-attention model did (see ``botpsy.model.probe`` and ``bench/copy_probe.py``).
"""

import pytest

from botpsy.model.probe import ALPHABET, FILLER, copy_batch, induction_batch, residual_norms, rotation_batch


def test_copy_batch_scores_only_the_repeat():
    import torch

    ids, labels = copy_batch(torch.Generator().manual_seed(1), n=3, length=4)
    assert ids.shape == (3, 10)
    assert torch.equal(ids[:, 1:5], ids[:, 6:]) and (labels[:, :6] == -100).all()
    assert torch.equal(labels[:, 6:], ids[:, 6:])
    ids, labels = copy_batch(torch.Generator().manual_seed(1), n=2, length=4, prefix=5)
    assert ids.shape == (2, 15) and (labels[:, :11] == -100).all() and torch.equal(ids[:, 6:10], ids[:, 11:])
    assert ((ids[:, 1:6] >= 300) & (ids[:, 1:6] < 400)).all()


def test_induction_batch_leaves_only_lookup_to_predict_the_repeat():
    import torch

    ids, labels = induction_batch(torch.Generator().manual_seed(2), n=64, length=5, gap=12)
    assert ids.shape == (64, 22) and ((ids >= ALPHABET.start) & (ids < ALPHABET.stop)).all()
    assert (labels[:, :-4] == -100).all() and torch.equal(labels[:, -4:], ids[:, -4:])
    starts = set()
    for row in ids.tolist():
        repeat = row[-5:]
        start = next(i for i in range(0, 13) if row[i:i + 5] == repeat)  # the first copy, somewhere in the filler
        starts.add(start)
    assert len(starts) > 5  # the gap varies, so no fixed offset finds the original


def test_rotation_batch_repeats_distinct_tokens_from_a_varying_offset():
    import torch

    ids, labels = rotation_batch(torch.Generator().manual_seed(3), n=64, length=10, prefix=3)
    assert ids.shape == (64, 23) and ((ids[:, :3] >= FILLER.start) & (ids[:, :3] < FILLER.stop)).all()
    assert (labels[:, :-9] == -100).all() and torch.equal(labels[:, -9:], ids[:, -9:])
    shifts = set()
    for row in ids.tolist():
        x, repeat = row[3:13], row[13:]
        assert len(set(x)) == 10  # distinct, so the token before each answer points to one place
        shift = x.index(repeat[0])
        assert repeat == x[shift:] + x[:shift] and shift > 0
        shifts.add(shift)
    assert len(shifts) > 5
    with pytest.raises(ValueError, match="length"):
        rotation_batch(torch.Generator(), n=1, length=101)


@pytest.mark.slow
def test_hybrid_reference_model_learns_to_copy_at_the_sft_learning_rate(tiny_tokenizer):
    from botpsy.model.probe import copy_probe
    from botpsy.model.reference import PRESETS, build_model
    from botpsy.train.sft import SFTConfig

    model = build_model(PRESETS["tiny"], tiny_tokenizer, seed=0)
    assert model.config.layer_types.count("linear_attention") == 3
    result = copy_probe(model, SFTConfig().lr, steps=150)
    assert result.final_accuracy >= 0.95, result.accuracy
    # The residual stream stays within two orders of magnitude of the embeddings (it did not at 3e-3).
    assert len(result.norms) == 5 and result.norms[3] < 100 * result.norms[0]


def test_residual_norms_has_one_entry_per_layer_plus_embeddings(tiny_checkpoint):
    import torch

    from botpsy.model.checkpoint import load_checkpoint

    model = load_checkpoint(tiny_checkpoint).model
    norms = residual_norms(model, torch.tensor([[5, 6, 7, 8]]))
    assert len(norms) == model.config.num_hidden_layers + 1 and all(n > 0 for n in norms)


def test_doctests():
    import doctest

    from botpsy.model import probe

    assert doctest.testmod(probe).failed == 0


def test_probe_bench_runs_rotation_on_the_hybrid_and_gpt2(tmp_path):
    """``bench/copy_probe.py`` end to end for two steps: a JSON row per layout, GPT-2 included."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "probe.json"
    script = Path(__file__).resolve().parents[2] / "bench" / "copy_probe.py"
    done = subprocess.run([sys.executable, str(script), "--task", "rotation", "--length", "12", "--lrs", "1e-3",
                           "--layouts", "hybrid,gpt2", "--steps", "2", "--batch", "2", "--threads", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr  # two steps cannot reach the target, and the exit code says so
    result = json.loads(out.read_text())
    assert [r["layout"] for r in result["probes"]] == ["hybrid", "gpt2"] and result["target_met"] is False
    assert result["probes"][1]["layer_types"] == ["gpt2_attention"] * 4 and len(result["probes"][1]["residual_rms"]) == 5


def test_vocabulary_induction_batch_repeats_strings_from_the_whole_vocabulary(tiny_tokenizer):
    import torch

    from botpsy.model.probe import corpus_weights, vocabulary_alphabet, vocabulary_induction_batch

    alphabet = vocabulary_alphabet(tiny_tokenizer)
    markup = {i for t, i in tiny_tokenizer.get_vocab().items() if t.startswith("<")}
    assert markup and not markup & set(alphabet.tolist()) and len(alphabet) == len(tiny_tokenizer) - len(markup)
    ids, labels = vocabulary_induction_batch(torch.Generator().manual_seed(4), alphabet, n=32, blocks=3, gap=6, pad_id=0)
    for row, label in zip(ids.tolist(), labels.tolist()):
        scored = [i for i, y in enumerate(label) if y != -100]
        assert 3 * 2 <= len(scored) <= 3 * 7 and all(label[i] == row[i] for i in scored)
        for i in scored:  # each scored token continues a string seen 1..6 filler tokens + its length earlier
            assert any(row[j] == row[i] and row[j - 1] == row[i - 1] for j in range(max(1, i - 6 - 8), i - 3))
    assert set(ids[labels != -100].tolist()) <= set(alphabet.tolist())
    # Corpus weights: frequent ids are drawn far more often than ids the text never uses.
    weights = corpus_weights(tiny_tokenizer, alphabet, "the alarm " * 50)
    common = alphabet[weights.argmax()]
    ids, labels = vocabulary_induction_batch(torch.Generator().manual_seed(5), alphabet, weights, n=8, gap=4)
    assert (ids == common).float().mean() > 0.2


def test_vocab_induction_bench_trains_a_checkpoint_and_saves_it(tmp_path, tiny_checkpoint):
    """``bench/vocab_induction_probe.py`` end to end for two steps, with the corpus sampler and --save."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.txt").write_text("Set an alarm at 7:30 for the gym. Turn the brightness to 40.\n" * 20)
    out, saved = tmp_path / "vi.json", tmp_path / "pretrained"
    script = Path(__file__).resolve().parents[2] / "bench" / "vocab_induction_probe.py"
    done = subprocess.run([sys.executable, str(script), "--base", str(tiny_checkpoint), "--data", str(data), "--steps", "2",
                           "--every", "1", "--batch", "2", "--save", str(saved), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert [row[0] for row in result["curve_step_loss_accuracy"]] == [1, 2]
    assert result["unigram_perplexity"] < result["alphabet_size"] and 0 < result["commonest_token_accuracy"] < 1
    meta = json.loads((saved / "meta.json").read_text())
    assert meta["stage"] == "base" and meta["induction_pretraining"]["steps"] == 2
