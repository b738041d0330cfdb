"""IFEval checkers: one passing and one failing response per instruction type, plus the scoring
rules (strict, loose, skipped, checker errors) and the registry's argument handling."""

from __future__ import annotations

import pytest

from botpsy.eval.instructions.registry import (
    INSTRUCTIONS,
    UnknownInstruction,
    clean_kwargs,
    run_check,
)
from botpsy.eval.instructions.scoring import aggregate, loose_variants, score_item
from tests.eval.test_ifbench_instructions import IFBENCH_EXAMPLES

LOWER = "the quick brown fox jumps over the lazy dog and then it runs far away into the forest"

# (instruction id, kwargs, a response that follows it, a response that does not)
IFEVAL_EXAMPLES = [
    ("keywords:existence", {"keywords": ["apple", "pie"]},
     "An Apple pie recipe.", "An apple tart."),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "at least"},
     "Cat and cat.", "One cat."),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "less than"},
     "One cat.", "cat cat cat"),
    ("keywords:forbidden_words", {"forbidden_words": ["bad", "evil"]},
     "A badge is fine.", "Nothing is Bad."),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 3, "let_relation": "at least"},
     "Zany zebra zone", "A zebra"),
    ("language:response_language", {"language": "de"},
     "Das ist ein kurzer deutscher Satz über das Wetter heute.",
     "This is a short English sentence about the weather today."),
    ("change_case:english_capital", {},
     "THIS IS A SHOUTED ENGLISH SENTENCE ABOUT THE WEATHER.",
     "This is a normal English sentence about the weather."),
    ("change_case:english_lowercase", {},
     "this is a quiet english sentence about the weather today.",
     "This is a normal English sentence about the weather today."),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "at least"},
     "This is VERY IMPORTANT news.", "This is VERY important news."),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "less than"},
     "Only ONE capital word.", "DON'T do that."),  # DO + N'T are two all-capital tokens
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"},
     "One. Two! Three?", "Dr. Smith left. He came back."),  # 'Dr.' does not end a sentence
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "less than"},
     "Items:\n- apples\n- pears", "First. Second."),
    ("length_constraints:number_words", {"num_words": 5, "relation": "at least"},
     "one two three four five", "one two three four"),
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"},
     "one-two three", "one two three four five"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2},
     "First part.\n***\nSecond part.", "First.\n***\n***\nSecond."),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
     "First paragraph.\n\n\"Then, the second.", "First paragraph.\n\nAfter that, the second."),
    ("detectable_content:number_placeholders", {"num_placeholders": 2},
     "Dear [name], at [address].", "Dear [name], hello."),
    ("detectable_content:postscript", {"postscript_marker": "P.S."},
     "Body text.\n\np.s. see you", "Body text. PS see you"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"},
     "Body.\nP. P. S. one more thing", "Body.\nP.S. one more thing"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2},
     "* one\n- two", "* one\n* two\n* three"),
    ("detectable_format:constrained_response", {},
     "My answer is maybe.", "Maybe."),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "*first* and **second**", "*first* and ** **"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nabc\nSection 2\ndef", "Section 1\nabc"),
    ("detectable_format:json_format", {},
     '```json\n{"a": 1}\n```', "{'a': 1}"),
    ("detectable_format:title", {},
     "<<My Title>>\nText", "<< >>\nText"),
    ("combination:two_responses", {},
     "First answer.\n******\nSecond answer.", "Same.\n******\nSame."),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."},
     "write a poem. Roses are red.", "Sure! Write a poem."),
    ("startend:end_checker", {"end_phrase": "Any other questions?"},
     'Here it is. "Any other questions?"', "Any other questions? Bye."),
    ("startend:quotation", {},
     '  "All wrapped."  ', '"Not closed'),
    ("punctuation:no_comma", {},
     "No commas here.", "One, two."),
]


@pytest.mark.parametrize("instruction_id,kwargs,good,bad", IFEVAL_EXAMPLES,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(IFEVAL_EXAMPLES)])
def test_ifeval_checker_passes_and_fails(instruction_id, kwargs, good, bad):
    assert run_check(instruction_id, good, kwargs) is True
    assert run_check(instruction_id, bad, kwargs) is False


def test_every_registered_instruction_has_a_passing_and_a_failing_example():
    covered = {example[0] for example in IFEVAL_EXAMPLES + IFBENCH_EXAMPLES}
    scorable = {i for i, instruction in INSTRUCTIONS.items() if instruction.check is not None}
    assert scorable - covered == set()
    assert len(INSTRUCTIONS) == 25 + 58


