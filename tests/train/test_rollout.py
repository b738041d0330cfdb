"""Rollouts: batched greedy equals one-at-a-time greedy, seeded sampling, stop handling, scoring.

``trained_student`` (a briefly trained two-layer hybrid model: one Gated DeltaNet layer, one
attention layer) and ``chat_examples`` are shared with the teachers and MOPD tests, which
import them from here.
"""

from __future__ import annotations

import pytest
import torch

from botpsy.train.rollout import (
    Sample,
    first_turn_prompt,
    sample_batch,
    score_completions,
    stop_token_ids,
    turn_prompts,
)
from tests.chat.conversations import ALARM, WEATHER, A, S, T, U, call
from tests.conftest import SAMPLE_TEXTS, train_briefly

pytestmark = pytest.mark.slow

CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito"]
GROUPS = ["device", "personal"]


def chat_examples(n: int, offset: int = 0) -> list[dict]:
    """Small chat-format examples in two groups, some with tools (long prompts), some without."""
    rows = []
    for i in range(offset, offset + n):
        city = CITIES[i % len(CITIES)]
        group = GROUPS[i % 2]
        tools = [WEATHER, ALARM] if i % 3 else []
        messages = [S("You are a phone assistant."), U(f"weather in {city}?" if group == "device" else f"wake me at {i % 12}")]
        if group == "device":
            messages += [A("", f"Weather for {city}.", [call("get_weather", city=city)]), T('{"temp": 3}'), A("3 degrees.", "report")]
        else:
            messages += [A("", "An alarm.", [call("set_alarm", hour=i % 12)])]
        rows.append({"id": f"ex{i}", "kind": "single", "group": group, "domain": group, "thinking": i % 2 == 0,
                     "messages": messages, "tools": tools})
    return rows


def build_trained(tokenizer, seed: int = 0, steps: int = 8, lr: float = 1e-2):
    from botpsy.model.reference import ModelSpec, build_model

    # transformers' DeltaNet init: after these few steps at a high rate it leaves varied greedy
    # text, which the batching checks need (the log-uniform default collapses to one token here).
    model = build_model(ModelSpec(num_hidden_layers=2, full_attention_interval=2), tokenizer, seed=seed,
                        decay_init="transformers")
    texts = SAMPLE_TEXTS[:6] + [first_turn_prompt(e) for e in chat_examples(4)]
    train_briefly(model, tokenizer, texts, steps=steps, lr=lr, seq_len=64)
    return model


@pytest.fixture(scope="session")
def trained_student(tmp_path_factory, tiny_tokenizer):
    """A saved, briefly trained tiny checkpoint (greedy outputs are varied, not one repeated token)."""
    from botpsy.model.checkpoint import save_checkpoint

    path = tmp_path_factory.mktemp("rollout") / "sft"
    save_checkpoint(build_trained(tiny_tokenizer), tiny_tokenizer, path, stage="sft")
    return path


@pytest.fixture(scope="module")
def student(trained_student):
    from botpsy.model.checkpoint import load_checkpoint

    torch.set_num_threads(1)
    ckpt = load_checkpoint(trained_student)
    return ckpt.model.eval(), ckpt.tokenizer


def test_turn_prompts_follow_the_thinking_flag():
    thinking, plain = chat_examples(2)
    assert first_turn_prompt(thinking).endswith("<|im_start|>assistant\n<think>\n")
    assert first_turn_prompt(plain).endswith("<think>\n\n</think>\n\n")
    device_turns = turn_prompts(thinking)
    assert len(device_turns) == 2 and "<tool_response>" in device_turns[1] and "Weather for Paris." in device_turns[1]


def test_batched_greedy_equals_unbatched(student):
    model, tokenizer = student
    prompts = [first_turn_prompt(e) for e in chat_examples(5)]
    lengths = [len(tokenizer(p)["input_ids"]) for p in prompts]
    assert max(lengths) - min(lengths) > 64  # left padding spans more than one delta-rule chunk
    one = sample_batch(model, tokenizer, prompts, max_new_tokens=12, temperature=0, batch_size=1)
    many = sample_batch(model, tokenizer, prompts, max_new_tokens=12, temperature=0, batch_size=5)
    assert [s.completion_ids for s in many] == [s.completion_ids for s in one]
    assert len({tuple(s.completion_ids) for s in one}) > 1  # prompts lead to different continuations
    # ...and equal to transformers' own generate on the unpadded prompt
    ids = torch.tensor([one[0].prompt_ids])
    out = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=sorted(stop_token_ids(tokenizer)),
                         pad_token_id=tokenizer.pad_token_id)
    assert out[0, ids.shape[1]:].tolist() == one[0].completion_ids


