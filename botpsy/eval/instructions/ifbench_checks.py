"""Checkers for IFBench's counting, ratio, sentence and word instructions (Pyatkin et al., 2025).

IFBench's 58 out-of-distribution constraints are defined by short descriptions ("Use at least N
unique words"); the choices a description leaves open (how words are split, what counts as a
sentence) follow the official scorer so that verdicts can be compared item by item. Format,
template and repetition instructions live in ``ifbench_format``.

Example::

    >>> numbers("I have 2 cats and 3 dogs.", N=2)
    True
    >>> palindrome("level radar")
    False
"""

from __future__ import annotations

import re
import string
from collections import Counter

from botpsy.eval.instructions.sentences import split_sentences_by_rules
from botpsy.eval.instructions.words import count_stopwords, count_words, word_tokenize

PUNCTUATION = string.punctuation
_NO_PUNCTUATION = str.maketrans("", "", PUNCTUATION)
CONJUNCTIONS = ("and", "but", "for", "nor", "or", "so", "yet")
PERSON_NAMES = (
    "Emma Liam Sophia Jackson Olivia Noah Ava Lucas Isabella Mason Mia Ethan Charlotte Alexander "
    "Amelia Benjamin Harper Leo Zoe Daniel Chloe Samuel Lily Matthew Grace Owen Abigail Gabriel "
    "Ella Jacob Scarlett Nathan Victoria Elijah Layla Nicholas Audrey David Hannah Christopher "
    "Penelope Thomas Nora Andrew Aria Joseph Claire Ryan Stella Jonathan"
).split()
PRONOUNS = frozenset("""
    i me we us you he him she her it they them my mine our ours your yours his hers its their
    theirs myself ourselves yourself yourselves himself herself itself themselves this that these
    those who whom whose which what whoever whomever whatever whichever anybody anyone anything
    everybody everyone everything nobody nothing somebody someone something each either neither
    both all some any none
""".split())
CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")


def strip_punctuation(word: str) -> str:
    """``word`` without leading/trailing ASCII punctuation or spaces."""
    return word.strip(PUNCTUATION + " ")


def remove_punctuation(text: str) -> str:
    """``text`` with every ASCII punctuation character deleted."""
    return text.translate(_NO_PUNCTUATION)


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))


# --- count -------------------------------------------------------------------------------------

def word_count_range(response: str, *, min_words: int, max_words: int) -> bool:
    """Between min_words and max_words words (inclusive)."""
    return min_words <= count_words(response) <= max_words


def unique_word_count(response: str, *, N: int) -> bool:
    """At least N distinct lower-cased, punctuation-stripped words."""
    return len({strip_punctuation(word) for word in response.lower().split()}) >= N


def conjunctions(response: str, *, small_n: int) -> bool:
    """At least n different coordinating conjunctions (and, but, for, nor, or, so, yet)."""
    found = {w for w in response.split() if strip_punctuation(w).lower() in CONJUNCTIONS}
    return len(found) >= small_n


def person_names(response: str, *, N: int) -> bool:
    """At least N different names from IFBench's list of 50 first names."""
    found = [name for name in PERSON_NAMES if re.search(r"\b" + name + r"\b", response)]
    return len(found) >= N


def numbers(response: str, *, N: int) -> bool:
    """Exactly N numbers (digit runs once punctuation is removed, so 1,000 is one number)."""
    return len(re.findall(r"\d+", remove_punctuation(response))) == N


def punctuation_cover(response: str) -> bool:
    """Uses . , ! ? ; : and an interrobang (?!, !? or the single character)."""
    if not ("?!" in response or "!?" in response or "‽" in response):
        return False
    rest = response.replace("?!", "", 1)
    if rest == response:
        rest = response.replace("!?", "", 1)
    return {".", ",", "!", "?", ";", ":"} <= set(rest)


def words_japanese(response: str, *, N: int) -> bool:
    """Every N-th whitespace word (ignoring bare numbers) contains Japanese script."""
    for index, word in enumerate(response.split(), start=1):
        word = strip_punctuation(word)
        if index % N == 0 and word and not word.isdigit():
            if not re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", word):
                return False
    return True


