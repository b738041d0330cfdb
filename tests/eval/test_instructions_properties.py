"""Properties that hold for any text: the sentence splitters lose no characters, and no checker
crashes on whatever a model writes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from botpsy.eval.instructions.registry import run_check
from botpsy.eval.instructions.scoring import score_item
from botpsy.eval.instructions.sentences import split_sentences
from tests.eval.test_ifbench_instructions import IFBENCH_EXAMPLES
from tests.eval.test_instructions import IFEVAL_EXAMPLES

# Text built from the characters the checkers care about: letters, digits, sentence marks,
# quotes, brackets, markdown and whitespace.
TEXT = st.text(alphabet=st.sampled_from(list("aZ9 .?!,;:'\"()[]{}*-#\n\t…“”🙂")), max_size=60)
EXAMPLES = IFEVAL_EXAMPLES + IFBENCH_EXAMPLES


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_punkt_like_sentences_keep_every_non_space_character(text):
    assert "".join("".join(split_sentences(text)).split()) == "".join(text.split())


@settings(max_examples=40, deadline=None)
@given(TEXT)
def test_no_checker_raises_on_arbitrary_text(text):
    for instruction_id, kwargs, _, _ in EXAMPLES:
        assert run_check(instruction_id, text, kwargs) in (True, False)


@settings(max_examples=40, deadline=None)
@given(TEXT)
def test_loose_never_below_strict(text):
    record = {"instruction_id_list": [e[0] for e in EXAMPLES], "kwargs": [e[1] for e in EXAMPLES]}
    scored = score_item(record, text)
    assert all(loose or not strict for strict, loose in zip(scored["strict"], scored["loose"]))
    assert scored["errors"] == {}