def test_sampling_is_seeded_and_independent_of_batching(student):
    model, tokenizer = student
    prompts = [first_turn_prompt(e) for e in chat_examples(4)]
    a = sample_batch(model, tokenizer, prompts, max_new_tokens=10, temperature=1.0, seed=3, batch_size=4)
    b = sample_batch(model, tokenizer, prompts, max_new_tokens=10, temperature=1.0, seed=3, batch_size=1)
    c = sample_batch(model, tokenizer, prompts, max_new_tokens=10, temperature=1.0, seed=4, batch_size=4)
    assert [s.completion_ids for s in a] == [s.completion_ids for s in b]
    assert [s.completion_ids for s in a] != [s.completion_ids for s in c]
    top = sample_batch(model, tokenizer, prompts, max_new_tokens=10, temperature=1.0, top_p=1e-6, seed=3)
    greedy = sample_batch(model, tokenizer, prompts, max_new_tokens=10, temperature=0)
    assert [s.completion_ids for s in top] == [s.completion_ids for s in greedy]  # top-p that small keeps only the argmax


def test_a_group_of_identical_prompts_is_prefilled_once_and_samples_as_if_alone(student, monkeypatch):
    """A GRPO group (copies of one prompt) is prefilled once, and each copy still samples from its own
    generator exactly what it samples when generated on its own."""
    model, tokenizer = student
    one, two = (first_turn_prompt(e) for e in chat_examples(2))
    prompts = [one, one, two, one, two]
    widths = []
    forward = type(model).forward
    monkeypatch.setattr(type(model), "forward", lambda self, *a, **k: widths.append(k["input_ids"].shape) or forward(self, *a, **k))
    grouped = sample_batch(model, tokenizer, prompts, max_new_tokens=10, temperature=1.0, seed=5, batch_size=5)
    assert widths[0][0] == 2 and all(w[0] <= 5 and w[1] == 1 for w in widths[1:])  # two prompt rows, then one token per row
    alone = sample_batch(model, tokenizer, prompts, max_new_tokens=10, temperature=1.0, seed=5, batch_size=1)
    assert [s.completion_ids for s in grouped] == [s.completion_ids for s in alone]
    assert len({tuple(s.completion_ids) for s in grouped[:2] + grouped[3:4]}) > 1  # the copies part ways


def test_max_new_tokens_and_finished(student):
    model, tokenizer = student
    stops = stop_token_ids(tokenizer)
    samples = sample_batch(model, tokenizer, [first_turn_prompt(e) for e in chat_examples(4)], max_new_tokens=3, temperature=1.0)
    for s in samples:
        assert 1 <= len(s.completion_ids) <= 3
        assert s.finished == (s.completion_ids[-1] in stops)
        assert not stops & set(s.completion_ids[:-1])
        assert s.finished or len(s.completion_ids) == 3
    with pytest.raises(ValueError, match="max_new_tokens"):
        sample_batch(model, tokenizer, ["hi"], max_new_tokens=0)


class ScriptedCache:
    """Stands in for transformers' cache: per-row scripts that follow the rows when the batch shrinks."""

    def __init__(self, scripts: torch.Tensor):
        self.scripts, self.step = scripts, 0

    def reorder_cache(self, index: torch.Tensor) -> None:
        self.scripts = self.scripts.index_select(0, index)


class ScriptedLM(torch.nn.Module):
    """Emits a fixed token script per prompt (chosen by the prompt's last token), whatever the batch."""

    def __init__(self, scripts: dict[int, list[int]], vocab: int):
        super().__init__()
        self.scripts, self.vocab = scripts, vocab
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, cache=None, **_):
        if cache is None:
            width = max(len(s) for s in self.scripts.values())
            rows = [self.scripts[int(i)] + [0] * (width - len(self.scripts[int(i)])) for i in input_ids[:, -1]]
            cache = ScriptedCache(torch.tensor(rows))
        logits = torch.full((input_ids.shape[0], 1, self.vocab), -1e4)
        logits[torch.arange(input_ids.shape[0]), 0, cache.scripts[:, cache.step]] = 0.0
        cache.step += 1
        return type("Out", (), {"logits": logits, "cache": cache})()


def test_rows_that_finish_leave_the_batch_in_step(tiny_tokenizer):
    im_end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompts = ["Set an alarm", "call Alice", "tomorrow gym"]
    last = [tiny_tokenizer(p)["input_ids"][-1] for p in prompts]
    assert len(set(last)) == 3
    a, b, c = last
    model = ScriptedLM({a: [c, im_end], b: [c, c, c, c, c, c], c: [a, b, a, im_end]}, len(tiny_tokenizer))
    samples = sample_batch(model, tiny_tokenizer, prompts, max_new_tokens=5, temperature=0)
    assert [s.completion_ids for s in samples] == [[c, im_end], [c] * 5, [a, b, a, im_end]]
    assert [s.finished for s in samples] == [True, False, True]
    assert samples[0].text.endswith("<|im_end|>")


