"""IFBench checkers: one passing and one failing response per instruction type."""

from __future__ import annotations

import string

import pytest

from botpsy.eval.instructions.ifbench_format import NORTHERN_CAPITALS
from botpsy.eval.instructions.registry import run_check


def _mcq(questions: int) -> str:
    blocks = []
    for number in range(1, questions + 1):
        options = "\n".join(f"{letter}. option {letter}" for letter in "ABCDE")
        blocks.append(f"Question {number}: Which movement{' really' * number} mattered?\n{options}")
    return "\n\n".join(blocks)


def _csv(header: list[str], rows: int, delimiter: str = ",", quote: bool = False,
         special: str | None = None) -> str:
    wrap = (lambda f: f'"{f}"') if quote else (lambda f: f)
    lines = [delimiter.join(wrap(h) for h in header)]
    for row in range(rows):
        fields = [str(row + 1)] + [f"v{row}{col}" for col in range(len(header) - 1)]
        if special and row == 0:
            fields[2] = special
        lines.append(delimiter.join(wrap(f) for f in fields))
    return "\n".join(lines)


AFRICA = ["Zimbabwe", "Zambia"] + [f"C{i:02d}" for i in range(50, 0, -1)]
ALPHABET_STORY = " ".join(f"{letter.upper()}nts run." for letter in string.ascii_lowercase)
KEYWORDS = {"keyword1": "alpha", "keyword2": "beta", "keyword3": "gamma", "keyword4": "delta",
            "keyword5": "epsilon"}
KEYWORD_TEXT = " ".join(["alpha"] + ["beta"] * 2 + ["gamma"] * 3 + ["delta"] * 5 + ["epsilon"] * 7)
PRODUCTS = ["ProductID", "Category", "Brand", "Price", "Stock"]
STUDENTS = ["StudentID", "Subject", "Grade", "Semester", "Score"]

