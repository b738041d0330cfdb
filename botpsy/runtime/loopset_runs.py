"""A held-out loop set for one-word and one-token repetition, with the hard negatives beside it.

The main labelled set (``loopset.generate_loopset``) draws its loops from sentences and
phrases. Small models also fall into the shortest loops there are: one word written again and
again ("the the the ..."), or one token that the text splitter used to see as a single run
("\\n\\n\\n...", "!!!!!!...", "hahaha...", "......"). This set holds those, written by other
generators than the main set's, and non-loops full of the same characters used legitimately:
short exclamations and ellipses, horizontal rules and code dividers, blank lines between
paragraphs, ASCII tables, long numbers, laughter of a normal length.

Labels follow the main set's contract (``loopset`` module docstring): token indices of
``loopguard.split_words``, checked by ``loopset.check_label``; ``loopset.score`` scores it.

Example::

    items = generate_runs_loopset(seed=0)
    print(score(items)["recall"], score(items)["false_positive_rate"])
"""

from __future__ import annotations

import random

from botpsy.runtime.loopguard import word_token_ids
from botpsy.runtime.loopset import ITEMS, NAMES, SHORT_ALLOWANCE, LabelledText, _Writer, ntokens

WORDS = ["the", "I", "and", "so", "ok", "yes", "no", "wait", "hmm", "is", "to", "a", "alarm", "call", "Monday"]
FLOOD_UNITS = ["\n", "!", "?", ".", "ha", "=", "-", "*", "0", "…", "a", "lo", "\n\n", " \n"]


def _labelled(category: str, prefix: str, text: str, period: int = 1) -> dict:
    """Label a text that repeats from just after ``prefix`` to its end (start moved back while it still repeats)."""
    ids = [token_id for token_id, _ in word_token_ids(text)]
    start = ntokens(prefix)
    while start > 0 and ids[start - 1] == ids[start - 1 + period]:
        start -= 1
    return dict(category=category, text=text, start=start, period=period, kind="repeat", varied=False)


def loop_one_word(w: _Writer) -> dict:
    """One word written again and again, spaces or line breaks between the copies."""
    word = w.pick(WORDS)
    sep = w.pick([" ", " ", "\n", ", "])
    copies = SHORT_ALLOWANCE + 16 + w.rng.randint(0, 40)
    prefix = w.reasoning(w.rng.randint(0, 120))
    body = sep.join([word] * copies)
    period = 2 if sep == ", " else 1  # "the, the, ..." is the word and its comma
    return _labelled("one_word", prefix, f"{prefix} {body}" if prefix else body, period)


def loop_one_token_flood(w: _Writer) -> dict:
    """A run of one short unit that a model writes one token at a time: line breaks, '!!!', 'haha'."""
    unit = w.pick(FLOOD_UNITS)
    prefix = w.reasoning(w.rng.randint(0, 120)) + w.pick(["", " Done", " Wow", " So"])
    copies = w.rng.randint(300, 600) // len(unit)
    flood = unit * (copies - copies % 4)  # whole 4-character tokens: a cut last token would differ from its copy
    return _labelled("one_token_flood", prefix, prefix + flood)


RUNS_LOOP_GENERATORS = [loop_one_word, loop_one_token_flood]


# -- hard negatives ------------------------------------------------------------------------


def clean_exclamations(w: _Writer) -> str:
    """Chatty answers with '!!!', '...', '??' and laughter of a normal length."""
    parts = []
    for _ in range(w.rng.randint(4, 20)):
        parts.append(w.pick([
            w.sentence(), f"Wow{'!' * w.rng.randint(1, 6)}", f"Hmm{'.' * w.rng.randint(2, 6)}",
            f"{'ha' * w.rng.randint(2, 6)}, that is funny.", f"Really{'?' * w.rng.randint(1, 4)}",
            f"Thanks, {w.pick(NAMES)}{'!' * w.rng.randint(1, 3)}",
        ]))
    return " ".join(parts)


def clean_rules_and_dividers(w: _Writer) -> str:
    """Sections under horizontal rules and code with long '====' dividers (a rule is one run each)."""
    blocks = []
    for _ in range(w.rng.randint(3, 10)):
        rule = w.pick(["-", "=", "*", "_", "#"]) * w.rng.randint(3, 100)
        blocks.append(f"{rule}\n{w.reasoning(w.rng.randint(10, 60))}")
    return "\n".join(blocks)


def clean_blank_lines(w: _Writer) -> str:
    """Paragraphs and poem stanzas with a few blank lines between them (never a flood)."""
    parts = [w.pick([w.reasoning(w.rng.randint(10, 50)), "\n".join(w.distinct(w.verse_line, 3))])
             for _ in range(w.rng.randint(3, 12))]
    return "".join(part + "\n" * w.rng.randint(1, 6) for part in parts).rstrip()


def clean_ascii_table(w: _Writer) -> str:
    """A boxed ASCII table: border lines of '+-----+' between rows."""
    widths = [w.rng.randint(4, 24) for _ in range(w.rng.randint(2, 5))]
    border = "+" + "+".join("-" * width for width in widths) + "+"
    lines = [border]
    for _ in range(w.rng.randint(3, 20)):
        cells = [w.pick(NAMES + ITEMS + [w.time()])[:width].ljust(width) for width in widths]
        lines += ["|" + "|".join(cells) + "|", border]
    return "Here is the table:\n" + "\n".join(lines)


def clean_numbers(w: _Writer) -> str:
    """Large round numbers and ids: long digit runs that are not floods."""
    lines = []
    for _ in range(w.rng.randint(4, 16)):
        lines.append(w.pick([
            f"The budget is {w.rng.randint(1, 9)}{'0' * w.rng.randint(3, 14)} units.",
            f"Order {w.rng.randint(10 ** 11, 10 ** 12)} ships on {w.time()}.",
            f"Pi is about 3.{''.join(str(w.rng.randint(0, 9)) for _ in range(w.rng.randint(5, 30)))}.",
        ]))
    return " ".join(lines)


RUNS_CLEAN_GENERATORS = [clean_exclamations, clean_rules_and_dividers, clean_blank_lines, clean_ascii_table,
                         clean_numbers]


def generate_runs_loopset(seed: int = 0, n_loops: int = 120, n_clean: int = 200) -> list[LabelledText]:
    """``n_loops`` one-word / one-token loops and ``n_clean`` hard negatives (seeded per text, as the main set)."""
    items: list[LabelledText] = []
    for i in range(n_loops):
        gen = RUNS_LOOP_GENERATORS[i % len(RUNS_LOOP_GENERATORS)]
        fields = gen(_Writer(random.Random(f"{seed}:{gen.__name__}:{i}")))
        items.append(LabelledText(id=f"runs-loop-{i:04d}", is_loop=True, **fields))
    for i in range(n_clean):
        gen = RUNS_CLEAN_GENERATORS[i % len(RUNS_CLEAN_GENERATORS)]
        text = gen(_Writer(random.Random(f"{seed}:{gen.__name__}:{i}")))
        items.append(LabelledText(id=f"runs-clean-{i:04d}", category=gen.__name__.removeprefix("clean_"),
                                  is_loop=False, text=text))
    return items