def test_score_completions_matches_a_plain_forward(student):
    model, tokenizer = student
    samples = sample_batch(model, tokenizer, [first_turn_prompt(e) for e in chat_examples(3)], max_new_tokens=6, temperature=1.0)
    samples.append(Sample(prompt_ids=samples[0].prompt_ids[:20], completion_ids=samples[0].completion_ids[:2], text="", finished=False))
    scored = score_completions(model, samples, tokenizer.pad_token_id)
    steps = max(len(s.completion_ids) for s in samples)
    assert scored.logits.shape == (4, steps, len(tokenizer)) and scored.logits.dtype == torch.float32
    with torch.no_grad():
        for row, s in enumerate(samples):
            ids = torch.tensor([s.prompt_ids + s.completion_ids])
            logprobs = torch.log_softmax(model(ids).logits[0].float(), -1)
            n, p = len(s.completion_ids), len(s.prompt_ids)
            expected = logprobs[p - 1 : p - 1 + n].gather(-1, torch.tensor(s.completion_ids)[:, None])[:, 0]
            assert torch.allclose(scored.token_logprobs[row, :n], expected, atol=1e-4)
            assert scored.mask[row].tolist() == [1.0] * n + [0.0] * (steps - n)
            assert torch.all(scored.token_logprobs[row, n:] == 0)
    assert scored.token_logprobs.requires_grad  # called under grad: the graph is kept
    with torch.no_grad():
        assert not score_completions(model, samples, tokenizer.pad_token_id).logits.requires_grad


def test_lean_scoring_gives_the_same_logprobs_and_gradients_without_the_logits(student, monkeypatch):
    from botpsy.train import common

    model, tokenizer = student
    samples = sample_batch(model, tokenizer, [first_turn_prompt(e) for e in chat_examples(3)], max_new_tokens=6, temperature=1.0)
    monkeypatch.setattr(common, "LOSS_CHUNK", 4)  # several chunks, recomputed in backward
    results = []
    for keep in (True, False):
        model.zero_grad()
        scored = score_completions(model, samples, tokenizer.pad_token_id, keep_logits=keep)
        scored.token_logprobs.sum().backward()
        results.append((scored, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (full, full_grads), (lean, lean_grads) = results
    assert lean.logits is None and full.logits is not None
    assert torch.equal(lean.mask, full.mask)
    assert torch.allclose(lean.token_logprobs, full.token_logprobs, atol=1e-5)
    assert full_grads.keys() == lean_grads.keys() and full_grads
    for name in full_grads:
        assert torch.allclose(full_grads[name], lean_grads[name], atol=1e-5), name
    model.zero_grad()


class Wrapped(torch.nn.Module):
    """Stands in for DDP / DeepSpeed: the model behind a module whose forward passes everything on."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, **kwargs):
        return self.module(**kwargs)


def test_a_wrapped_model_is_scored_through_its_own_forward_on_the_completion_span_alone(student, monkeypatch):
    model, tokenizer = student
    samples = sample_batch(model, tokenizer, [first_turn_prompt(e) for e in chat_examples(3)], max_new_tokens=6, temperature=1.0)
    kept = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda **kw: kept.append(kw["logits_to_keep"]) or forward(**kw))
    for keep in (True, False):
        direct = score_completions(model, samples, tokenizer.pad_token_id, keep_logits=keep)
        assert not kept  # a bare model never goes through its forward's head
        wrapped = score_completions(Wrapped(model), samples, tokenizer.pad_token_id, keep_logits=keep)
        assert torch.allclose(wrapped.token_logprobs, direct.token_logprobs, atol=1e-5)
        assert torch.equal(wrapped.mask, direct.mask)
        starts = [len(s.prompt_ids) - 1 for s in samples]
        assert kept.pop().tolist() == list(range(min(starts), max(st + len(s.completion_ids) for st, s in zip(starts, samples))))


def test_first_turn_accuracy_scores_calls_and_turns_that_call_nothing(monkeypatch, tiny_tokenizer):
    from botpsy.train import rollout

    device, personal = chat_examples(2)  # first turns: get_weather(city="Paris"), set_alarm(hour=1)
    asks = {**personal, "messages": [personal["messages"][0], U("set an alarm"), A("What time?", "A detail is missing.")]}
    outputs = {  # prompt -> what the "model" answers
        rollout.first_turn_prompt(device): "x\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                                             "</parameter>\n</function>\n</tool_call><|im_end|>",
        rollout.first_turn_prompt(personal): "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n2\n</parameter>\n"
                                               "</function>\n</tool_call><|im_end|>",
        rollout.first_turn_prompt(asks): "What time should the alarm ring?<|im_end|>",
    }
    fake = lambda model, tokenizer, prompts, **_: [Sample([], [], outputs[p], True) for p in prompts]
    monkeypatch.setattr(rollout, "sample_batch", fake)
    scores = rollout.first_turn_accuracy(None, tiny_tokenizer, [device, personal, asks])
    # the device example offers no tools, so its exact call is not schema-valid; the alarm call is valid but wrong
    assert scores["call_examples"] == 2 and scores["exact_call_rate"] == 0.5 and scores["schema_valid_rate"] == 0.5
    assert scores["no_call_examples"] == 1 and scores["no_call_rate"] == 1.0
    assert scores["first_turn_rate"] == pytest.approx(2 / 3)
