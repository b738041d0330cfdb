"""`botpsy general`: everyday requests answered by a base model in its own template, checked, kept as
SFT examples, and added to the train split by `botpsy data --general`."""

from __future__ import annotations

import json

import pytest

from botpsy.cli import main as cli_main
from botpsy.eval.instructions.registry import INSTRUCTIONS
from botpsy.runtime.scripted import ScriptedBackend
from botpsy.train import general

pytestmark = pytest.mark.slow

# A minimal chat template of the model's own (the native format renders it with Jinja).
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"


class TemplatedScript(ScriptedBackend):
    def chat_template(self) -> str:
        return TEMPLATE


def test_every_format_instruction_is_one_the_checker_scores():
    for _, instruction, _ in general.FORMATS:
        assert instruction in INSTRUCTIONS and INSTRUCTIONS[instruction].skipped is None, instruction
    requests = general.draw_requests(120, seed=4)
    assert requests == general.draw_requests(120, seed=4) and requests != general.draw_requests(120, seed=5)
    with_format = [r for r in requests if r["instruction_id_list"]]
    assert 30 < len(with_format) < 90 and all("{" not in r["prompt"] for r in requests)
    bullets = [r for r in with_format if r["instruction_id_list"] == ["detectable_format:number_bullet_lists"]]
    assert bullets and all(f"exactly {r['kwargs'][0]['num_bullets']} markdown bullet points" in r["prompt"] for r in bullets)


def following(instruction: str, kwargs: dict) -> str:
    """An answer written to follow one instruction of the bank, with the values drawn for it."""
    plain = "Here is a short answer about the topic you asked for."
    answers = {
        "punctuation:no_comma": plain,
        "change_case:english_lowercase": plain.lower(),
        "change_case:english_capital": plain.upper(),
        "detectable_format:number_bullet_lists": "\n".join(f"* point {i}" for i in range(kwargs.get("num_bullets", 0))),
        "length_constraints:number_words": plain if kwargs.get("relation") == "less than" else " ".join(f"word{i}" for i in range(250)),
        "detectable_format:title": f"<<A title>>\n{plain}",
        "detectable_content:postscript": f"{plain}\nP.S. One more thing.",
        "startend:end_checker": f"{plain} {kwargs.get('end_phrase')}",
        "startend:quotation": f'"{plain}"',
        "detectable_format:number_highlighted_sections": "*one* and *two* and *three*",
        "language:response_language": {"fr": "Voici une courte réponse sur le sujet que vous avez demandé, avec des exemples.",
                                       "es": "Aquí tienes una respuesta corta sobre el tema que pediste, con ejemplos.",
                                       "de": "Hier ist eine kurze Antwort zu dem Thema, nach dem du gefragt hast.",
                                       "it": "Ecco una breve risposta sull'argomento che hai chiesto, con alcuni esempi.",
                                       "pt": "Aqui está uma resposta curta sobre o assunto que você pediu, com exemplos."}.get(kwargs.get("language")),
        "detectable_format:json_format": '```json\n{"answer": "short"}\n```',
        "detectable_format:multiple_sections": "\n".join(f"Section {i}\ntext" for i in range(1, kwargs.get("num_sections", 0) + 1)),
        "length_constraints:number_paragraphs": "\n***\n".join(["A paragraph."] * kwargs.get("num_paragraphs", 0)),
        "length_constraints:number_sentences": "One sentence. Two sentences.",
        "detectable_content:number_placeholders": "Dear [name], see you at [place] on [day].",
        "keywords:existence": plain + " " + " ".join(kwargs.get("keywords", [])),
        "keywords:forbidden_words": plain,
        "change_case:capital_word_frequency": "This is VERY MUCH SO TRUE.",
        "combination:repeat_prompt": f"{kwargs.get('prompt_to_repeat')} {plain}",
    }
    return answers[instruction]


