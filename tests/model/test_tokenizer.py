"""The byte-level BPE tokenizer: special tokens, lossless round trips, no normalisation."""

from __future__ import annotations

import json

import pytest

from botpsy.cli import main as cli_main
from botpsy.model.tokenizer import SPECIAL_TOKENS, load_tokenizer, train_tokenizer

MIXED = ["hello world", "你好，世界", '{"a": [1, 2.5, true, null]}', "def f(x):\n    return x * 2", "emoji 😀🚀", "e\u0301 vs é"]


@pytest.mark.parametrize("token", SPECIAL_TOKENS)
def test_special_tokens_are_single_ids(tiny_tokenizer, token):
    ids = tiny_tokenizer(f"a{token}b", add_special_tokens=False)["input_ids"]
    assert tiny_tokenizer.convert_tokens_to_ids(token) in ids
    assert len(tiny_tokenizer(token, add_special_tokens=False)["input_ids"]) == 1


@pytest.mark.parametrize("text", MIXED)
def test_round_trip_is_lossless_without_normalisation(tiny_tokenizer, text):
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tiny_tokenizer.decode(ids) == text  # "e + combining accent" must not become "é"


def test_vocab_size_respected_and_too_small_rejected():
    tok = train_tokenizer(["abc abd abe"] * 50, vocab_size=300)
    assert len(tok) <= 300
    with pytest.raises(ValueError, match="below the 256 byte symbols"):
        train_tokenizer(["x"], vocab_size=100)


def test_cli_trains_saves_and_loads(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(MIXED * 10))
    out = tmp_path / "tok"
    assert cli_main(["tokenizer", "--corpus", str(corpus), "--vocab-size", "400", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["vocab_size"] <= 400 and result["special_tokens"]["<|im_end|>"] >= 0
    tok = load_tokenizer(out)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"


def test_missing_corpus_is_a_clear_error(tmp_path, capsys):
    assert cli_main(["tokenizer", "--corpus", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "t")]) == 2
    assert "does not exist" in capsys.readouterr().err
