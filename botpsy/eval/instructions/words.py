"""Word-level text tools shared by the instruction checkers.

* ``count_words``: the ``\\w+`` word count both official scorers use;
* ``word_tokenize``: Penn-Treebank-style tokens like ``nltk.word_tokenize`` (sentences first,
  then punctuation, quotes and contractions split off: ``"don't!"`` -> ``do n't !``);
* ``count_stopwords``: how many of those words are English stop words (``lexicon.STOPWORDS``).

Example::

    >>> word_tokenize('She said "I can\\'t." Then left.')
    ['She', 'said', '``', 'I', 'ca', "n't", '.', "''", 'Then', 'left', '.']
"""

from __future__ import annotations

import re

from botpsy.eval.instructions.lexicon import STOPWORDS
from botpsy.eval.instructions.sentences import split_sentences

_WORD = re.compile(r"\w+")


def count_words(text: str) -> int:
    """Number of ``\\w+`` runs, the word count of IFEval's length constraints."""
    return len(_WORD.findall(text))


def count_stopwords(text: str) -> int:
    """Number of ``\\w+`` runs that are English stop words (case-insensitive)."""
    return sum(1 for word in _WORD.findall(text) if word.lower() in STOPWORDS)


def _rules(*pairs: tuple[str, str]) -> list[tuple[re.Pattern, str]]:
    return [(re.compile(pattern), replacement) for pattern, replacement in pairs]


# Opening quotes become ``, and a quote before a word that is not a contraction splits off.
_OPENING_QUOTES = _rules(
    (r"([«“‘„]|`+)", r" \1 "),
    (r'^"', r"``"),
    (r"(``)", r" \1 "),
    (r"""([ (\[{<])("|'{2})""", r"\1 `` "),
    (r"(?i)(')(?!re|ve|ll|m|t|s|d|n)(\w)\b", r"\1 \2"),
)
# Punctuation: a sentence-final period, commas and colons not inside numbers, ellipses,
# symbols, ?/!, a quote after a word, and asterisks each become their own token.
_PUNCTUATION = _rules(
    (r"""([^.])(\.)([\])}>"']*)\s*$""", r"\1 \2 \3 "),
    (r"([:,])([^\d])", r" \1 \2"),
    (r"([:,])$", r" \1 "),
    (r"\.{2,}", r" \g<0> "),
    (r"[;@#$%&]", r" \g<0> "),
    (r"""([^.])(\.)([\])}>"']*)\s*$""", r"\1 \2\3 "),
    (r"[?!]", r" \g<0> "),
    (r"([^'])' ", r"\1 ' "),
    (r"[*]", r" \g<0> "),
)
_BRACKETS_AND_DASHES = _rules((r"[\][(){}<>]", r" \g<0> "), (r"--", r" -- "))
# Closing quotes become '', and clitics ('s, 're, n't, ...) split from their word.
_CLOSING_QUOTES = _rules(
    (r"([»”’])", r" \1 "),
    (r"''", " '' "),
    (r'"', " '' "),
    (r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 "),
    (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
)
# Fused words that the Treebank convention splits in two (cannot -> can not, gonna -> gon na).
_FUSED = _rules(*[(pattern, r" \1 \2 ") for pattern in (
    r"(?i)\b(can)(not)\b", r"(?i)\b(d)('ye)\b", r"(?i)\b(gim)(me)\b", r"(?i)\b(gon)(na)\b",
    r"(?i)\b(got)(ta)\b", r"(?i)\b(lem)(me)\b", r"(?i)\b(more)('n)\b", r"(?i)\b(wan)(na)(?=\s)",
    r"(?i) ('t)(is)\b", r"(?i) ('t)(was)\b",
)])


def _apply(rules: list[tuple[re.Pattern, str]], text: str) -> str:
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


def treebank_tokens(sentence: str) -> list[str]:
    """Tokens of one sentence under the Penn Treebank conventions NLTK follows."""
    text = _apply(_OPENING_QUOTES, sentence)
    text = _apply(_PUNCTUATION, text)
    text = _apply(_BRACKETS_AND_DASHES, text)
    text = _apply(_CLOSING_QUOTES, " " + text + " ")
    return _apply(_FUSED, text).split()


def word_tokenize(text: str) -> list[str]:
    """Treebank tokens of every sentence of ``text``, like ``nltk.word_tokenize``."""
    return [token for sentence in split_sentences(text) for token in treebank_tokens(sentence)]