def test_every_format_drawn_is_kept_when_followed_and_dropped_when_not():
    """The drawn values fit the checker's arguments: a following answer is kept, a plain one is not."""
    requests = [r for r in general.draw_requests(600, seed=0) if r["instruction_id_list"]]
    assert {r["instruction_id_list"][0] for r in requests} == {instruction for _, instruction, _ in general.FORMATS}
    for request in requests:
        instruction, kwargs = request["instruction_id_list"][0], request["kwargs"][0]
        assert general.keep(request, following(instruction, kwargs), "stop") == (True, ""), request["prompt"]
        broken = "Well, this one ignores it, sadly, and goes on: and on!"
        if instruction not in ("keywords:forbidden_words", "length_constraints:number_sentences") and kwargs.get("relation") != "less than":
            assert general.keep(request, broken, "stop") == (False, "format not followed"), request["prompt"]
    repeat = next(r for r in requests if r["instruction_id_list"] == ["combination:repeat_prompt"])
    assert repeat["prompt"].startswith(repeat["kwargs"][0]["prompt_to_repeat"])
    assert "{" not in "".join(r["prompt"] for r in requests) and "<the request>" not in str(requests)


def answer_for(prompt: str) -> str:
    """Follows 'no commas' and 'lowercase', breaks every other format, and runs on for one topic."""
    if "chess" in prompt:
        return "a very long answer " * 50
    if "commas" in prompt or "lowercase" in prompt:
        return "a short answer without any of them.<|im_end|>"
    return "Well, here it is, with commas.<|im_end|>"