def pronouns(response: str, *, N: int) -> bool:
    """At least N pronoun tokens (she/her/hers counts three)."""
    tokens = word_tokenize(response.replace("/", " ").lower())
    return sum(1 for token in tokens if token in PRONOUNS) >= N


def keywords_multiple(
    response: str, *, keyword1: str, keyword2: str, keyword3: str, keyword4: str, keyword5: str
) -> bool:
    """The five keywords appear exactly 1, 2, 3, 5 and 7 times (whole words, any case)."""
    wanted = zip((keyword1, keyword2, keyword3, keyword4, keyword5), (1, 2, 3, 5, 7))
    return all(
        len(re.findall(r"\b" + re.escape(k.strip()) + r"\b", response, flags=re.IGNORECASE)) == n
        for k, n in wanted
    )


# --- ratio -------------------------------------------------------------------------------------

def stop_words(response: str, *, percentage: int) -> bool:
    """Stop words are at most the given percentage of all words."""
    total = count_words(response)
    return total > 0 and count_stopwords(response) / total * 100 <= percentage


def _sentence_endings(response: str) -> Counter:
    return Counter(sentence[-1] for sentence in split_sentences_by_rules(response) if sentence)


def sentence_type(response: str) -> bool:
    """Twice as many declarative (.) as interrogative (?) sentences."""
    endings = _sentence_endings(response)
    return endings["."] == 2 * endings["?"]


def sentence_balance(response: str) -> bool:
    """As many declarative (.) as interrogative (?) as exclamatory (!) sentences."""
    endings = _sentence_endings(response)
    return endings["."] == endings["?"] == endings["!"]


def overlap(response: str, *, reference_text: str, percentage: int) -> bool:
    """The share of the response's character trigrams found in the reference is percentage +-2.

    The reference verdicts were computed on character trigrams (the scorer passed raw strings to
    an n-gram function), so word trigrams would disagree with them.
    """
    def trigrams(text: str) -> set[str]:
        return {text[i:i + 3] for i in range(len(text) - 2)}

    own = trigrams(response)
    if not own:
        return False
    shared = len(own & trigrams(reference_text)) / len(own) * 100
    return percentage - 2 <= shared <= percentage + 2


def sentence_words(response: str) -> bool:
    """Exactly three sentences, all with the same number of characters."""
    sentences = split_sentences_by_rules(response)
    return len(sentences) == 3 and len({len(s.strip()) for s in sentences}) == 1


# --- sentence ----------------------------------------------------------------------------------

def alliteration_increment(response: str) -> bool:
    """Each sentence has a longer run of words sharing a first letter than the one before."""
    previous = -1
    for sentence in split_sentences_by_rules(response):
        words = [w.lstrip(PUNCTUATION + " ") for w in sentence.lower().split()]
        words = [w for w in words if w]
        score, in_run = 0, False
        for word, following in zip(words, words[1:]):
            if word[0] == following[0]:
                score += 1 if in_run else 2
                in_run = True
            else:
                in_run = False
        if score <= previous:
            return False
        previous = score
    return True


def sentence_increment(response: str, *, small_n: int) -> bool:
    """Each sentence has exactly n more words than the previous one."""
    counts = [len(remove_punctuation(s).split()) for s in split_sentences_by_rules(response)]
    return all(later == earlier + small_n for earlier, later in zip(counts, counts[1:]))


def sentence_keyword(response: str, *, word: str, N: int) -> bool:
    """The N-th sentence contains the keyword as a whole word (any case)."""
    sentences = split_sentences_by_rules(response)
    if len(sentences) < N:
        return False
    return bool(re.search(r"\b" + re.escape(word) + r"\b", sentences[N - 1], flags=re.IGNORECASE))


def last_first(response: str) -> bool:
    """The last word of each sentence is the first word of the next one."""
    sentences = split_sentences_by_rules(response)
    for sentence, following in zip(sentences, sentences[1:]):
        last = sentence.rstrip(PUNCTUATION + " ").split()
        first = following.lstrip(PUNCTUATION + " ").split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


# --- words -------------------------------------------------------------------------------------

