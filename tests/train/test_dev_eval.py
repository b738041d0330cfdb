"""The batched call check scores exactly what one-prompt-at-a-time greedy generation would."""

from __future__ import annotations

import doctest

import torch

from botpsy.chat.parse import parse_output
from botpsy.chat.template import render
from botpsy.model.checkpoint import load_checkpoint
from botpsy.train import dev_eval
from botpsy.train.dev_eval import call_accuracy, calls_match, first_call_turn, schema_valid, tool_choice
from tests.chat.conversations import call
from tests.conftest import SAMPLE_TEXTS, train_briefly
from tests.train.test_sft import make_examples


def unbatched_scores(model, tokenizer, examples, max_new_tokens):
    """The reference: transformers' own generate on each prompt alone."""
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    scores = []
    for example in examples:
        context, gold = first_call_turn(example)
        prompt = render(context, example["tools"], add_generation_prompt=True, enable_thinking=example["thinking"])
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                             pad_token_id=tokenizer.pad_token_id)
        text = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=False)
        parsed = parse_output(text, example["tools"], thinking=example["thinking"])
        scores.append((bool(parsed.tool_calls) and parsed.ok, parsed.ok and schema_valid(parsed.tool_calls, example["tools"]),
                       parsed.ok and calls_match(parsed.tool_calls, gold)))
    return scores


def test_batched_call_accuracy_matches_unbatched_generate(tiny_checkpoint):
    ckpt = load_checkpoint(tiny_checkpoint)
    train_briefly(ckpt.model, ckpt.tokenizer, SAMPLE_TEXTS[:6], steps=20, lr=3e-3)
    examples = [dict(e, thinking=False) for e in make_examples(3)] + make_examples(3)
    with torch.no_grad():
        reference = unbatched_scores(ckpt.model, ckpt.tokenizer, examples, max_new_tokens=24)
    result = call_accuracy(ckpt.model, ckpt.tokenizer, examples, max_new_tokens=24, batch_size=4)
    n = len(examples)
    assert result["call_examples"] == n
    assert result["parse_rate"] == sum(r[0] for r in reference) / n
    assert result["schema_valid_rate"] == sum(r[1] for r in reference) / n
    assert result["exact_call_rate"] == sum(r[2] for r in reference) / n


def test_examples_without_a_first_call_are_skipped(tiny_checkpoint):
    ckpt = load_checkpoint(tiny_checkpoint)
    example = make_examples(1)[0]
    no_call = dict(example, messages=example["messages"][:2] + [{"role": "assistant", "content": "Sure."}])
    result = call_accuracy(ckpt.model, ckpt.tokenizer, [no_call], max_new_tokens=4)
    assert result["call_examples"] == 0 and result["exact_call_rate"] == 0


class Favour(torch.nn.Module):
    """The tiny model, with a large bonus on the tokens of one tool's name (and its closing ``>``)."""

    def __init__(self, model, tokenizer, name: str):
        super().__init__()
        self.model = model
        self.favoured = tokenizer(f"<function={name}>", add_special_tokens=False)["input_ids"]

    def forward(self, input_ids):
        out = self.model(input_ids=input_ids)
        out.logits[..., self.favoured] += 50.0
        return out


def test_tool_choice_picks_the_offered_tool_the_model_prefers(tiny_checkpoint):
    ckpt = load_checkpoint(tiny_checkpoint)
    examples = make_examples(4)  # gold get_weather; get_weather and set_alarm offered
    gold = tool_choice(Favour(ckpt.model, ckpt.tokenizer, "get_weather"), ckpt.tokenizer, examples)
    wrong = tool_choice(Favour(ckpt.model, ckpt.tokenizer, "set_alarm"), ckpt.tokenizer, examples)
    assert gold == {"choice_examples": 4, "tool_choice_rate": 1.0, "chance_rate": 0.5,
                    "tool_choice_rate_other_request": None}  # every gold tool is the same: nothing to swap in
    assert wrong["tool_choice_rate"] == 0.0
    plain = tool_choice(ckpt.model, ckpt.tokenizer, examples + [dict(examples[0], tools=[])])  # no tools: skipped
    assert plain["choice_examples"] == 4 and 0.0 <= plain["tool_choice_rate"] <= 1.0