def test_answers_are_checked_kept_resumed_and_mixed_into_the_train_split(monkeypatch, tmp_path, device_data, tiny_tokenizer):
    requests = general.draw_requests(60, seed=0)
    assert any("chess" in r["prompt"] for r in requests)
    opened = []

    def fake_open(model, options):
        opened.append(TemplatedScript([answer_for] * 60))
        return opened[-1]

    monkeypatch.setattr("botpsy.agent.backends.open_backend", fake_open)
    out = tmp_path / "general"
    command = ["general", "--model", "some-base", "--n", "60", "--max-tokens", "64", "--out", str(out), "--json"]
    assert cli_main(command) == 0
    meta = json.loads((out / "meta.json").read_text())
    kept = [json.loads(line) for line in (out / "general.jsonl").read_text().splitlines()]
    assert meta["requests"] == 60 and meta["kept"] == len(kept) > 0 and sum(meta["dropped"].values()) == 60 - len(kept)
    assert meta["dropped"]["looped until the token cap"] and meta["dropped"]["format not followed"]
    assert sum(row["asked"] for row in meta["by_instruction"].values()) == meta["with_format"]
    assert sum(row["kept"] for row in meta["by_instruction"].values()) == meta["with_format_kept"]
    for example in kept:
        request = next(r for r in requests if r["id"] == example["id"])
        assert example["kind"] == "general" and example["tools"] == [] and example["messages"][0]["content"] == request["prompt"]
        assert "chess" not in request["prompt"]  # looped until the token cap: not kept
        # The scripted answers break every other format (a short answer does keep "under N words" and
        # "fewer than N sentences", and uses none of the forbidden words).
        assert request["instruction_id_list"] in ([], ["punctuation:no_comma"], ["change_case:english_lowercase"],
                                                  ["keywords:forbidden_words"]) or \
            request["kwargs"][0].get("relation") == "less than"
    prompt = opened[0].calls[0].prompt
    assert prompt.startswith("<|im_start|>user\n") and "<think>" not in prompt  # its own template, no tools

    monkeypatch.setattr("botpsy.agent.backends.open_backend", lambda *a: pytest.fail("every answer was recorded"))
    assert cli_main(command) == 0  # resumed: nothing to answer again
    assert [json.loads(line) for line in (out / "general.jsonl").read_text().splitlines()] == kept
    lines = (out / "answers.jsonl").read_text().splitlines()
    (out / "answers.jsonl").write_text("\n".join(lines[:-1] + [lines[-1][:20]]))  # killed mid-line, no newline
    monkeypatch.setattr("botpsy.agent.backends.open_backend", fake_open)
    assert cli_main(command) == 0 and len(opened[-1].calls) == 1  # only the cut request again
    assert [json.loads(line) for line in (out / "general.jsonl").read_text().splitlines()] == kept
    monkeypatch.setattr("botpsy.agent.backends.open_backend", lambda *a: pytest.fail("the cut line was mended"))
    assert cli_main(command) == 0

    mixed = tmp_path / "data"
    assert cli_main(["data", "--tasks", str(device_data.parent / "tasks"), "--out", str(mixed),
                     "--general", str(out / "general.jsonl")]) == 0
    splits = json.loads((mixed / "meta.json").read_text())["splits"]
    assert splits["train"]["kinds"]["general"] == len(kept) and "general" not in splits["test"]["kinds"]
    # --general-copies sets their share: each kept answer goes in that many times, under its own id.
    assert cli_main(["data", "--tasks", str(device_data.parent / "tasks"), "--out", str(tmp_path / "data3"),
                     "--general", str(out / "general.jsonl"), "--general-copies", "3"]) == 0
    train3 = [json.loads(line) for line in (tmp_path / "data3" / "train.jsonl").read_text().splitlines()]
    tripled = [e for e in train3 if e["kind"] == "general"]
    assert len(tripled) == 3 * len(kept) and len({e["id"] for e in train3}) == len(train3)
    assert json.loads((tmp_path / "data3" / "meta.json").read_text())["splits"]["train"]["general_copies"] == 3
    assert cli_main(["data", "--tasks", str(device_data.parent / "tasks"), "--out", str(tmp_path / "data0"),
                     "--general", str(out / "general.jsonl"), "--general-copies", "0"]) != 0

    from botpsy.train.encode import IGNORE
    from botpsy.train.sft import encode_all

    encoded, skipped = encode_all(kept, tiny_tokenizer, 4096)
    assert skipped == 0 and len(encoded) == len(kept)
    answer = kept[0]["messages"][1]["content"]
    trained = tiny_tokenizer.decode([x for x, y in zip(encoded[0].input_ids, encoded[0].labels) if y != IGNORE])
    assert answer in trained and kept[0]["messages"][0]["content"] not in trained  # loss on the answer only

    # Another model, or another seed's prompts under the same ids, is answered anew, never paired with old answers.
    monkeypatch.setattr("botpsy.agent.backends.open_backend", fake_open)
    assert cli_main(command[:2] + ["other-base"] + command[3:]) == 0 and len(opened[-1].calls) == 60
    assert cli_main(command + ["--seed", "1"]) == 0 and len(opened[-1].calls) == 60
    reseeded = [json.loads(line) for line in (out / "general.jsonl").read_text().splitlines()]
    prompts = {r["id"]: r["prompt"] for r in general.draw_requests(60, seed=1)}
    assert all(e["messages"][0]["content"] == prompts[e["id"]] for e in reseeded)


