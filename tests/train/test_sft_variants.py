"""``bench/sft_variants.py``: the data and base variants keep what the experiments rely on."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest


SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "sft_variants.py"
spec = importlib.util.spec_from_file_location("sft_variants", SCRIPT)
variants = importlib.util.module_from_spec(spec)
spec.loader.exec_module(variants)


def run_script(*args):
    done = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def names(example):
    return [t["function"]["name"] for t in example["tools"]]


def test_balanced_redraws_only_distractors_and_flattens_the_prior(device_data, tmp_path):
    out = tmp_path / "bal"
    summary = json.loads(run_script("balanced", "--data", device_data, "--out", out).splitlines()[-1])
    before, after = variants.read_jsonl(device_data / "train.jsonl"), variants.read_jsonl(out / "train.jsonl")
    assert [e["id"] for e in before] == [e["id"] for e in after]
    first_calls = {variants.call_names(e)[0] for e in before if variants.call_names(e)}
    changed = 0
    for old, new in zip(before, after):
        assert old["messages"] == new["messages"]
        if old["kind"] in variants.KEEP_TOOLS_KINDS:
            assert old["tools"] == new["tools"]
            continue
        needed = set(variants.call_names(old))
        assert needed <= set(names(new)) and len(names(new)) == len(names(old)) == len(set(names(new)))
        assert set(names(new)) - needed <= first_calls  # every distractor is some example's first call
        changed += names(old) != names(new)
    assert changed > 0
    for split in ("dev.jsonl", "test.jsonl"):
        assert (out / split).read_text() == (device_data / split).read_text()
    # The block says less about the gold tool than before, on the split it was redrawn for.
    assert summary["tool_prior_rate_train_after"] < summary["tool_prior_rate_train"]
    assert json.loads((out / "variant.json").read_text()) == summary


def test_no_tools_drops_the_block_and_the_kinds_that_need_it(device_data, tmp_path):
    run_script("no_tools", "--data", device_data, "--out", tmp_path / "nt")
    rows = variants.read_jsonl(tmp_path / "nt" / "train.jsonl")
    assert rows and all(r["tools"] == [] for r in rows)
    assert not {r["kind"] for r in rows} & set(variants.NO_TOOLS_SKIP_KINDS)
    assert len(rows) == sum(r["kind"] not in variants.NO_TOOLS_SKIP_KINDS for r in variants.read_jsonl(device_data / "train.jsonl"))


def test_family_init_ties_led_words_to_their_bare_word(tiny_checkpoint, tmp_path):
    import torch

    from botpsy.model.checkpoint import load_checkpoint

    out = tmp_path / "fam"
    info = variants.family_init(str(tiny_checkpoint), str(out))
    before, after = load_checkpoint(tiny_checkpoint), load_checkpoint(out)
    pairs = variants.family_pairs(after.tokenizer)
    assert info["family_pairs"] == len(pairs) > 0
    old = before.model.get_input_embeddings().weight.detach()
    new = after.model.get_input_embeddings().weight.detach()
    led = {token for token, _, _ in pairs}
    untouched = [i for i in range(old.shape[0]) if i not in led]
    assert torch.equal(old[untouched], new[untouched])
    # Same lead, different words: their difference is exactly the bare words' difference over sqrt 2.
    by_lead = {}
    for token, word, lead in pairs:
        by_lead.setdefault(lead, []).append((token, word))
    lead, members = max(by_lead.items(), key=lambda kv: len(kv[1]))
    assert len(members) >= 2, lead
    (t1, w1), (t2, w2) = members[:2]
    assert torch.allclose(new[t1] - new[t2], (old[w1] - old[w2]) / math.sqrt(2), atol=1e-6)
    assert json.loads((out / "meta.json").read_text())["family_init"]["family_pairs"] == len(pairs)


def test_collect_reads_runs_and_says_what_is_missing(tmp_path):
    run = tmp_path / "sft"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({
        "config": {"init": "base", "data": "data", "steps": 3}, "dev": {"loss": 1.5},
        "test_single_call": {"exact_call_rate": 0.1, "tool_choice_rate": 0.5, "tool_choice_rate_other_request": 0.25,
                             "constrained": {"exact_call_rate": 0.3, "miss_no_call_rate": 0.2}}}))
    out = tmp_path / "table.json"
    run_script("collect", run, "--out", out)
    row = json.loads(out.read_text())["runs"][0]
    assert row["constrained_exact"] == 0.3 and row["right_tool_other_request"] == 0.25 and row["dev_loss"] == 1.5
    with pytest.raises(FileNotFoundError, match="finished `botpsy sft` run"):
        variants.collect([str(tmp_path / "nowhere")])


def test_doctests():
    import doctest

    assert doctest.testmod(variants).failed == 0
