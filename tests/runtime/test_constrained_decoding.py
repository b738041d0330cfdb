"""Constrained decoding on the real backends: llama.cpp, transformers and batched rollouts keep calls valid."""

from __future__ import annotations

import pytest

from botpsy.chat.constrain import CallConstraint, TokenTable
from botpsy.world.registry import REGISTRY

TOOLS = [REGISTRY[name].spec() for name in ("set_alarm", "list_alarms", "set_brightness")]


def _call_prompt():
    """A short prompt that has just opened a call (the constraint looks only at generated text)."""
    return "<|im_start|>user\nWake me at 7.<|im_end|>\n<|im_start|>assistant\n<tool_call>\n<function"


def test_transformers_backend_obeys_the_constraint(hf_backend):
    from botpsy.runtime.backend import SamplingConfig

    prompt = _call_prompt()
    c = CallConstraint(TOOLS, hf_backend.token_table()).after("<tool_call>\n<function")
    for seed in range(3):
        out = "".join(t.text for t in hf_backend.stream(prompt, SamplingConfig(temperature=1.5, top_k=0, top_p=1.0,
                                                                              seed=seed), 12, constraint=c))
        assert any(out.startswith(f"={t['function']['name']}>") for t in TOOLS), out


def test_llama_backend_obeys_the_constraint(llama_f32):
    from botpsy.runtime.backend import SamplingConfig

    prompt = _call_prompt()
    c = CallConstraint(TOOLS, llama_f32.token_table()).after("<tool_call>\n<function")
    for seed in range(3):
        out = "".join(t.text for t in llama_f32.stream(prompt, SamplingConfig(temperature=1.5, top_k=0, top_p=1.0,
                                                                            seed=seed), 12, constraint=c))
        assert any(out.startswith(f"={t['function']['name']}>") for t in TOOLS), out


def test_backends_without_support_refuse_a_constraint(tiny_tokenizer):
    table = TokenTable.from_tokenizer(tiny_tokenizer)
    from botpsy.runtime.backend import SamplingConfig
    from botpsy.runtime.scripted import ScriptedBackend

    with pytest.raises(ValueError, match="cannot constrain"):
        ScriptedBackend(["hi"]).stream("x", SamplingConfig(), 4, constraint=CallConstraint(TOOLS, table))


def test_batched_rollouts_obey_the_constraint(runtime_checkpoint):
    import torch

    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.rollout import generate_rows, stop_token_ids

    ckpt = load_checkpoint(runtime_checkpoint)
    tok = ckpt.tokenizer
    table = TokenTable.from_tokenizer(tok)
    c = CallConstraint(TOOLS, table).after("<tool_call>\n<function")
    rows = [tok(_call_prompt(), add_special_tokens=False)["input_ids"]] * 4
    outs = generate_rows(ckpt.model.eval(), rows, max_new_tokens=10, temperature=1.5, top_p=1.0,
                         generators=[torch.Generator().manual_seed(i) for i in range(4)], stop_ids=stop_token_ids(tok),
                         pad_id=tok.pad_token_id, constraints=[c] * 4, pieces=table.pieces)
    texts = ["".join(table.pieces[i] for i in ids) for ids, _ in outs]
    assert all(any(t.startswith(f"={tool['function']['name']}>") for tool in TOOLS) for t in texts), texts
    free = generate_rows(ckpt.model.eval(), rows, max_new_tokens=10, temperature=1.5, top_p=1.0,
                         generators=[torch.Generator().manual_seed(i) for i in range(4)], stop_ids=stop_token_ids(tok),
                         pad_id=tok.pad_token_id)
    assert [ids for ids, _ in free] != [ids for ids, _ in outs]  # the mask changed what was sampled


def test_sample_batch_constrains_calls_the_model_opens(runtime_checkpoint, monkeypatch):
    """sample_batch(tools=...) builds one constraint per prompt from its offered tools."""
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train import rollout

    seen = {}
    real = rollout.generate_rows

    def spy(*args, **kwargs):
        seen["constraints"] = kwargs.get("constraints")
        return real(*args, **kwargs)

    monkeypatch.setattr(rollout, "generate_rows", spy)
    ckpt = load_checkpoint(runtime_checkpoint)
    rollout.sample_batch(ckpt.model, ckpt.tokenizer, [_call_prompt(), _call_prompt()], max_new_tokens=2,
                         temperature=0.0, tools=[TOOLS, []])
    first, second = seen["constraints"]
    assert set(first.tools) == {t["function"]["name"] for t in TOOLS} and second is None