def test_several_general_files_go_in_together_under_prefixed_ids(tmp_path, device_data, capsys):
    """Banks answered by different models (or seeds) are mixed without a hand merge: each file's ids
    get its folder's name in front, so the same request id from two banks stays two examples."""
    banks = []
    for name, answer in (("bank_a", "First answer."), ("bank_b", "Second answer.")):
        folder = tmp_path / name
        folder.mkdir()
        rows = [general.as_example(r, answer, thinking=False) for r in general.draw_requests(3, seed=0)]
        (folder / "general.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        banks.append(str(folder / "general.jsonl"))
    command = ["data", "--tasks", str(device_data.parent / "tasks"), "--out", str(tmp_path / "d"),
               "--general", banks[0], "--general", banks[1], "--general-copies", "2"]
    assert cli_main(command) == 0
    train = [json.loads(line) for line in (tmp_path / "d" / "train.jsonl").read_text().splitlines()]
    mixed = [e for e in train if e["kind"] == "general"]
    assert len(mixed) == 12 and len({e["id"] for e in train}) == len(train)
    assert {e["id"].split(":")[0] for e in mixed} == {"bank_a", "bank_b"}
    assert "bank_b:general-0000~1" in {e["id"] for e in mixed}
    assert {e["messages"][1]["content"] for e in mixed if e["id"].startswith("bank_a:")} == {"First answer."}
    # Two files from one folder cannot be told apart by their prefix: refused, nothing written.
    assert cli_main(command[:5] + ["--general", banks[0], "--general", banks[0]]) == 2
    assert "different folders" in capsys.readouterr().err


def test_the_share_of_requests_with_a_format_is_set_by_format_share():
    assert general.draw_requests(50, seed=3) == general.draw_requests(50, seed=3, format_share=0.5)
    assert not any(r["instruction_id_list"] for r in general.draw_requests(50, seed=3, format_share=0.0))
    assert all(r["instruction_id_list"] for r in general.draw_requests(50, seed=3, format_share=1.0))


def test_a_file_that_is_not_general_output_is_refused(tmp_path, device_data, capsys):
    bad = tmp_path / "general.jsonl"
    bad.write_text(json.dumps({"id": "x", "kind": "single", "messages": []}) + "\n")
    command = ["data", "--tasks", str(device_data.parent / "tasks"), "--out", str(tmp_path / "d"), "--general"]
    assert cli_main(command + [str(bad)]) == 2
    assert "not a `botpsy general` output" in capsys.readouterr().err
    assert cli_main(command + [str(tmp_path / "missing.jsonl")]) == 2
    assert "make it with `botpsy general" in capsys.readouterr().err


def test_the_base_answers_through_llama_cpp(qwen2_gguf, tmp_path):
    """The real part: a GGUF base through llama.cpp, its own template rendered."""
    out = tmp_path / "general"
    assert cli_main(["general", "--model", str(qwen2_gguf[0]), "--n", "3", "--max-tokens", "6", "--threads", "1",
                     "--out", str(out), "--json"]) == 0
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 3 and {a["finish_reason"] for a in answers} <= {"stop", "length"}
    meta = json.loads((out / "meta.json").read_text())
    assert meta["kept"] + sum(meta["dropped"].values()) == 3


def test_general_tools_offers_unneeded_functions_to_a_share_of_everyday_examples(tmp_path, device_data, capsys):
    """An everyday request seen with tools offered still gets its direct answer: what BFCL's
    irrelevance items and the device world's irrelevant tasks ask of a model that has tools."""
    from botpsy.train.functions import ANSWERABLE

    folder = tmp_path / "bank"
    folder.mkdir()
    rows = [general.as_example(r, "An answer.", thinking=False) for r in general.draw_requests(40, seed=0)]
    (folder / "general.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    command = ["data", "--tasks", str(device_data.parent / "tasks"), "--general", str(folder / "general.jsonl"),
               "--general-copies", "2"]
    assert cli_main(command + ["--out", str(tmp_path / "none")]) == 0
    assert cli_main(command + ["--out", str(tmp_path / "half"), "--general-tools", "0.5"]) == 0
    read = lambda name: [json.loads(line) for line in (tmp_path / name / "train.jsonl").read_text().splitlines()]  # noqa: E731
    plain, half = read("none"), read("half")
    assert all(not e["tools"] for e in plain if e["kind"] == "general")
    offered = [e for e in half if e["kind"] == "general" and e["tools"]]
    assert 20 <= len(offered) <= 60 and all(1 <= len(e["tools"]) <= 3 for e in offered)
    assert not {t["function"]["name"].split(".")[-1] for e in offered for t in e["tools"]} & ANSWERABLE
    # Only the tools change: requests, answers and every other example are as before.
    untooled = lambda rows: [{**e, "tools": [] if e["kind"] == "general" else e["tools"]} for e in rows]  # noqa: E731
    assert untooled(half) == untooled(plain)
    assert json.loads((tmp_path / "half" / "meta.json").read_text())["splits"]["train"]["general_with_tools"] == len(offered)
    assert cli_main(command + ["--out", str(tmp_path / "again"), "--general-tools", "0.5"]) == 0 and read("again") == half
    assert cli_main(command + ["--out", str(tmp_path / "bad"), "--general-tools", "1.5"]) == 2
    assert "--general-tools must be between 0 and 1" in capsys.readouterr().err
