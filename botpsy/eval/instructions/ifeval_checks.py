"""Checkers for IFEval's 25 instruction types (Zhou et al., 2023), written from their descriptions.

Each checker takes the response and the instruction's keyword arguments (as stored in
``input_data.jsonl``) and returns whether the response follows the instruction. Where the
description leaves a choice open (what counts as a word, a paragraph, a highlight), the checker
makes the same choice as the official scorer, so verdicts can be compared item by item
(``python -m botpsy.eval.instructions.agreement``).

Example::

    >>> number_words("one two three", num_words=3, relation="at least")
    True
    >>> no_comma("a, b")
    False
"""

from __future__ import annotations

import json
import re
from collections import Counter

from botpsy.eval.instructions.language import is_language
from botpsy.eval.instructions.sentences import split_sentences
from botpsy.eval.instructions.words import count_words, word_tokenize

RELATIONS = ("less than", "at least")
CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def compare(count: int, relation: str, threshold: int) -> bool:
    """``count < threshold`` for "less than", ``count >= threshold`` for "at least"."""
    if relation == "less than":
        return count < threshold
    if relation == "at least":
        return count >= threshold
    raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")


# --- keywords ----------------------------------------------------------------------------------

def keywords_existence(response: str, *, keywords: list[str]) -> bool:
    """Every keyword appears somewhere (case-insensitive, inside other words too)."""
    return all(re.search(re.escape(k), response, flags=re.IGNORECASE) for k in keywords)


def keyword_frequency(response: str, *, keyword: str, frequency: int, relation: str) -> bool:
    """The keyword occurs (case-insensitive substring count) less than / at least N times."""
    count = len(re.findall(re.escape(keyword.strip()), response, flags=re.IGNORECASE))
    return compare(count, relation, frequency)


def forbidden_words(response: str, *, forbidden_words: list[str]) -> bool:
    """None of the words appears as a whole word (case-insensitive)."""
    return not any(
        re.search(r"\b" + re.escape(word) + r"\b", response, flags=re.IGNORECASE)
        for word in forbidden_words
    )


def letter_frequency(response: str, *, letter: str, let_frequency: int, let_relation: str) -> bool:
    """The letter occurs (case-insensitive) less than / at least N times."""
    count = Counter(response.lower())[letter.strip().lower()]
    return compare(count, let_relation, let_frequency)


# --- language and case -------------------------------------------------------------------------

def response_language(response: str, *, language: str) -> bool:
    """The whole response is detected as ``language`` (ISO 639-1)."""
    return is_language(response, language)


def english_capital(response: str) -> bool:
    """All letters are capitals and the text is English."""
    return response.isupper() and is_language(response, "en")


def english_lowercase(response: str) -> bool:
    """All letters are lower case and the text is English."""
    return response.islower() and is_language(response, "en")


def capital_word_frequency(response: str, *, capital_frequency: int, capital_relation: str) -> bool:
    """Tokens written entirely in capitals occur less than / at least N times."""
    count = sum(1 for token in word_tokenize(response) if token.isupper())
    return compare(count, capital_relation, capital_frequency)


# --- length ------------------------------------------------------------------------------------

def number_sentences(response: str, *, num_sentences: int, relation: str) -> bool:
    """The response has less than / at least N sentences."""
    return compare(len(split_sentences(response)), relation, num_sentences)


def number_words(response: str, *, num_words: int, relation: str) -> bool:
    """The response has less than / at least N words."""
    return compare(count_words(response), relation, num_words)


def number_paragraphs(response: str, *, num_paragraphs: int) -> bool:
    """Exactly N paragraphs separated by the markdown divider ``***``, none of them empty."""
    paragraphs = re.split(r"\s?\*\*\*\s?", response)
    count = len(paragraphs)
    for index, paragraph in enumerate(paragraphs):
        if not paragraph.strip():
            if index not in (0, len(paragraphs) - 1):
                return False
            count -= 1
    return count == num_paragraphs