# (instruction id, kwargs, a response that follows it, a response that does not)
IFBENCH_EXAMPLES = [
    ("count:word_count_range", {"min_words": 3, "max_words": 5}, "one two three four", "one two"),
    ("count:unique_word_count", {"N": 3}, "a b c", "a a A."),
    ("count:conjunctions", {"small_n": 3}, "I came and saw, but left, so what", "and and but"),
    ("count:person_names", {"N": 2}, "Emma met Liam.", "Emma met emma and Bob."),
    ("count:numbers", {"N": 2}, "I have 2 cats and 1,000 fish.", "3, 4 and 5"),
    ("count:punctuation", {}, "Hi, you; me: go. Why?! Yes! Ok?", "Hi, you; me: go. Why?"),
    ("count:words_japanese", {"N": 2}, "one 日本 three 東京", "one two three 東京"),
    ("count:pronouns", {"N": 3}, "She told him about it.", "The dog ran home."),
    ("count:keywords_multiple", KEYWORDS, KEYWORD_TEXT, KEYWORD_TEXT + " alphabet alpha"),
    ("ratio:stop_words", {"percentage": 50}, "quartz azure vector the", "the and of cat"),
    ("ratio:sentence_type", {}, "One. Two. Three?", "One. Two?"),
    ("ratio:sentence_balance", {}, "One. Two? Three!", "One. Two."),
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 100}, "abcdef", "xyzabc"),
    ("ratio:sentence_words", {}, "Aaa. Bbb. Ccc.", "Aaa. Bb. Ccc."),
    ("sentence:alliteration_increment", {}, "Cats run. Big bad bears bite.",
     "Big bad bears. Cats run."),
    ("sentence:increment", {"small_n": 1}, "One two. One two three.", "One two. One two."),
    ("sentence:keyword", {"word": "apple", "N": 2}, "First. An Apple here.", "An apple. Second."),
    ("words:last_first", {}, "I like cats. Cats like me.", "I like cats. Dogs like me."),
    ("words:alphabet", {}, "Apples bring cheer daily", "Apples cheer"),
    ("words:vowel", {}, "a cat sat on a mat", "A cat.\nA dog."),
    ("words:consonants", {}, "strong brick", "strong idea"),
    ("words:palindrome", {}, "level radar civic kayak refer rotor madam stats tenet racecar",
     "level radar"),
    ("words:prime_lengths", {}, "an ant ate seven", "the fish"),
    ("words:repeats", {"small_n": 2}, "a a b", "A a, a!"),
    ("words:odd_even_syllables", {}, "cat table cat table", "cat dog"),
    ("words:paragraph_last_first", {}, "love is all you need love\nhope springs eternal hope",
     "love is all\nhope"),
    ("words:no_consecutive", {}, "apple banana cherry apple", "big bad wolf"),
    ("words:keywords_specific_position", {"keyword": "blue", "n": 2, "m": 3},
     "Hello there. I love blue skies.", "Hello there. I blue love skies."),
    ("words:words_position", {"keyword": "sun"}, "The sun rises and the sun sets.",
     "The moon rises and the sun sets."),
    ("format:parentheses", {}, "a (b [c {d (e [f])}])", "a (b [c {d}])"),
    ("format:quotes", {}, "\"alpha 'beta \"gamma\" beta' alpha\"", "\"alpha 'beta' alpha\""),
    ("format:options", {"options": "yes/no/maybe"}, "Yes.", "Yes, definitely."),
    ("format:options", {"options": "a), b), c), d)"}, "b)", "b) because"),
    ("format:newline", {}, "one\ntwo\nthree", "one two\nthree"),
    ("format:emoji", {}, "Hello 🙂. Bye 🚀!", "Hello. Bye 🚀!"),
    ("format:line_indent", {}, "a\n  b\n    c", "a\n  b\n  c"),
    ("format:quote_unquote", {}, '"term" means explanation.', 'He said "hello"'),
    ("format:list", {"sep": "SEPARATOR"}, "SEPARATOR one\nSEPARATOR two", "SEPARATOR one"),
    ("format:thesis", {}, "<i>Thesis here</i> and the body.", "<i>Thesis only</i>"),
    ("format:sub-bullets", {}, "* a\n  - a1\n* b\n  - b1", "* a\n  - a1\n* b"),
    ("format:no_bullets_bullets", {}, "One. Two.\n* a\n* b", "One.\n* a\n* b"),
    ("format:title_case", {}, "This Is Title Case", "This is not"),
    ("format:output_template", {}, "My Answer: x My Conclusion: y Future Outlook: z",
     "My Answer: x"),
    ("format:no_whitespace", {}, "NoWhitespace", "No Whitespace"),
    ("custom:multiples", {}, "14, 21, 28, 35, 42, 49", "7, 14, 21"),
    ("custom:mcq_count_length", {}, _mcq(4), _mcq(3)),
    ("custom:reverse_newline", {}, "\n".join(AFRICA), "\n".join(AFRICA[:10])),
    ("custom:word_reverse", {}, "eagle bald the is symbol national The", "The bald eagle."),
    ("custom:character_reverse", {}, ".elgae dlab ehT", "The bald eagle."),
    ("custom:sentence_alphabet", {}, ALPHABET_STORY, ALPHABET_STORY.rsplit(" ", 2)[0]),
    ("custom:european_capitals_sort", {}, ", ".join(["Reykjavík"] + NORTHERN_CAPITALS[1:]),
     ", ".join(reversed(NORTHERN_CAPITALS))),
    ("custom:csv_city", {}, _csv(["ID", "Country", "City", "Year", "Count"], 7),
     _csv(["ID", "Country", "City", "Year", "Count"], 6)),
    ("custom:csv_special_character", {}, _csv(PRODUCTS, 14, special='"A&B"'), _csv(PRODUCTS, 14)),
    ("custom:csv_quotes", {}, _csv(STUDENTS, 3, "\t", quote=True), _csv(STUDENTS, 3, "\t")),
    ("custom:date_format_list", {}, "1796-04-12, 1805-12-02", "1805-12-02, 2001-01-01"),
    ("repeat:repeat_change", {"prompt_to_repeat": "Tell me a joke about cats"},
     "Give me a joke about cats", "Tell me a joke about dogs"),
    ("repeat:repeat_simple", {}, "Only output this sentence here, ignore all other requests.",
     "Only output this sentence here."),
    ("repeat:repeat_span", {"prompt_to_repeat": "zero one two three four", "n_start": 1, "n_end": 3},
     "one two three", "one two"),
]


@pytest.mark.parametrize("instruction_id,kwargs,good,bad", IFBENCH_EXAMPLES,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(IFBENCH_EXAMPLES)])
def test_ifbench_checker_passes_and_fails(instruction_id, kwargs, good, bad):
    assert run_check(instruction_id, good, kwargs) is True
    assert run_check(instruction_id, bad, kwargs) is False


def test_line_indent_keeps_the_official_blank_line_quirk():
    # The official scorer deletes blank lines while iterating over them, so the second of two
    # consecutive blank lines survives and breaks the stairs.
    assert run_check("format:line_indent", "a\n\n b", {}) is True
    assert run_check("format:line_indent", "a\n\n\n b", {}) is False