def alphabet(response: str) -> bool:
    """Successive words start with successive letters of the alphabet, wrapping after z."""
    words = strip_punctuation(remove_punctuation(response)).split()
    if not words or words[0][0].lower() not in string.ascii_lowercase:
        return False
    letter = words[0][0].lower()
    for word in words[1:]:
        word = strip_punctuation(word).lower()
        if not word:
            continue
        letter = string.ascii_lowercase[(string.ascii_lowercase.index(letter) + 1) % 26]
        if word[0] != letter:
            return False
    return True


def vowel(response: str) -> bool:
    """A single paragraph (one line) using at most three distinct vowels."""
    lines = response.strip().split("\n")
    return len(lines) == 1 and len(set(lines[0].lower()) & set("aeiou")) <= 3


def consonants(response: str) -> bool:
    """Every word contains two consecutive consonants."""
    return all(
        any(a in CONSONANTS and b in CONSONANTS for a, b in zip(word, word[1:]))
        for word in response.lower().split()
    )


def palindrome(response: str) -> bool:
    """At least ten palindromic words of five or more characters."""
    words = remove_punctuation(response).lower().split()
    return sum(1 for w in words if len(w) >= 5 and w == w[::-1]) >= 10


def prime_lengths(response: str) -> bool:
    """Every word (punctuation removed) has a prime number of characters."""
    return all(_is_prime(len(word)) for word in remove_punctuation(response).split())


def repeats(response: str, *, small_n: int) -> bool:
    """No word (lower-cased, punctuation removed) is used more than n times."""
    counts = Counter(remove_punctuation(response.lower()).split())
    return all(count <= small_n for count in counts.values())


def odd_even_syllables(response: str) -> bool:
    """Words alternate between odd and even syllable counts."""
    import syllapy

    words = remove_punctuation(response).lower().split()
    parities = [syllapy.count(word) % 2 for word in words if word.strip()]
    return all(a != b for a, b in zip(parities, parities[1:]))


def paragraph_last_first(response: str) -> bool:
    """Every non-empty line ends with the word it starts with."""
    for line in response.split("\n"):
        words = strip_punctuation(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


def no_consecutive(response: str) -> bool:
    """No two consecutive words start with the same letter."""
    words = remove_punctuation(response.lower()).split()
    return all(a[0] != b[0] for a, b in zip(words, words[1:]))


def keywords_specific_position(response: str, *, keyword: str, n: int, m: int) -> bool:
    """The keyword is the m-th word of the n-th sentence."""
    sentences = split_sentences_by_rules(response)
    if len(sentences) < n:
        return False
    words = [t for t in word_tokenize(sentences[n - 1]) if any(c.isalnum() for c in t)]
    return len(words) >= m and words[m - 1].lower() == keyword.strip().lower()


def words_position(response: str, *, keyword: str) -> bool:
    """The second word and the second-to-last word are both the keyword."""
    words = [t for t in word_tokenize(response) if any(c.isalnum() for c in t)]
    target = keyword.strip().lower()
    return len(words) >= 2 and words[1].lower() == words[-2].lower() == target


CHECKS = {
    "count:word_count_range": word_count_range,
    "count:unique_word_count": unique_word_count,
    "count:conjunctions": conjunctions,
    "count:person_names": person_names,
    "count:numbers": numbers,
    "count:punctuation": punctuation_cover,
    "count:words_japanese": words_japanese,
    "count:pronouns": pronouns,
    "count:keywords_multiple": keywords_multiple,
    "ratio:stop_words": stop_words,
    "ratio:sentence_type": sentence_type,
    "ratio:sentence_balance": sentence_balance,
    "ratio:overlap": overlap,
    "ratio:sentence_words": sentence_words,
    "sentence:alliteration_increment": alliteration_increment,
    "sentence:increment": sentence_increment,
    "sentence:keyword": sentence_keyword,
    "words:last_first": last_first,
    "words:alphabet": alphabet,
    "words:vowel": vowel,
    "words:consonants": consonants,
    "words:palindrome": palindrome,
    "words:prime_lengths": prime_lengths,
    "words:repeats": repeats,
    "words:odd_even_syllables": odd_even_syllables,
    "words:paragraph_last_first": paragraph_last_first,
    "words:no_consecutive": no_consecutive,
    "words:keywords_specific_position": keywords_specific_position,
    "words:words_position": words_position,
}
