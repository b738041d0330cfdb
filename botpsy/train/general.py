"""``botpsy general``: everyday requests answered by the base model itself, to mix into SFT.

Trained on device-world tool tasks alone, the student treats every request as a tool task: asked
for an article it says which search engines it would use
(`bench_out/student_eval_2026-12-06/sft_q4_k_m_ifeval_sample10.jsonl`).
The report's SFT mixes general data in. No dataset hub is reachable here, so botpsy makes its own:

* requests from a bank written here (a task such as "write a short blog post about ..." times a
  topic), about half with one format instruction that can be checked (no commas, exactly 3
  bullet points, fewer than 80 words...). The instruction *types* are ones IFEval checks, so its
  checker can verify them; none of IFEval's or IFBench's prompts are used;
* answered greedily by the base model in its own chat template, no tools (``chat_format``
  native), so the student is trained to keep answering as its base did (self-distillation);
* kept only where the base got it right: the answer finished within the token cap, does not
  repeat itself (the runtime's loop detector), and follows its format instruction by botpsy's
  IFEval checker (strict).

Each kept answer becomes a training example in ``botpsy data``'s format (kind ``general``, no
tools), with thinking on for about half of them and one sentence of reasoning, as the tool
examples have. ``botpsy data --general FILE`` adds them to the train split.

The answers are written one per line as they come, so an interrupted run resumes.

    botpsy general --model qwen2.5-coder-0.5b --n 300 --out runs/student/general
    botpsy data --tasks runs/student/tasks --out runs/student/data --general runs/student/general/general.jsonl
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from botpsy.output import emit, table


@dataclass
class GeneralConfig:
    """Everyday requests answered by the base model in its own template, checked, as SFT examples."""

    model: str = field(default="qwen2.5-coder-0.5b", metadata={"help": "The base model that answers: a known base name, a .gguf file or a checkpoint folder."})
    out: str = field(default="runs/student/general", metadata={"help": "Output folder: general.jsonl (kept examples), answers.jsonl (every answer, resumable) and meta.json."})
    n: int = field(default=300, metadata={"help": "Requests to answer (some are not kept)."})
    seed: int = field(default=0, metadata={"help": "Seed for drawing the requests and the thinking on/off choice."})
    max_tokens: int = field(default=512, metadata={"help": "Token cap per answer; an answer that reaches it is not kept."})
    thinking_share: float = field(default=0.5, metadata={"help": "Share of kept examples rendered with thinking on (as `botpsy data`)."})
    format_share: float = field(default=0.5, metadata={"help": "Share of requests that carry a format instruction."})
    threads: int = field(default=0, metadata={"help": "CPU threads for the model (0: all physical cores)."})
    json: bool = field(default=False, metadata={"help": "Print the summary as JSON."})


TASKS = [
    "Explain {topic} to a curious teenager.",
    "Write a short blog post about {topic}.",
    "Give me a few practical tips about {topic}.",
    "Write a short poem about {topic}.",
    "What are the advantages and disadvantages of {topic}?",
    "Write an email to a friend telling them what you learned about {topic}.",
    "Summarize what most people should know about {topic}.",
    "Tell a short story in which {topic} plays a part.",
    "Write a two-minute speech about {topic} for a school assembly.",
    "Why does {topic} matter to ordinary people? Answer briefly.",
    "Write a few questions and answers a beginner might have about {topic}.",
    "Describe a typical day for someone who cares a lot about {topic}.",
]

TOPICS = [
    "learning to cook", "cycling in a big city", "saving money each month", "keeping houseplants alive",
    "the water cycle", "working from home", "good sleep habits", "public libraries", "learning a second language",
    "composting kitchen scraps", "volcanoes", "long-distance train travel", "board games", "the history of tea",
    "electric cars", "bird migration", "training for a marathon", "photography for beginners", "recycling plastic",
    "the first moon landing", "coffee", "managing your time", "basic first aid", "solar panels on houses",
    "baking bread at home", "chess", "camping with children", "daily life in ancient Rome", "smartphone batteries",
    "volunteering", "jazz", "rainforests", "travelling on a small budget", "writing a CV", "meditation",
    "the printing press", "growing vegetables on a balcony", "octopuses", "repairing a bicycle", "driving in winter",
]

# (instruction text, IFEval instruction id, its kwargs). In the kwargs a (low, high) pair draws an
# int, a list draws one item (itself a list for the word-list instructions) and REQUEST stands for the
# request without its instruction; the drawn values fill the text's {placeholders} (see `fill`).
REQUEST = "<the request>"
FORMATS = [
    ("Do not use any commas in your answer.", "punctuation:no_comma", {}),
    ("Write your whole answer in lowercase letters only.", "change_case:english_lowercase", {}),
    ("Write your whole answer in capital letters.", "change_case:english_capital", {}),
    ("Use exactly {num_bullets} markdown bullet points, each line starting with '* '.", "detectable_format:number_bullet_lists", {"num_bullets": (2, 5)}),
    ("Keep the answer under {num_words} words.", "length_constraints:number_words", {"num_words": (40, 120), "relation": "less than"}),
    ("Write at least {num_words} words.", "length_constraints:number_words", {"num_words": (80, 200), "relation": "at least"}),
    ("Give the answer a title in double angular brackets, like <<A title>>.", "detectable_format:title", {}),
    ("Add a postscript at the end that starts with P.S.", "detectable_content:postscript", {"postscript_marker": "P.S."}),
    ("End the answer with the exact words: {end_phrase}", "startend:end_checker", {"end_phrase": ["Thanks for reading.", "That is all for today.", "Any questions?"]}),
    ("Put your entire answer inside double quotation marks.", "startend:quotation", {}),
    ("Mark at least {num_highlights} phrases as highlighted with markdown, for example *a highlighted phrase*.", "detectable_format:number_highlighted_sections", {"num_highlights": (2, 3)}),
    # The groups the tool-trained students lost most on (language 23% against the base's 54%, case
    # 9% against 19%; bench_out/student_sft3_2026-12-06/ifeval200_groups_table.md) and the other
    # format and length types IFEval checks.
    ("Answer in {language_name} only; no other language is allowed.", "language:response_language", {"language": ["fr", "es", "de", "it", "pt"]}),
    ("Write your entire answer in JSON format; you may wrap it in markdown ticks such as ```.", "detectable_format:json_format", {}),
    ("Split your answer into {num_sections} sections, starting each with 'Section' and its number (Section 1, Section 2, ...).", "detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": (2, 4)}),
    ("Write exactly {num_paragraphs} paragraphs, separated from each other by the markdown divider ***.", "length_constraints:number_paragraphs", {"num_paragraphs": (2, 4)}),
    ("Use fewer than {num_sentences} sentences.", "length_constraints:number_sentences", {"num_sentences": (4, 8), "relation": "less than"}),
    ("Include at least {num_placeholders} placeholders in square brackets, such as [name].", "detectable_content:number_placeholders", {"num_placeholders": (1, 3)}),
    ("Make sure to use these words in your answer: {keywords}.", "keywords:existence", {"keywords": [["simple", "everyday"], ["plan", "habit"], ["cost", "time"], ["friend", "question"]]}),
    ("Do not use any of these words: {forbidden_words}.", "keywords:forbidden_words", {"forbidden_words": [["very", "really"], ["important", "great"], ["always", "never"], ["thing", "stuff"]]}),
    ("Use at least {capital_frequency} words written entirely in capital letters, for emphasis.", "change_case:capital_word_frequency", {"capital_frequency": (2, 4), "capital_relation": "at least"}),
    ("First repeat the request above word for word, without this sentence, then give your answer; write nothing before the repeated request.", "combination:repeat_prompt", {"prompt_to_repeat": REQUEST}),
]

LANGUAGE_NAMES = {"fr": "French", "es": "Spanish", "de": "German", "it": "Italian", "pt": "Portuguese"}


def fill(text: str, values: dict) -> str:
    """An instruction's text with its drawn values: word lists quoted and joined, a language code named.

    >>> fill("Avoid {forbidden_words}; answer in {language_name}.", {"forbidden_words": ["very", "really"], "language": "fr"})
    "Avoid 'very', 'really'; answer in French."
    """
    shown = {key: ", ".join(f"'{word}'" for word in value) if isinstance(value, list) else value for key, value in values.items()}
    if "language" in values:
        shown["language_name"] = LANGUAGE_NAMES[values["language"]]
    return text.format(**shown)


REASONING = "This is a general request and no tool is needed, so I'll answer it directly."
REASONING_FORMAT = "This is a general request and no tool is needed; I'll answer it directly in the format asked for."


def draw_requests(n: int, seed: int, format_share: float = 0.5) -> list[dict]:
    """``n`` requests: ``{"id", "prompt", "instruction_id_list", "kwargs"}`` (IFEval's record shape), the
    same for the same seed and share. Every task x topic pair comes up before any repeats;
    ``format_share`` of them carry a format instruction.

    >>> [r["id"] for r in draw_requests(2, 0)]
    ['general-0000', 'general-0001']
    >>> len({r["prompt"] for r in draw_requests(200, 0)})
    200
    """
    rng = random.Random(seed)
    pairs = [(task, topic) for task in TASKS for topic in TOPICS]
    rng.shuffle(pairs)
    requests = []
    for i in range(n):
        task, topic = pairs[i % len(pairs)]
        prompt, ids, kwargs = task.format(topic=topic), [], []
        if rng.random() < format_share:
            text, instruction, spec = FORMATS[rng.randrange(len(FORMATS))]
            values = {key: (rng.randint(*v) if isinstance(v, tuple) else rng.choice(v) if isinstance(v, list)
                            else prompt if v == REQUEST else v) for key, v in spec.items()}
            prompt, ids, kwargs = f"{prompt} {fill(text, values)}", [instruction], [values]
        requests.append({"id": f"general-{i:04d}", "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs})
    return requests


def keep(request: dict, answer: str, finish_reason: str) -> tuple[bool, str]:
    """(kept, why not): a finished, non-empty answer that does not repeat itself and follows its
    format instruction (strict). Repetition is found by the runtime's loop detector run over the
    words of the finished answer, so a loop is told apart from an answer that was merely long.

    >>> keep({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}, "No commas here.", "stop")
    (True, '')
    >>> keep({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}, "Yes, a comma.", "stop")
    (False, 'format not followed')
    >>> keep({"instruction_id_list": [], "kwargs": []}, "A long answer that", "length")
    (False, 'cut at the token cap')
    >>> keep({"instruction_id_list": [], "kwargs": []}, "The tide rises and falls. " * 12, "length")
    (False, 'looped until the token cap')
    >>> keep({"instruction_id_list": [], "kwargs": []}, "The tide rises and falls. " * 12, "stop")
    (False, 'repeats itself')
    """
    from botpsy.eval.instructions import score_item
    from botpsy.runtime.loopguard import detect_text

    looped = detect_text(answer) is not None
    if finish_reason != "stop":
        if finish_reason != "length":
            return False, f"ended by {finish_reason}"
        return False, "looped until the token cap" if looped else "cut at the token cap"
    if not answer.strip():
        return False, "empty"
    if looped:
        return False, "repeats itself"
    if request["instruction_id_list"] and not score_item(request, answer)["follow_all_strict"]:
        return False, "format not followed"
    return True, ""


def as_example(request: dict, answer: str, thinking: bool) -> dict:
    """A training example in `botpsy data`'s format: one user turn, the base's answer, no tools."""
    reasoning = REASONING_FORMAT if request["instruction_id_list"] else REASONING
    return {"id": request["id"], "task_id": request["id"], "kind": "general", "domain": "general", "group": "general",
            "split": "train", "thinking": thinking,
            "messages": [{"role": "user", "content": request["prompt"]},
                         {"role": "assistant", "content": answer.strip(), "reasoning_content": reasoning}],
            "tools": []}


def answer_requests(config: GeneralConfig, requests: list[dict], answers_file: Path) -> list[dict]:
    """Every request's answer record (``{"id", "prompt", "model", "max_tokens", "answer", "finish_reason",
    "seconds"}``), reusing the ones already in ``answers_file`` that answered the same prompt with the
    same model and cap, and appending new ones as they are made."""
    done = {}
    wanted = {r["id"]: (r["prompt"], config.model, config.max_tokens) for r in requests}
    text = answers_file.read_text() if answers_file.is_file() else ""
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by an interruption: that request is answered again
        if wanted.get(record.get("id")) == (record.get("prompt"), record.get("model"), record.get("max_tokens")):
            done[record["id"]] = record
    if text and not text.endswith("\n"):  # close the cut line, so the next record starts a line of its own
        with answers_file.open("a") as sink:
            sink.write("\n")
    todo = [r for r in requests if r["id"] not in done]
    if todo:
        from botpsy.agent.backends import open_backend
        from botpsy.eval.suites import RunSettings, run_turn
        from botpsy.runtime.backend import BackendOptions

        backend = open_backend(config.model, BackendOptions(threads=config.threads, n_ctx=config.max_tokens + 2048))
        if not (backend.chat_template() or "").strip():
            backend.close()
            raise ValueError(f"{config.model} carries no chat template of its own to answer in")
        settings = RunSettings(max_tokens=config.max_tokens, enable_thinking=False, chat_format="native")
        try:
            with answers_file.open("a") as sink:
                for i, request in enumerate(todo, 1):
                    start = time.perf_counter()
                    result = run_turn(backend, [{"role": "user", "content": request["prompt"]}], None, settings)
                    record = {"id": request["id"], "prompt": request["prompt"], "model": config.model,
                              "max_tokens": config.max_tokens, "answer": result.content,
                              "finish_reason": result.finish_reason, "seconds": round(time.perf_counter() - start, 2)}
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    done[request["id"]] = record
                    print(f"[general] {i}/{len(todo)} {request['id']}: {record['finish_reason']}, {record['seconds']} s",
                          file=sys.stderr, flush=True)
        finally:
            backend.close()
    return [done[r["id"]] for r in requests]


def by_instruction(requests: list[dict], kept_ids: set[str]) -> dict[str, dict[str, int]]:
    """How often each instruction type was asked and how often its answer was kept.

    >>> by_instruction([{"id": "a", "instruction_id_list": ["punctuation:no_comma"]},
    ...                 {"id": "b", "instruction_id_list": ["punctuation:no_comma"]}], {"b"})
    {'punctuation:no_comma': {'asked': 2, 'kept': 1}}
    """
    counts: dict[str, dict[str, int]] = {}
    for request in requests:
        for instruction in request["instruction_id_list"]:
            row = counts.setdefault(instruction, {"asked": 0, "kept": 0})
            row["asked"] += 1
            row["kept"] += request["id"] in kept_ids
    return dict(sorted(counts.items()))


def main(config: GeneralConfig) -> int:
    if config.n < 1:
        raise ValueError("--n must be at least 1")
    if not 0.0 <= config.format_share <= 1.0:
        raise ValueError(f"--format-share must be between 0 and 1, got {config.format_share}")
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    requests = draw_requests(config.n, config.seed, config.format_share)
    answers = answer_requests(config, requests, out / "answers.jsonl")
    rng = random.Random(config.seed + 1)
    examples, dropped = [], {}
    for request, record in zip(requests, answers):
        kept, why = keep(request, record["answer"], record["finish_reason"])
        if kept:
            examples.append(as_example(request, record["answer"], rng.random() < config.thinking_share))
        else:
            dropped[why] = dropped.get(why, 0) + 1
    with (out / "general.jsonl").open("w") as sink:
        sink.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in examples)
    with_format = [r for r in requests if r["instruction_id_list"]]
    kept_ids = {e["id"] for e in examples}
    summary = {"stage": "general", "model": config.model, "requests": len(requests), "kept": len(examples),
               "dropped": dropped, "with_format": len(with_format),
               "with_format_kept": sum(r["id"] in kept_ids for r in with_format),
               "by_instruction": by_instruction(with_format, kept_ids),
               "thinking_on": sum(e["thinking"] for e in examples),
               "answer_seconds": round(sum(r["seconds"] for r in answers), 1), "config": vars(config)}
    (out / "meta.json").write_text(json.dumps(summary, indent=2) + "\n")
    rows = [{"requests": summary["requests"], "kept": summary["kept"], "with format": summary["with_format"],
             "with format kept": summary["with_format_kept"], "dropped": ", ".join(f"{k} {v}" for k, v in dropped.items()) or "-"}]
    emit(summary, config.json, lambda _: table(rows) + f"\n-> {out / 'general.jsonl'}")
    return 0