class Reader(Favour):
    """Favours get_weather when the last request asks about the weather, set_alarm otherwise."""

    def __init__(self, model, tokenizer):
        super().__init__(model, tokenizer, "get_weather")
        self.tokenizer = tokenizer
        self.alarm = tokenizer("<function=set_alarm>", add_special_tokens=False)["input_ids"]

    def forward(self, input_ids):
        out = self.model(input_ids=input_ids)
        for row, ids in enumerate(input_ids):
            text = self.tokenizer.decode(ids)
            asks_weather = "weather in" in text[text.rindex("user"):]  # the last turn's role tag onwards
            out.logits[row, :, self.favoured if asks_weather else self.alarm] += 50.0
        return out


def alarm_examples(n: int) -> list[dict]:
    rows = make_examples(n)
    for i, row in enumerate(rows):
        row["messages"] = [row["messages"][0], {"role": "user", "content": f"alarm at {7 + i}"},
                           {"role": "assistant", "content": "", "tool_calls": [call("set_alarm", hour=7 + i)]}]
    return rows


def test_tool_choice_with_swapped_requests_tells_reading_from_guessing(tiny_checkpoint):
    ckpt = load_checkpoint(tiny_checkpoint)
    examples = make_examples(2) + alarm_examples(2)
    reader = tool_choice(Reader(ckpt.model, ckpt.tokenizer), ckpt.tokenizer, examples)
    assert reader["tool_choice_rate"] == 1.0 and reader["tool_choice_rate_other_request"] == 0.0
    guesser = tool_choice(Favour(ckpt.model, ckpt.tokenizer, "get_weather"), ckpt.tokenizer, examples)
    assert guesser["tool_choice_rate"] == guesser["tool_choice_rate_other_request"] == 0.5


def test_constrained_call_accuracy_hands_each_prompt_its_offered_tools(tiny_checkpoint, monkeypatch):
    from botpsy.train import rollout

    seen = {}
    real = rollout.sample_batch

    def spy(*args, **kwargs):
        seen["tools"] = kwargs.get("tools")
        return real(*args, **kwargs)

    monkeypatch.setattr(rollout, "sample_batch", spy)
    ckpt = load_checkpoint(tiny_checkpoint)
    examples = make_examples(2)
    result = call_accuracy(ckpt.model, ckpt.tokenizer, examples, max_new_tokens=4, constrained=True)
    assert result["call_examples"] == 2 and seen["tools"] == [e["tools"] for e in examples]
    call_accuracy(ckpt.model, ckpt.tokenizer, examples, max_new_tokens=4)
    assert seen["tools"] is None


def test_call_accuracy_records_each_call_and_bins_every_miss(tiny_checkpoint):
    ckpt = load_checkpoint(tiny_checkpoint)
    train_briefly(ckpt.model, ckpt.tokenizer, SAMPLE_TEXTS[:6], steps=20, lr=3e-3)
    examples = [dict(e, thinking=False) for e in make_examples(3)] + make_examples(3)
    records: list[dict] = []
    result = call_accuracy(ckpt.model, ckpt.tokenizer, examples, max_new_tokens=24, batch_size=4, records=records,
                           constrained=True)
    n = result["call_examples"]
    assert len(records) == n == 6
    bins = ("miss_no_call", "miss_wrong_tool", "miss_wrong_arguments")
    assert abs(result["exact_call_rate"] + sum(result[f"{b}_rate"] for b in bins) - 1.0) < 1e-9
    assert sum(r["exact"] for r in records) / n == result["exact_call_rate"]
    for b in bins:
        assert sum(r["miss"] == b.removeprefix("miss_") for r in records) / n == result[f"{b}_rate"]
    first = records[0]
    assert first["constrained"] and first["request"] == examples[0]["messages"][1]["content"]
    gold_fn = first_call_turn(examples[0])[1][0]["function"]
    assert first["gold"] == [{"name": "get_weather", "arguments": gold_fn["arguments"]}]
    assert all((r["miss"] is None) == r["exact"] for r in records)
    assert all(r["schema_valid"] for r in records if r["exact"])


def test_doctests():
    result = doctest.testmod(dev_eval)
    assert result.attempted >= 3 and result.failed == 0
