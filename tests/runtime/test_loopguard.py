"""The loop guard: constructed loops and non-loops, the labelled set and its labels, ``botpsy loops``."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from botpsy.cli import main as cli_main
from botpsy.runtime.loopguard import LoopDetector, LoopGuardConfig, detect_text, split_words
from botpsy.runtime.loopset import (
    LabelledText, check_label, clean_song, flaggable_repeats, generate_loopset, loop_counter, score, _Writer,
)
from botpsy.runtime.loopset_runs import generate_runs_loopset

CONFIG = LoopGuardConfig()


def novel(count: int, first: int = 10_000) -> list[int]:
    """Token ids that never repeat (so they cannot form or extend a loop)."""
    return list(range(first, first + count))


def cycle(prefix: list[int], unit: list[int], copies: int, tail: list[int] | None = None) -> list[int]:
    return prefix + unit * copies + (tail or [])


@pytest.mark.parametrize("period", [1, 2, 5, 17, 40, 120, 300])
def test_fires_on_an_exact_cycle_at_its_period_and_start(period):
    prefix, unit = novel(50), list(range(period))
    tokens = cycle(prefix, unit, copies=-(-400 // period) + 3)
    event = LoopDetector().feed(tokens)
    assert event is not None and event.kind == "repeat"
    assert event.period == period
    assert event.start == len(prefix)
    # It fires by the token that completes the required span (a long cycle can stall the
    # window first), and with stall detection off exactly on it.
    assert event.fired_at <= len(prefix) + CONFIG.required_span(period) - 1
    repeats_only = LoopDetector(dataclasses.replace(CONFIG, stall_window=0)).feed(tokens)
    assert repeats_only.fired_at == len(prefix) + CONFIG.required_span(period) - 1


def test_short_periods_need_more_copies_than_long_ones():
    assert CONFIG.required_span(1) == CONFIG.min_loop_tokens  # 64 copies of a 1-token unit
    assert CONFIG.required_span(200) == 3 * 200


@pytest.mark.parametrize("period, copies", [(1, 60), (2, 30), (10, 6), (40, 2), (300, 2)])
def test_repetition_under_the_threshold_does_not_fire(period, copies):
    tokens = cycle(novel(50), list(range(period)), copies, tail=novel(400, first=20_000))
    assert LoopDetector().feed(tokens) is None


def test_a_cycle_with_an_incrementing_counter_is_a_loop():
    template = list(range(30))
    tokens = novel(40)
    for i in range(10):
        tokens += template[:4] + [5_000 + i] + template[5:]  # one token in 30 changes every copy
    event = LoopDetector().feed(tokens)
    assert event is not None and event.kind == "repeat" and event.period == 30
    assert event.fired_at < 40 + 30 + 2 * 30  # within two periods of the first repeated token


def test_copies_that_differ_too_much_are_not_a_loop():
    tokens = novel(40)
    for i in range(20):
        tokens += [1, 2, 3, 5_000 + i, 4, 6_000 + i]  # a numbered list of identical short items
    assert LoopDetector().feed(tokens) is None


def test_stall_fires_on_phrases_in_a_changing_order():
    rng = random.Random(0)
    phrases = [list(range(k * 10, k * 10 + 6)) for k in range(4)]
    tokens, last = novel(100), None
    while len(tokens) < 1500:
        last = rng.choice([p for p in phrases if p is not last])
        tokens += last
    no_repeats = dataclasses.replace(CONFIG, min_repeats=100)  # only the stall rule can fire
    event = LoopDetector(no_repeats).feed(tokens)
    assert event is not None and event.kind == "stall" and event.period is None
    assert 100 <= event.fired_at < 100 + 512
    assert LoopDetector(dataclasses.replace(no_repeats, stall_window=0)).feed(tokens) is None


def test_push_reports_once_then_stays_quiet_until_reset():
    detector = LoopDetector()
    events = [detector.push(t) for t in cycle(novel(10), [1, 2, 3], copies=40)]
    fired = [e for e in events if e is not None]
    assert len(fired) == 1 and detector.event == fired[0]
    detector.reset()
    assert detector.event is None and detector.count == 0
    assert detector.feed(cycle([], [7, 8], copies=40)) is not None


def test_memory_stays_bounded_and_positions_stay_absolute():
    detector = LoopDetector()
    prefix = novel(20_000)
    assert detector.feed(prefix) is None
    assert len(detector._tokens) <= 2 * detector._keep and len(detector._last) <= 2 * detector._keep
    event = detector.feed(cycle([], list(range(25)), copies=10))
    assert event is not None and event.start == len(prefix) and event.period == 25


def test_detect_text_reports_char_offsets():
    prefix = "The user wants an alarm at 7:30 on Monday, "  # not ending like a copy (".")
    loop = "Wait, let me check the alarm again. " * 20
    event = detect_text(prefix + loop)
    assert event is not None and event.period == len(split_words(loop)) // 20
    assert event.start == len(split_words(prefix)) and event.start_char == len(prefix)
    assert (prefix + loop)[event.start_char:].startswith("Wait")


def test_detect_text_accepts_a_tokenizer():
    characters = lambda text: [(ord(ch), i) for i, ch in enumerate(text)]
    event = detect_text("abcdefgh" * 30, tokenize=characters)
    assert event is not None and event.period == 8 and event.start_char == 0


@pytest.mark.parametrize("text", [
    "User: repeat the word hello 20 times.\nAssistant: " + " ".join(["hello"] * 20),
    "Chorus:\nwe sing the river home\nwe hold the golden light\n\n" * 2 + "Thank you, goodnight!",
    "\n".join(f'alarms.append(Alarm(hour={h}, minute={m}))' for h, m in zip(range(5, 23), range(0, 60, 3))),
    "\n".join(f"{i}. Buy {i + 1} apples" for i in range(1, 40)),
])
def test_legitimate_repetition_does_not_fire(text):
    assert detect_text(text) is None


@pytest.mark.parametrize("flood", ["\n" * 300, "!" * 300, "ha" * 150, "." * 400, "no" + "o" * 300, " \n" * 200])
def test_one_token_floods_are_caught_in_text(flood):
    """A model writes these one token at a time; as text they are one run, split so the guard sees them repeat."""
    prefix = "The user wants an alarm at 7:30."
    event = detect_text(prefix + flood)
    assert event is not None and event.kind == "repeat" and event.period == 1
    assert event.start_char >= len(prefix) - 1 and event.fired_char < len(prefix) + 300


def test_one_word_repetition_is_caught_and_short_repetition_is_not():
    assert detect_text("I think " + "the " * 80).period == 1
    assert detect_text("I think " + "the " * 40 + "alarm is set.") is None


@pytest.mark.parametrize("text", [
    "Wow!!! That is great... Really??? " * 3 + "hahaha, thanks!",
    "Section one\n" + "=" * 100 + "\nThe alarm is set.\n" + "-" * 80 + "\nDone.",
    "First paragraph.\n\n\n\n\nSecond paragraph.\n\n\nThird.",
    "The budget is 1" + "0" * 15 + " units and pi is 3.14159265358979323846.",
    "+" + "-" * 30 + "+\n|" + " " * 30 + "|\n+" + "-" * 30 + "+",
])
def test_runs_used_legitimately_do_not_fire(text):
    assert detect_text(text) is None


def test_floods_split_into_tokens_and_ordinary_text_does_not():
    assert [t for t, _ in split_words("Hmm... ok!!")] == ["Hmm", "...", "ok", "!!"]
    assert [t for t, _ in split_words("a\n\n\nb")] == ["a", "b"]  # a few blank lines are spacing
    assert [t for t, _ in split_words("a" + "\n" * 9 + "b")] == ["a"] + ["\n"] * 9 + ["b"]
    assert [t for t, _ in split_words("=" * 18)] == ["====", "====", "====", "====", "=="]


def test_held_out_runs_set_labels_recall_and_false_positives():
    items = generate_runs_loopset(seed=0, n_loops=40, n_clean=50)
    assert {item.id: p for item in items if (p := check_label(item))} == {}
    result = score(items)
    assert result["recall"] == 1.0, result["missed"]
    assert result["false_positive_rate"] == 0.0, result["false_positives"]


def test_config_rejects_nonsense():
    with pytest.raises(ValueError):
        LoopGuardConfig(min_period=0)
    with pytest.raises(ValueError):
        LoopGuardConfig(min_repeats=1)


# -- the labelled set ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def loopset():
    return generate_loopset(seed=0)


def test_set_is_deterministic_and_seeded():
    assert generate_loopset(seed=5, n_loops=16, n_clean=22) == generate_loopset(seed=5, n_loops=16, n_clean=22)
    assert generate_loopset(seed=5, n_loops=16, n_clean=0) != generate_loopset(seed=6, n_loops=16, n_clean=0)


def test_set_has_several_hundred_of_each(loopset):
    assert sum(x.is_loop for x in loopset) >= 400 and sum(not x.is_loop for x in loopset) >= 400


def test_every_label_checks_out(loopset):
    problems = {item.id: check_label(item) for item in loopset}
    assert {k: v for k, v in problems.items() if v} == {}


def test_label_check_catches_wrong_labels():
    item = loop_counter(_Writer(random.Random(1)))
    good = LabelledText(id="x", is_loop=True, **item)
    assert check_label(good) == []
    assert check_label(dataclasses.replace(good, start=good.start + 3))  # cycle begins earlier
    assert check_label(dataclasses.replace(good, varied=False))  # copies are not identical
    assert check_label(dataclasses.replace(good, period=good.period * 2))  # not the minimal period
    as_negative = LabelledText(id="y", category="song", is_loop=False, text=good.text)
    assert check_label(as_negative)  # a loop passed off as a non-loop


def test_flaggable_repeats_follows_the_guard_threshold():
    assert flaggable_repeats(cycle(novel(20), [1, 2, 3, 4], copies=16)) != []  # 64 tokens
    assert flaggable_repeats(cycle(novel(20), [1, 2, 3, 4], copies=15)) == []  # 60 tokens
    song = clean_song(_Writer(random.Random(2)))
    assert flaggable_repeats([hash(w) for w, _ in split_words(song)]) == []


def test_recall_and_false_positives_on_the_set(loopset):
    result = score(loopset)
    assert result["recall"] >= 0.99, result["missed"]
    assert result["false_positive_rate"] <= 0.005, result["false_positives"]
    assert result["period_exact"] >= 0.95


# -- botpsy loops --------------------------------------------------------------------------


def test_loops_command_reports_loops_and_bad_lines(tmp_path, capsys):
    looping = "Wait, let me check the alarm again. " * 20
    lines = [
        json.dumps({"text": "The alarm is set for 7:30."}),
        "this is not json",
        json.dumps({"reasoning": looping, "text": "Done."}),
        "",
        json.dumps({"text": "<think>" + looping + "</think>Done."}),
        json.dumps({"answer": "no text field"}),
        json.dumps({"text": "Sure: " + "ok " * 100}),
    ]
    path = tmp_path / "generations.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli_main(["loops", str(path), "--json"]) == 1  # bad lines -> exit 1, report still complete
    report = json.loads(capsys.readouterr().out)
    by_line = {line["line"]: line for line in report["lines"]}
    assert by_line[2]["error"].startswith("not JSON") and by_line[6]["error"] == 'no "text" string'
    assert by_line[1]["loop"] is False and by_line[1]["reasoning"] is None
    assert by_line[3]["reasoning"]["period"] == 9 and by_line[3]["text"]["loop"] is False
    assert by_line[5]["reasoning"]["start_char"] == len("<think>")
    assert by_line[7]["text"]["kind"] == "repeat" and by_line[7]["text"]["start_char"] == len("Sure: ")
    s = report["summary"]
    assert (s["lines"], s["valid_lines"], s["bad_lines"], s["lines_with_loop"]) == (6, 4, 2, 3)
    assert s["loop_rate"] == 0.75 and s["reasoning_loop_rate"] == 1.0


def test_loops_command_human_view_and_missing_file(tmp_path, capsys):
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps({"text": "fine"}) + "\n", encoding="utf-8")
    assert cli_main(["loops", str(path)]) == 0
    assert "no loops found" in capsys.readouterr().out
    assert cli_main(["loops", str(tmp_path / "missing.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