def test_a_turn_without_tools_never_opens_a_call(llama_f32, monkeypatch):
    """generate() with no tools hands the backend a NoCallConstraint (unless calls_need_tools is off),
    and near-uniform sampling on the real backend then never produces the call-opening token."""
    from botpsy.chat.constrain import NoCallConstraint
    from botpsy.runtime.backend import SamplingConfig
    from botpsy.runtime.generate import GenerateConfig, generate

    seen = []
    real = llama_f32.stream

    def spy(*args, **kwargs):
        seen.append(kwargs.get("constraint"))
        return real(*args, **kwargs)

    monkeypatch.setattr(llama_f32, "stream", spy)
    opening = {i for i, text in enumerate(llama_f32.token_table().pieces) if "<tool_call" in text}
    assert opening
    prompt = "<|im_start|>user\nWrite a poem.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    for seed in range(4):
        hot = SamplingConfig(temperature=50.0, top_k=0, top_p=1.0, seed=seed)
        result = generate(llama_f32, prompt, GenerateConfig(max_tokens=48, sampling=hot, thinking=False))
        assert not result.parsed.tool_calls and "<tool_call>" not in result.text
        assert isinstance(seen[-1], NoCallConstraint) and not opening & seen[-1].allowed_ids("")
    generate(llama_f32, prompt, GenerateConfig(max_tokens=4, calls_need_tools=False, thinking=False))
    assert seen[-1] is None
    generate(llama_f32, prompt, GenerateConfig(max_tokens=4, constrain_calls=False, thinking=False))
    assert seen[-1] is None  # --no-constrain-calls switches every mask off


def test_a_turn_without_tools_cannot_spell_a_call_out_either(llama_f32):
    """Masking the call token alone leaves its spelling in ordinary pieces open ('<', 'tool',
    '_call', '>'). On the real vocabulary, after every unfinished start of ``<tool_call`` no
    allowed token finishes it, also across a stream boundary, and ordinary text stays allowed."""
    from botpsy.chat.constrain import NoCallConstraint

    table = llama_f32.token_table()
    mark = "<tool_call"
    fresh = NoCallConstraint(table)
    spelling = [i for i, text in enumerate(table.pieces) if text in ("<", "tool", "_call", "_call>")]
    assert len(spelling) >= 3 and set(spelling) <= fresh.allowed_ids("")  # each piece alone is harmless
    for cut in range(1, len(mark)):
        started = "Here is my answer " + mark[:cut]
        for constraint, text in ((fresh, started), (fresh.after(started[:-1]), started[-1:])):
            allowed = constraint.allowed_ids(text)
            finishing = {i for i, piece in enumerate(table.pieces) if mark in mark[:cut] + piece}
            assert finishing and not finishing & allowed, cut
            assert len(allowed) > len(table.pieces) - 2 * len(finishing) - 50  # nothing else is taken away
    assert fresh.allowed_ids("a < b and x <tool") != fresh.allowed_ids("a < b")


def test_a_shared_allowed_set_masks_exactly_its_complement(tiny_tokenizer):
    """The frozen-set path of both backends' masks (only the dropped entries are written), against a
    logit that would otherwise win: the call-opening token masked, every other logit untouched."""
    import numpy as np
    import torch

    from botpsy.runtime.hf_backend import mask_logits
    from botpsy.runtime.llama_backend import mask_outside

    table = TokenTable.from_tokenizer(tiny_tokenizer)
    opening = [i for i, text in enumerate(table.pieces) if "<tool_call" in text]
    assert opening
    logits = np.random.default_rng(0).normal(size=len(table.pieces) + 8).astype(np.float32)  # padded rows too
    logits[opening] = 1e9
    expected = logits.copy()
    expected[opening] = -np.inf
    expected[len(table.pieces):] = -np.inf  # ids past the table are outside any allowed set
    masked_hf = mask_logits(torch.from_numpy(logits.copy()), table.call_free_ids).numpy()
    mask_outside(logits, table.call_free_ids)
    np.testing.assert_array_equal(logits, expected)
    np.testing.assert_array_equal(masked_hf, expected)
    assert int(np.argmax(logits)) not in opening