def nth_paragraph_first_word(
    response: str, *, num_paragraphs: int, nth_paragraph: int, first_word: str
) -> bool:
    """Exactly N blank-line-separated paragraphs, and paragraph n starts with ``first_word``."""
    paragraphs = response.split("\n\n")
    count = sum(1 for paragraph in paragraphs if paragraph.strip())
    if nth_paragraph > count:
        return False
    paragraph = paragraphs[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    leading = re.match(r"""[^.,?!'"]*""", word).group().lower()
    return count == num_paragraphs and leading == first_word.lower()


# --- content and format ------------------------------------------------------------------------

def number_placeholders(response: str, *, num_placeholders: int) -> bool:
    """At least N ``[placeholder]`` brackets."""
    return len(re.findall(r"\[.*?\]", response)) >= num_placeholders


def postscript(response: str, *, postscript_marker: str) -> bool:
    """Some line starts with the postscript marker (P.S. / P.P.S, spacing tolerated)."""
    marker = postscript_marker.strip()
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + re.escape(marker.lower()) + r".*$"
    return bool(re.findall(pattern, response.lower(), flags=re.MULTILINE))


def number_bullet_lists(response: str, *, num_bullets: int) -> bool:
    """Exactly N markdown bullet lines (``* item`` or ``- item``)."""
    stars = re.findall(r"^\s*\*[^\*].*$", response, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", response, flags=re.MULTILINE)
    return len(stars) + len(dashes) == num_bullets


def constrained_response(response: str) -> bool:
    """The response contains one of the fixed answers ("My answer is yes." ...)."""
    return any(option in response.strip() for option in CONSTRAINED_OPTIONS)


def number_highlighted_sections(response: str, *, num_highlights: int) -> bool:
    """At least N non-empty ``*highlighted*`` (or ``**bold**``) spans on one line."""
    singles = re.findall(r"\*[^\n\*]*\*", response)
    doubles = re.findall(r"\*\*[^\n\*]*\*\*", response)
    count = sum(1 for span in singles if span.strip("*").strip())
    count += sum(1 for span in doubles if span.removeprefix("**").removesuffix("**").strip())
    return count >= num_highlights


def multiple_sections(response: str, *, section_spliter: str, num_sections: int) -> bool:
    """At least N sections, each opened by "<splitter> <number>"."""
    splitter = r"\s?" + re.escape(section_spliter.strip()) + r"\s?\d+\s?"
    return len(re.split(splitter, response)) - 1 >= num_sections


def json_format(response: str) -> bool:
    """The whole response (markdown fences allowed) parses as JSON."""
    text = response.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        text = text.removeprefix(fence)
    text = text.removesuffix("```").strip()
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def title(response: str) -> bool:
    """A non-empty title in double angular brackets, ``<<like this>>``."""
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", response))


def two_responses(response: str) -> bool:
    """Exactly two different non-empty answers separated by ``******``."""
    parts = response.split("******")
    answers = []
    for index, part in enumerate(parts):
        if part.strip():
            answers.append(part)
        elif index not in (0, len(parts) - 1):
            return False
    return len(answers) == 2 and answers[0].strip() != answers[1].strip()


def repeat_prompt(response: str, *, prompt_to_repeat: str) -> bool:
    """The response starts by repeating the request word for word (case-insensitive)."""
    return response.strip().lower().startswith(prompt_to_repeat.strip().lower())


def end_checker(response: str, *, end_phrase: str) -> bool:
    """The response ends with the phrase (case-insensitive, outer quotes ignored)."""
    return response.strip().strip('"').lower().endswith(end_phrase.strip().lower())


def quotation(response: str) -> bool:
    """The whole response is wrapped in double quotation marks."""
    text = response.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


def no_comma(response: str) -> bool:
    """No commas at all."""
    return "," not in response


CHECKS = {
    "keywords:existence": keywords_existence,
    "keywords:frequency": keyword_frequency,
    "keywords:forbidden_words": forbidden_words,
    "keywords:letter_frequency": letter_frequency,
    "language:response_language": response_language,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "change_case:capital_word_frequency": capital_word_frequency,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_words": number_words,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "startend:quotation": quotation,
    "punctuation:no_comma": no_comma,
}
