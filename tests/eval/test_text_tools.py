"""The text tools under the checkers: Punkt-like and rule-based sentence splitting, Treebank
tokens and word counts. Expected values are what NLTK and the official scorers produce."""

from __future__ import annotations

import doctest

import pytest

from botpsy.eval.instructions import (
    ifbench_checks,
    ifbench_format,
    ifeval_checks,
    language,
    registry,
    scoring,
    sentences,
    words,
)
from botpsy.eval.instructions.sentences import split_sentences, split_sentences_by_rules
from botpsy.eval.instructions.words import count_stopwords, count_words, word_tokenize


@pytest.mark.parametrize("text,expected", [
    ("Hello world. How are you? I'm fine!", ["Hello world.", "How are you?", "I'm fine!"]),
    ("Dr. Smith arrived at 5 p.m. on Monday. He left.",
     ["Dr. Smith arrived at 5 p.m. on Monday.", "He left."]),
    ("We sell apples, pears, etc. and more.", ["We sell apples, pears, etc. and more."]),
    ('"Stop." She left.', ['"Stop."', "She left."]),
    ("1. First item\n2. Second item", ["1.", "First item\n2.", "Second item"]),
    ("Wait... what happened? Nothing... The end.",
     ["Wait... what happened?", "Nothing...", "The end."]),
    ("J. K. Rowling wrote it. Then she rested.", ["J. K. Rowling wrote it.", "Then she rested."]),
    ("Title line\nno period here", ["Title line\nno period here"]),
    ("Wow!! Great.", ["Wow!!", "Great."]),
])
def test_punkt_like_sentences(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text,expected", [
    ('We call it "paraphrasing." Next one.', ['We call it "paraphrasing".', "Next one."]),
    ("The U.S. Army is big. Dr. Who is 3.5 m tall.", ["The U.S. Army is big.", "Dr. Who is 3.5 m tall."]),
    ("Really?! Yes.", ["Really?", "!", "Yes."]),
    ("Visit example.com today. Bye", ["Visit example.com today.", "Bye"]),
    ("Line one\nline two.", ["Line one line two."]),
])
def test_rule_based_sentences(text, expected):
    assert split_sentences_by_rules(text) == expected


@pytest.mark.parametrize("text,expected", [
    ('She said "I can\'t." Then left.',
     ["She", "said", "``", "I", "ca", "n't", ".", "''", "Then", "left", "."]),
    ("DON'T stop, cannot (ever) -- ok?", ["DO", "N'T", "stop", ",", "can", "not", "(", "ever", ")",
                                          "--", "ok", "?"]),
    ("It's 3,000 items: 1.5 each...", ["It", "'s", "3,000", "items", ":", "1.5", "each", "..."]),
    ("well-known e-mail", ["well-known", "e-mail"]),
])
def test_treebank_tokens(text, expected):
    assert word_tokenize(text) == expected


def test_word_and_stopword_counts():
    assert count_words("It's a well-known fact, isn't it?") == 9
    assert count_stopwords("The cat and THE dog") == 3


@pytest.mark.parametrize("module", [ifbench_checks, ifbench_format, ifeval_checks, language,
                                    registry, scoring, sentences, words])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