def test_lowercase_checker_uses_language_detection():
    assert run_check("change_case:english_lowercase", LOWER, {}) is True
    assert run_check("change_case:english_lowercase", "c'est une phrase en français, voilà.", {}) is False


# --- registry ----------------------------------------------------------------------------------

def test_clean_kwargs_drops_none_and_integral_floats():
    kwargs = {"N": 12.0, "word": None, "small_n": None}
    assert clean_kwargs("count:pronouns", kwargs) == {"N": 12}
    assert isinstance(clean_kwargs("count:pronouns", kwargs)["N"], int)


def test_unexpected_kwargs_and_unknown_ids_are_named():
    with pytest.raises(ValueError, match="unexpected arguments.*bogus"):
        clean_kwargs("punctuation:no_comma", {"bogus": 1})
    with pytest.raises(UnknownInstruction):
        run_check("made:up", "text", {})


def test_invalid_relation_is_a_clear_error():
    with pytest.raises(ValueError, match="relation must be one of"):
        run_check("length_constraints:number_words", "a b", {"num_words": 1, "relation": "about"})


def test_skipped_instruction_has_a_reason_and_no_verdict():
    assert INSTRUCTIONS["words:start_verb"].skipped
    assert run_check("words:start_verb", "Go now.", {}) is None


# --- scoring -----------------------------------------------------------------------------------

def _record(*pairs):
    return {"prompt": "p", "instruction_id_list": [p[0] for p in pairs], "kwargs": [p[1] for p in pairs]}


def test_loose_variants_remove_first_last_lines_and_asterisks():
    variants = loose_variants("Intro:\n**body**\nOutro")
    assert variants[0] == "Intro:\n**body**\nOutro"
    assert variants[1] == "Intro:\nbody\nOutro"
    assert "**body**" in variants[4] and variants[-1] == "body"
    assert len(variants) == 8


def test_loose_passes_where_strict_fails():
    record = _record(("startend:quotation", {}))
    scored = score_item(record, 'Sure, here you go:\n"Wrapped answer."')
    assert scored["strict"] == [False] and scored["loose"] == [True]
    assert scored["follow_all_strict"] is False and scored["follow_all_loose"] is True


def test_empty_response_follows_nothing():
    scored = score_item(_record(("punctuation:no_comma", {})), "   ")
    assert scored["strict"] == [False] and scored["loose"] == [False]


def test_skipped_instructions_are_listed_and_left_out_of_follow_all():
    record = _record(("words:start_verb", {}), ("punctuation:no_comma", {}))
    scored = score_item(record, "Go home now")
    assert scored["skipped"] == ["words:start_verb"]
    assert scored["strict"] == [None, True] and scored["follow_all_strict"] is True


def test_checker_errors_are_recorded_not_raised():
    record = _record(("length_constraints:number_words", {"num_words": 3, "relation": "maybe"}))
    scored = score_item(record, "one two three")
    assert scored["strict"] == [False]
    assert "relation must be one of" in scored["errors"]["length_constraints:number_words"]


def test_aggregate_counts_prompts_instructions_and_skips():
    scores = [
        score_item(_record(("punctuation:no_comma", {}), ("startend:quotation", {})), '"a b"'),
        score_item(_record(("punctuation:no_comma", {})), "a, b"),
        score_item(_record(("words:start_verb", {})), "Go"),
    ]
    summary = aggregate(scores)
    assert summary["items"] == 3 and summary["items_scored"] == 2
    assert summary["prompt_strict"] == 0.5
    assert summary["instruction_strict"] == round(2 / 3, 4)
    assert summary["skipped_by_id"] == {"words:start_verb": 1}
    # By group: punctuation followed once in two, startend once in one; the skipped id is in no group.
    assert summary["by_group"] == {"punctuation": {"instructions": 2, "strict": 0.5},
                                   "startend": {"instructions": 1, "strict": 1.0}}


def test_the_table_shows_each_instruction_group_a_model_was_scored_on():
    from botpsy.eval.report import markdown_table

    scored = aggregate([score_item(_record(("punctuation:no_comma", {})), "a, b"),
                        score_item(_record(("change_case:english_lowercase", {})), "all lower")])
    summary = {"suites": ["ifeval"], "models": {"m": {"suites": {"ifeval": scored}, "metrics": {}}}}
    table = markdown_table(summary)
    assert "| ifeval group change_case: instruction strict | 100.0% |" in table
    assert "| ifeval group punctuation: instruction strict | 0.0% |" in table
