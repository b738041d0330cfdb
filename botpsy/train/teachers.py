"""Stage 2a of the recipe: one domain teacher per task group, for multi-teacher distillation.

The report distils several domain experts into the student on its own samples (MOPD). The
device-world tasks fall into four groups (``device``, ``personal``, ``commerce`` and the
``special`` cases: refusals, missing details, injections...), and each group gets a teacher:

* by default the SFT student, trained further on its group's share of the data with the SFT
  trainer (``botpsy.train.sft.main`` with ``stage="teacher-<group>"``; cheap, and the teacher
  shares the student's tokenizer by construction);
* ``--teacher-init group=PATH``: the same, starting from a local checkpoint instead (for
  example a larger ``botpsy init --preset small`` model with the same tokenizer, or with
  ``--lora-rank`` a larger pretrained base of the student's vocabulary, ``qwen2.5-coder-1.5b``,
  which gets a fresh adapter); with ``--steps 0`` the checkpoint is used as it is;
* ``--teacher-endpoint group=URL``: a model served elsewhere (vLLM) behind an OpenAI-compatible
  ``/v1/completions`` that returns prompt log-probabilities; it is recorded in the manifest and
  scored at distillation time through ``EndpointTeacher`` (top-K log-probs of each completion
  token, ``echo=True``), which is how the real 0.8B recipe would use 4B-class teachers.

Each local teacher's group data is written to ``OUT/<group>/data/`` and its checkpoint to
``OUT/<group>/``. ``OUT/manifest.json`` maps group -> teacher (path or endpoint, its steps,
its greedy first-turn accuracy on its own group's dev examples, ``rollout.first_turn_accuracy``,
and on the other groups' dev examples, beside the student's on the same examples).

A teacher trained on its group alone can forget the rest, and what it forgot reaches the student
through distillation: the special-case teacher of 2026-12-05 refused 15 of 20 tool tasks of other
groups, the very 15 the MOPD student then refused (docs/recipe.md). ``--rehearsal R`` makes R of
each teacher's examples other groups' examples (a seeded draw), and the other-groups dev score
shows what a teacher kept.
Finished teachers are skipped on a rerun; an interrupted one resumes through the SFT trainer's
saved state.

    botpsy teachers --init runs/speedrun/sft --data runs/speedrun/data --out runs/speedrun/teachers --steps 100
    botpsy teachers --teacher-endpoint special=http://gpu-node:8000/v1 --endpoint-model teacher-special
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

from botpsy.config import save_config
from botpsy.output import emit, table

GROUPS = ("device", "personal", "commerce", "special")


@dataclass
class TeachersConfig:
    """Train (or register) one teacher per task group and write the teachers manifest for `botpsy mopd`."""

    init: str = field(default="runs/speedrun/sft", metadata={"help": "Checkpoint every local teacher starts from unless --teacher-init names another (default: the SFT student)."})
    data: str = field(default="runs/speedrun/data", metadata={"help": "Folder with train.jsonl and dev.jsonl from `botpsy data` (examples carry a `group`)."})
    out: str = field(default="runs/speedrun/teachers", metadata={"help": "Output folder: one checkpoint folder per group plus manifest.json."})
    groups: str = field(default=",".join(GROUPS), metadata={"help": "Comma-separated task groups that get a teacher."})
    steps: int = field(default=100, metadata={"help": "SFT steps per local teacher (0: use the init checkpoint as it is)."})
    batch_tokens: int = field(default=4096, metadata={"help": "Padded tokens per teacher micro-batch."})
    lr: float = field(default=1e-3, metadata={"help": "Peak learning rate of teacher training."})
    warmup_steps: int = field(default=10, metadata={"help": "Linear warm-up steps of teacher training."})
    lora_rank: int = field(default=0, metadata={"help": "Train each teacher as a LoRA adapter (botpsy.train.lora): an adapter --init (the real student's SFT folder) keeps training its own adapter, anything else gets a fresh one of this rank. 0: every weight trains (the tiny model)."})
    dtype: str = field(default="float32", metadata={"help": "Weight dtype while training and when MOPD loads the teachers (auto: bfloat16 where the hardware computes it natively, else float32; bfloat16 for the pretrained student).", "choices": ["auto", "float32", "bfloat16"]})
    detach_context: bool = field(default=False, metadata={"help": "Encode each example's context without gradient (as `botpsy sft --detach-context`): about 2.5x faster for the LoRA student."})
    teacher_init: list[str] = field(default_factory=list, metadata={"help": "GROUP=PATH: that group's teacher starts from this checkpoint, GGUF or base name (same vocabulary as the student; e.g. special=qwen2.5-coder-1.5b with --lora-rank)."})
    teacher_endpoint: list[str] = field(default_factory=list, metadata={"help": "GROUP=URL: that group's teacher is an OpenAI-compatible server (e.g. vLLM at http://host:8000/v1) returning prompt log-probs."})
    endpoint_model: str | None = field(default=None, metadata={"help": "Model name sent to endpoint teachers (vLLM's --served-model-name)."})
    endpoint_top_k: int = field(default=20, metadata={"help": "Top-K log-probs requested per token from endpoint teachers."})
    own_template: list[str] = field(default_factory=list, metadata={"help": "GROUP: that group's local teacher, used as it is (--steps 0), scores the student's answers after the prompt rendered in its own chat template rather than botpsy's (a base model teaching plain answers, e.g. general=qwen2.5-coder-1.5b; the group's prompts must have thinking off and no tools). Repeat for several groups."})
    rehearsal: float = field(default=0.0, metadata={"help": "Share of each local teacher's training examples drawn from the other groups (seeded), so it keeps what the student does elsewhere; 0: its group alone."})
    eval_examples: int = field(default=24, metadata={"help": "Dev examples of its own group on which each local teacher's first turn is scored (rollout.first_turn_accuracy)."})
    eval_other: bool = field(default=True, metadata={"help": "Also score each local teacher and the student on as many dev examples of the other groups (what the teacher kept elsewhere)."})
    eval_max_new_tokens: int = field(default=160, metadata={"help": "Generation limit for that check."})
    max_length: int = field(default=2048, metadata={"help": "Longer training sequences are skipped."})
    save_every: int = field(default=50, metadata={"help": "Steps between resumable teacher checkpoints."})
    seed: int = field(default=0, metadata={"help": "Seed for data order."})
    threads: int = field(default=0, metadata={"help": "Torch CPU threads (0: torch's default)."})
    json: bool = field(default=False, metadata={"help": "Print the manifest as JSON."})


# --------------------------------------------------------------------------- the stage


def parse_assignments(items: list[str], flag: str, groups: list[str]) -> dict[str, str]:
    """``["device=/path", ...]`` -> ``{"device": "/path"}``, refusing unknown groups."""
    out = {}
    for item in items:
        group, sep, value = item.partition("=")
        if not sep or not value:
            raise ValueError(f"{flag} expects GROUP=VALUE, got {item!r}")
        if group not in groups:
            raise ValueError(f"{flag} {item!r}: group {group!r} is not one of --groups {','.join(groups)}")
        out[group] = value
    return out


def split_by_group(rows: list[dict], group: str) -> list[dict]:
    return [r for r in rows if r.get("group") == group]


def other_groups(rows: list[dict], group: str) -> list[dict]:
    """The rows of every group but ``group``, interleaved group by group (so the first few cover them all)."""
    from botpsy.eval.suites import by_kind_round_robin

    others = [r for r in rows if r.get("group") != group]
    return by_kind_round_robin(others, len(others), key=lambda r: r.get("group"))


def with_rehearsal(rows: list[dict], others: list[dict], share: float, seed: int) -> list[dict]:
    """``rows`` plus a seeded draw of ``others`` that makes up ``share`` of the result (rounded)."""
    if not 0 <= share < 1:
        raise ValueError(f"--rehearsal {share}: give a share in [0, 1)")
    wanted = min(len(others), round(len(rows) * share / (1 - share)))
    return rows + random.Random(seed).sample(others, wanted)


def write_group_data(data: Path, group: str, folder: Path, rehearsal: float = 0.0, seed: int = 0) -> dict:
    """Write the group's train/dev examples to ``folder`` (train with ``rehearsal`` of other groups'
    examples mixed in); returns their counts."""
    from botpsy.train.sft import read_jsonl

    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in ("train", "dev"):
        every = read_jsonl(data / f"{split}.jsonl")
        rows = split_by_group(every, group)
        if split == "train" and not rows:
            raise ValueError(f"{data / 'train.jsonl'} has no examples of group {group!r}")
        if split == "train" and rehearsal:
            own = len(rows)
            rows = with_rehearsal(rows, [r for r in every if r.get("group") != group], rehearsal, seed)
            counts["rehearsal"] = len(rows) - own
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        counts[split] = len(rows)
    return counts


def is_finished(folder: Path, group: str, steps: int, rehearsal: float = 0.0) -> bool:
    """Has ``folder`` a final teacher checkpoint of ``group`` trained for ``steps`` steps, with the
    same ``rehearsal`` share?"""
    from botpsy.model.checkpoint import is_adapter_folder

    meta = folder / "meta.json"
    if not meta.is_file() or not ((folder / "config.json").is_file() or is_adapter_folder(folder)):
        return False
    record = json.loads(meta.read_text())
    return (record.get("stage") == f"teacher-{group}" and record.get("steps") == steps
            and record.get("rehearsal", 0.0) == rehearsal)


def train_teacher(config: TeachersConfig, group: str, init: str, folder: Path) -> dict:
    """Train one local teacher with the SFT trainer (resumes if interrupted); returns its record."""
    from botpsy.train import sft

    counts = write_group_data(Path(config.data), group, folder / "data", config.rehearsal, config.seed)
    if config.steps > 0 and not is_finished(folder, group, config.steps, config.rehearsal):
        sft_config = sft.SFTConfig(
            init=init, data=str(folder / "data"), out=str(folder), stage=f"teacher-{group}", steps=config.steps,
            batch_tokens=config.batch_tokens, lr=config.lr, warmup_steps=min(config.warmup_steps, config.steps),
            max_length=config.max_length, lora_rank=config.lora_rank, dtype=config.dtype, detach_context=config.detach_context,
            eval_every=0, eval_examples=0, test_examples=0, save_every=config.save_every,
            seed=config.seed, threads=config.threads, json=False)
        sft.main(sft_config)
        if config.rehearsal:  # stamped, so a rerun with another share trains again
            meta = json.loads((folder / "meta.json").read_text())
            (folder / "meta.json").write_text(json.dumps({**meta, "rehearsal": config.rehearsal}, indent=2) + "\n")
    path = str(folder) if config.steps > 0 else init
    return {"kind": "local", "path": path, "init": init, "steps": config.steps, "examples": counts, "dtype": config.dtype,
            "rehearsal": config.rehearsal}


def dev_accuracy(ckpt, rows: list[dict], config) -> dict:
    """Greedy first-turn accuracy of a loaded checkpoint on ``rows`` (batched)."""
    from botpsy.train.rollout import call_examples, first_turn_accuracy

    return first_turn_accuracy(ckpt.model, ckpt.tokenizer, call_examples(rows, config.eval_examples), config.eval_max_new_tokens)


def write_manifest(path: Path, config: TeachersConfig, teachers: dict) -> dict:
    """The manifest `botpsy mopd` reads; ``dev_eval`` says how the dev scores were taken, so MOPD
    can reuse the teachers' and the student's scores instead of generating them again."""
    manifest = {"stage": "teachers", "student": config.init, "data": config.data,
                "dev_eval": {"examples": config.eval_examples, "max_new_tokens": config.eval_max_new_tokens},
                "teachers": teachers}
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(config: TeachersConfig) -> int:
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.common import resolve_dtype
    from botpsy.train.sft import read_jsonl

    config.dtype = resolve_dtype(config.dtype)  # auto: bfloat16 only where the hardware has it
    if config.threads:
        torch.set_num_threads(config.threads)
    groups = [g.strip() for g in config.groups.split(",") if g.strip()]
    inits = parse_assignments(config.teacher_init, "--teacher-init", groups)
    endpoints = parse_assignments(config.teacher_endpoint, "--teacher-endpoint", groups)
    both = sorted(set(inits) & set(endpoints))
    if both:
        raise ValueError(f"groups {both} have both --teacher-init and --teacher-endpoint; give one")
    own = set(config.own_template)
    if own - set(groups) or own & set(endpoints):
        raise ValueError(f"--own-template {sorted(own)}: each must be one of --groups {','.join(groups)} with a local teacher")
    if own and config.steps > 0:
        raise ValueError("--own-template takes a teacher as it is: give --steps 0 (a teacher trained here learns "
                         "botpsy's template, so it should read prompts in that one)")
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, out / "config.json")
    manifest_file = out / "manifest.json"
    manifest = json.loads(manifest_file.read_text()) if manifest_file.is_file() else {}
    teachers = manifest.get("teachers", {})
    dev_rows = read_jsonl(Path(config.data) / "dev.jsonl")
    student = None
    for group in groups:
        if group in endpoints:
            teachers[group] = {"kind": "endpoint", "url": endpoints[group], "model": config.endpoint_model,
                               "top_k": config.endpoint_top_k, "steps": None, "dev_call": None}
            continue
        folder = out / group
        record = teachers.get(group, {})
        init = inits.get(group, config.init)
        template = "own" if group in own else "botpsy"
        if record.get("kind") == "local" and record.get("init") == init and "dev_call" in record and \
                record.get("template", "botpsy") == template and (config.steps == 0 or is_finished(folder, group, config.steps, config.rehearsal)):
            print(f"[teachers] {group}: finished, skipped")
            continue
        record = {**train_teacher(config, group, init, folder), "template": template}
        rows, others = split_by_group(dev_rows, group), other_groups(dev_rows, group)
        teacher = load_checkpoint(record["path"], dtype=config.dtype)
        record["dev_call"] = dev_accuracy(teacher, rows, config)
        if config.eval_other and others:
            record["other_dev_call"] = dev_accuracy(teacher, others, config)
        del teacher
        # The student on the same examples: a teacher worth distilling beats it on its own group
        # and keeps what the student does on the others.
        student = student or load_checkpoint(config.init, dtype=config.dtype)  # loaded once, for every group
        record["student_dev_call"] = dev_accuracy(student, rows, config)
        if config.eval_other and others:
            record["student_other_dev_call"] = dev_accuracy(student, others, config)
        teachers[group] = record
        write_manifest(manifest_file, config, teachers)  # after each teacher: resumable
    manifest = write_manifest(manifest_file, config, teachers)
    rows = [{"group": g, "teacher": t.get("path") or t.get("url"), "steps": t.get("steps"),
             "dev first turns right": "-" if not t.get("dev_call") else f"{t['dev_call']['first_turn_rate']:.0%}",
             "dev exact calls": "-" if not t.get("dev_call") else f"{t['dev_call']['exact_call_rate']:.0%}",
             "student first turns right": "-" if not t.get("student_dev_call") else f"{t['student_dev_call']['first_turn_rate']:.0%}",
             "other groups: teacher / student": "-" if not t.get("other_dev_call") else
             f"{t['other_dev_call']['first_turn_rate']:.0%} / {t['student_other_dev_call']['first_turn_rate']:.0%}"}
            for g, t in teachers.items()]
    emit(manifest, config.json, lambda _: table(rows) + f"\n-> {manifest_file}")
    return 0


# --------------------------------------------------------------------------- teachers at distillation time


@dataclass
class TeacherScores:
    """A teacher's log-probs at each completion position: dense [B, T, V], or sparse top-K
    (``ids`` [B, T, K] with ``logprobs`` [B, T, K]; ``valid`` marks real entries)."""

    logprobs: torch.Tensor
    ids: torch.Tensor | None = None
    valid: torch.Tensor | None = None

    @property
    def sparse(self) -> bool:
        return self.ids is not None


def chatml_messages(prompt: str) -> list[dict]:
    r"""The messages of a rendered prompt without tools or reasoning, for a teacher that reads its own template.

    botpsy's wire format is ChatML with Qwen3.5's think blocks. A thinking-off prompt without
    tools is therefore plain ChatML turns and then an assistant turn opened by an empty think
    block; a base model that never saw think blocks writes oddities after one (the 1.5B opened two
    of three probed answers with ``<answer>``), so it should score the same completion after the
    same turns in its own template. Prompts with tools or with reasoning on are refused: they have
    no faithful rendering in a template that lacks botpsy's call format or think blocks.

    >>> chatml_messages("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    [{'role': 'user', 'content': 'Hi'}]
    """
    from botpsy.chat.template import (
        IM_END,
        IM_START,
        THINK_CLOSE,
        THINK_OPEN,
        TOOLS_HEADER,
    )

    opening = f"{IM_START}assistant\n{THINK_OPEN}\n\n{THINK_CLOSE}\n\n"
    if not prompt.endswith(opening):
        raise ValueError("a teacher in its own template scores answers only: its group's prompts must have thinking off "
                         f"(end with an empty think block); this one ends {prompt[-60:]!r}")
    if TOOLS_HEADER in prompt:
        raise ValueError("a teacher in its own template cannot read botpsy's tool declarations: give its group prompts "
                         "without tools")
    messages = []
    for block in prompt[: -len(opening)].split(IM_START)[1:]:
        head, sep, rest = block.partition("\n")
        content, closed, tail = rest.partition(IM_END)
        if not sep or not closed or tail.strip():
            raise ValueError(f"not a ChatML turn: {block[:80]!r}")
        if head == "assistant" and content.startswith(THINK_OPEN):  # an earlier turn's (empty) reasoning
            content = content.partition(THINK_CLOSE)[2].lstrip("\n")
        messages.append({"role": head, "content": content})
    if not messages:
        raise ValueError("the prompt has no turns before the assistant's")
    return messages


class LocalTeacher:
    """A checkpoint in this process; scores completions with one no-grad forward.

    ``own_template``: the completions are scored after the prompt rendered in the teacher's own chat
    template (``chatml_messages``, then its tokenizer's template) rather than in botpsy's, for a
    base model asked to teach plain answers. The completion tokens are the student's either way,
    so the distributions still line up token for token.
    """

    kind = "local"

    def __init__(self, group: str, path: str, model, tokenizer, own_template: bool = False):
        self.group, self.path, self.model, self.tokenizer = group, path, model.eval(), tokenizer
        self.own_template, self.prompts = own_template, {}
        for p in self.model.parameters():
            p.requires_grad_(False)

    def own_prompt_ids(self, prompt_ids: list[int]) -> list[int]:
        key = tuple(prompt_ids)
        if key not in self.prompts:
            messages = chatml_messages(self.tokenizer.decode(prompt_ids, skip_special_tokens=False))
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            self.prompts[key] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.prompts[key]

    @torch.no_grad()
    def score(self, samples, pad_id: int) -> TeacherScores:
        from dataclasses import replace

        from botpsy.train.rollout import score_completions

        if self.own_template:
            samples = [replace(s, prompt_ids=self.own_prompt_ids(s.prompt_ids)) for s in samples]
        return TeacherScores(logprobs=torch.log_softmax(score_completions(self.model, samples, pad_id).logits, dim=-1))

    def to(self, device) -> LocalTeacher:
        self.model.to(device)
        return self


class EndpointTeacher:
    """An OpenAI-compatible ``/v1/completions`` server that scores prompt tokens (``echo=True``).

    Each sample's prompt + completion goes as token ids (no re-tokenization); the server
    returns, for every position, the top-K log-probs of the next token. vLLM's
    ``return_tokens_as_token_ids`` makes it name tokens ``"token_id:N"``; plain token texts are
    mapped back through the shared tokenizer (texts that are not one token are dropped).
    """

    kind = "endpoint"

    def __init__(self, group: str, url: str, tokenizer, model: str | None = None, top_k: int = 20,
                 timeout: float = 120.0, concurrency: int = 8):
        self.group, self.url, self.tokenizer, self.model = group, url.rstrip("/"), tokenizer, model
        self.top_k, self.timeout, self.concurrency = top_k, timeout, concurrency
        self.vocab = tokenizer.get_vocab()

    def request(self, ids: list[int]) -> list:
        body = {"prompt": ids, "max_tokens": 1, "echo": True, "logprobs": self.top_k, "temperature": 0.0,
                "return_tokens_as_token_ids": True}
        if self.model:
            body["model"] = self.model
        req = urllib.request.Request(f"{self.url}/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, OSError) as exc:
            raise ValueError(f"teacher endpoint {self.url} ({self.group}) failed: {exc}") from None
        try:
            top = payload["choices"][0]["logprobs"]["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"teacher endpoint {self.url} returned no echoed top_logprobs (needs echo=True, logprobs=K)") from None
        if len(top) < len(ids):
            raise ValueError(f"teacher endpoint {self.url} echoed {len(top)} positions for a {len(ids)}-token prompt")
        return top

    def token_id(self, key: str) -> int | None:
        if key.startswith("token_id:"):
            return int(key.split(":", 1)[1])
        if key in self.vocab:
            return self.vocab[key]
        ids = self.tokenizer.encode(key, add_special_tokens=False)
        return ids[0] if len(ids) == 1 else None

    def score(self, samples, pad_id: int) -> TeacherScores:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            tops = list(pool.map(self.request, [s.prompt_ids + s.completion_ids for s in samples]))
        steps = max(1, max(len(s.completion_ids) for s in samples))
        rows = []
        for s, top in zip(samples, tops):
            # Entry i is the distribution over token i given the tokens before it.
            rows.append([self.parse_position(top[len(s.prompt_ids) + t]) for t in range(len(s.completion_ids))])
        width = max([1] + [len(p) for row in rows for p in row])
        ids = torch.zeros((len(samples), steps, width), dtype=torch.long)
        logprobs = torch.zeros((len(samples), steps, width))
        valid = torch.zeros((len(samples), steps, width), dtype=torch.bool)
        for r, row in enumerate(rows):
            for t, entries in enumerate(row):
                for k, (token, logprob) in enumerate(entries):
                    ids[r, t, k], logprobs[r, t, k], valid[r, t, k] = token, logprob, True
        return TeacherScores(logprobs=logprobs, ids=ids, valid=valid)

    def parse_position(self, entries) -> list[tuple[int, float]]:
        best: dict[int, float] = {}
        for key, logprob in (entries or {}).items():
            token = self.token_id(key)
            if token is not None and logprob is not None:
                best[token] = max(float(logprob), best.get(token, float("-inf")))
        return sorted(best.items(), key=lambda kv: -kv[1])

    def to(self, device) -> EndpointTeacher:
        return self


def same_tokenizer(a, b) -> bool:
    return a.get_vocab() == b.get_vocab()


def load_teachers(manifest_path: str | Path, groups: list[str], student_tokenizer, student_vocab_size: int) -> dict:
    """group -> ``LocalTeacher`` / ``EndpointTeacher`` for every group, with clear errors.

    Distillation compares distributions token by token, so every local teacher must use the
    student's tokenizer and output width; a group without a teacher is an error.
    """
    from botpsy.model.checkpoint import load_checkpoint

    path = Path(manifest_path)
    if not path.is_file():
        raise FileNotFoundError(f"teachers manifest {path} does not exist; run `botpsy teachers` first")
    records = json.loads(path.read_text()).get("teachers", {})
    missing = [g for g in groups if g not in records]
    if missing:
        raise ValueError(f"no teacher for group(s) {missing} in {path}; it has teachers for {sorted(records)}")
    teachers = {}
    for group in groups:
        record = records[group]
        if record.get("kind") == "endpoint":
            teachers[group] = EndpointTeacher(group, record["url"], student_tokenizer, record.get("model"), record.get("top_k") or 20)
            continue
        ckpt = load_checkpoint(record["path"], dtype=record.get("dtype", "float32"))
        width = ckpt.model.get_output_embeddings().weight.shape[0]
        if not same_tokenizer(ckpt.tokenizer, student_tokenizer) or width != student_vocab_size:
            raise ValueError(
                f"the {group} teacher at {record['path']} uses a different tokenizer or vocabulary (teacher: "
                f"{len(ckpt.tokenizer)} tokens, {width} logits; student: {len(student_tokenizer)} tokens, "
                f"{student_vocab_size} logits); MOPD compares distributions token by token, so teachers must share "
                f"the student's tokenizer")
        if record.get("template", "botpsy") not in ("botpsy", "own"):
            raise ValueError(f"the {group} teacher's template {record['template']!r} in {path} is neither 'botpsy' nor 'own'")
        if record.get("template") == "own" and not ckpt.tokenizer.chat_template:
            raise ValueError(f"the {group} teacher at {record['path']} should read prompts in its own template, but its "
                             "tokenizer has no chat template")
        teachers[group] = LocalTeacher(group, record["path"], ckpt.model, ckpt.tokenizer, record.get("template") == "own")
    return teachers
