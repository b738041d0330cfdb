"""The llama.cpp backend on a tiny hybrid GGUF: streaming, determinism, parity with transformers, state reuse."""

from __future__ import annotations

import threading

import pytest

from botpsy.chat.template import generation_prompt
from botpsy.runtime.backend import BackendError, BackendOptions, SamplingConfig, Utf8Decoder
from botpsy.runtime.generate import GenerateConfig, chat_prompt, generate

pytestmark = pytest.mark.slow

GREEDY = SamplingConfig(temperature=0)
SAMPLED = SamplingConfig(temperature=1.0, top_k=0, top_p=1.0, seed=11)  # every logit matters to the draw
PROMPTS = ["<|im_start|>user\nSet an alarm for 7:30.<|im_end|>\n" + generation_prompt(True),
           "Send a message to Alice", "The user wants"]
TOOLS = [{"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm for the user.",
                                           "parameters": {"type": "object", "properties": {
                                               "hour": {"type": "integer"}, "minute": {"type": "integer"}}}}}]


def ids_of(stream) -> list[int]:
    return [token.id for token in stream]


def test_stream_is_incremental_and_continues_from_live_state(llama_f32):
    assert not llama_f32.truncatable  # the hybrid model: its recurrent state cannot be cut back
    ids = llama_f32.tokenize(PROMPTS[0])
    llama_f32.reset()
    full = ids_of(llama_f32.stream(ids, GREEDY, 12))
    llama_f32.reset()
    stream = llama_f32.stream(ids, GREEDY, 12)
    head = [next(stream).id for _ in range(3)]
    stream.close()  # stops decoding: nothing after the third token is computed
    assert stream.info.prompt_tokens == len(ids) and stream.info.prefill_ms > 0 and stream.info.finish_reason is None
    rest = llama_f32.stream(ids + head, GREEDY, 9)
    assert head + ids_of(rest) == full
    assert rest.info.reused_tokens == len(ids) + 2  # the third token was sampled but never evaluated
    assert rest.info.finish_reason == "length" and not rest.info.cache_hit


def test_greedy_is_deterministic_and_stops_at_end_of_turn(llama_f32):
    ids = llama_f32.tokenize(PROMPTS[1])
    runs = []
    for _ in range(2):
        llama_f32.reset()
        stream = llama_f32.stream(ids, GREEDY, 40)
        runs.append([(t.id, t.text) for t in stream])
    assert runs[0] == runs[1]
    assert stream.info.finish_reason == "stop" and runs[0][-1][1] in ("<|im_end|>", "<|endoftext|>")
    assert "".join(text for _, text in runs[0]) == llama_f32.detokenize([i for i, _ in runs[0]])


def test_greedy_tokens_match_transformers_until_a_near_tie(llama_f32, hf_backend):
    """f32 GGUF vs transformers: equal greedy ids wherever the top two logits differ by more than 1e-3."""
    import torch

    compared = 0
    for prompt in PROMPTS:
        ids = hf_backend.tokenize(prompt)
        assert llama_f32.tokenize(prompt) == ids
        llama_f32.reset()
        ours, theirs = ids_of(llama_f32.stream(ids, GREEDY, 8)), ids_of(hf_backend.stream(ids, GREEDY, 8))
        with torch.no_grad():
            logits = hf_backend.model(torch.tensor([ids + theirs])).logits[0, len(ids) - 1:]
        top2 = logits.topk(2).values
        decisive = next((i for i, (a, b) in enumerate(top2.tolist()) if a - b < 1e-3), len(theirs))
        assert ours[:decisive] == theirs[:decisive], prompt
        compared += decisive
    assert compared >= 12, "the trained model should give decisive greedy tokens"


def test_prefix_cache_restore_equals_a_cold_run(llama_f32):
    """Whole-state save/restore at the prefix boundary on the hybrid model: identical tokens, greedy and sampled."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Set an alarm for 7:30."}]
    prompt, prefix = chat_prompt(messages, TOOLS)
    prefix_ids = llama_f32.tokenize(prefix)
    ids = prefix_ids + llama_f32.tokenize(prompt[len(prefix):])
    for sampling in (GREEDY, SAMPLED):
        llama_f32.reset(clear_prefix_cache=True)
        cold = llama_f32.stream(ids, sampling, 24)
        cold_ids = ids_of(cold)
        llama_f32.reset()
        first = llama_f32.stream(ids, sampling, 24, prefix_tokens=len(prefix_ids))
        first_ids = ids_of(first)
        llama_f32.reset()  # drop the live context so the saved prefix state has to be restored
        cached = llama_f32.stream(ids, sampling, 24, prefix_tokens=len(prefix_ids))
        assert ids_of(cached) == first_ids == cold_ids
        assert (cold.info.cache_hit, first.info.cache_hit, cached.info.cache_hit) == (False, False, True)
        assert cached.info.reused_tokens == len(prefix_ids)
    stats = llama_f32.prefix_cache.stats()
    assert stats.entries == 1 and stats.bytes > 0


def test_generate_reports_a_cache_hit_on_the_second_turn(llama_f32):
    llama_f32.reset(clear_prefix_cache=True)
    config = GenerateConfig(max_tokens=16, sampling=GREEDY, thinking_budget=4)
    results = []
    for request in ("Set an alarm for 7:30.", "Send a message to Alice."):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": request}]
        prompt, prefix = chat_prompt(messages, TOOLS)
        results.append(generate(llama_f32, prompt, config, tools=TOOLS, cache_prefix=prefix))
    first, second = results
    assert not first.cache_hit and second.cache_hit
    for result in results:
        assert result.finish_reason in ("stop", "length") and result.completion_tokens >= 1
        assert result.ttft_ms > 0 and result.prompt_tokens > len(llama_f32.tokenize(prefix))


def test_split_utf8_characters_arrive_whole(llama_f32):
    text = "Café 🙂 東京, naïve"  # not in the tokenizer's training texts: byte-level pieces
    pieces = [llama_f32.piece(i) for i in llama_f32.tokenize(text)]
    assert any(_invalid_utf8(piece) for piece in pieces), "the tiny vocabulary splits some characters into bytes"
    decoder = Utf8Decoder()
    assert "".join(decoder.feed(piece) for piece in pieces) == text


def _invalid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def test_prompt_longer_than_the_context_is_refused(runtime_ggufs):
    from botpsy.runtime.llama_backend import LlamaBackend

    with LlamaBackend(runtime_ggufs["q8_0"], BackendOptions(threads=1, n_ctx=256, n_batch=64)) as backend:
        with pytest.raises(BackendError, match="context holds 256"):
            list(backend.stream("word " * 300, GREEDY, 4))
        long_prompt = backend.tokenize("Set an alarm for 7:30 tomorrow and call it gym. " * 12)
        assert 64 < len(long_prompt) < 256  # prefilled in several batches
        stream = backend.stream(long_prompt, SamplingConfig(temperature=1.0, seed=1), 1000)
        assert 0 < len(ids_of(stream)) <= 256 - len(long_prompt)  # max_tokens is clamped to the space left



def test_extra_buffer_types_follow_the_build_and_the_override(runtime_ggufs, monkeypatch):
    """Extra CPU buffer types (AMX, repacking) are off where the build has AMX, and the override wins."""
    import llama_cpp

    from botpsy.runtime.llama_backend import extra_buffer_types_enabled, new_llama, open_llama

    default = llama_cpp.llama_cpp.llama_model_default_params
    has_amx = "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    monkeypatch.delenv("BOTPSY_LLAMA_EXTRA_BUFTS", raising=False)
    assert extra_buffer_types_enabled() is not has_amx
    for setting, expected in (("0", False), ("1", True)):
        monkeypatch.setenv("BOTPSY_LLAMA_EXTRA_BUFTS", setting)
        llm = new_llama(model_path=str(runtime_ggufs["q8_0"]), n_ctx=64, n_threads=1, verbose=False)
        assert llm.model_params.use_extra_bufts is expected
        llm.close()
    assert llama_cpp.llama_cpp.llama_model_default_params is default  # swapped back after the load
    monkeypatch.setenv("BOTPSY_LLAMA_EXTRA_BUFTS", "0")
    llm = open_llama(runtime_ggufs["f32"], n_ctx=64, threads=1)
    ids = llm.tokenize(b"Set an alarm", add_bos=False)
    llm.eval(ids)  # a decode through the plain Llama API works with them off
    assert llm.n_tokens == len(ids)
    llm.close()


def test_a_restarted_backend_restores_the_prefix_from_disk(runtime_ggufs, tmp_path):
    """The disk tier on the real part: a second backend process-alike on the same file starts warm
    with the same tokens as a cold run; another context size is another namespace; a state that
    llama.cpp will not take back (here: a valid file around half a state) is dropped and prefilled."""
    from botpsy.runtime.llama_backend import LlamaBackend
    from botpsy.runtime.prefix_cache import DiskPrefixStore

    options = BackendOptions(threads=1, n_ctx=1024, prefix_cache_mb=64, prefix_cache_dir=str(tmp_path))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Set an alarm for 7:30."}]
    with LlamaBackend(runtime_ggufs["q8_0"], options) as first:
        prompt, prefix = chat_prompt(messages, TOOLS)
        prefix_ids = first.tokenize(prefix)
        ids = prefix_ids + first.tokenize(prompt[len(prefix):])
        cold = ids_of(first.stream(ids, GREEDY, 16))
        saved = first.stream(ids, GREEDY, 16, prefix_tokens=len(prefix_ids))
        assert ids_of(saved) == cold and not saved.info.cache_hit
        namespace = first.state_namespace()
    assert [p.name for p in tmp_path.iterdir()] == [namespace]
    with LlamaBackend(runtime_ggufs["q8_0"], options) as restarted:
        assert restarted.state_namespace() == namespace
        warm = restarted.stream(ids, GREEDY, 16, prefix_tokens=len(prefix_ids))
        assert ids_of(warm) == cold and warm.info.cache_hit and warm.info.reused_tokens == len(prefix_ids)
        stats = restarted.prefix_cache.stats()
        assert (stats.disk_hits, stats.disk_entries, stats.disk_errors) == (1, 1, 0)
        state = restarted.prefix_cache.get(prefix_ids)
    store = DiskPrefixStore(tmp_path, namespace)
    store.write(prefix_ids, state[: len(state) // 2])  # checksummed, but not a whole state
    with LlamaBackend(runtime_ggufs["q8_0"], options) as damaged:
        stream = damaged.stream(ids, GREEDY, 16, prefix_tokens=len(prefix_ids))
        assert ids_of(stream) == cold and not stream.info.cache_hit
        stats = damaged.prefix_cache.stats()
        assert (stats.hits, stats.misses, stats.refused) == (0, 1, 1)  # a refused state is no hit
    assert DiskPrefixStore(tmp_path, namespace).read(prefix_ids) == state  # replaced by a good state
    smaller = BackendOptions(threads=1, n_ctx=512, prefix_cache_mb=64, prefix_cache_dir=str(tmp_path))
    with LlamaBackend(runtime_ggufs["q8_0"], smaller) as other:
        assert other.state_namespace() != namespace


def test_prepare_prefix_readies_the_tools_before_the_first_turn(runtime_ggufs, tmp_path):
    """``prepare_prefix`` on the real part: prefilled (and saved) in a fresh process, found in memory
    the second time, read back from disk after a restart; the turns after it give a cold run's tokens."""
    from botpsy.runtime.llama_backend import LlamaBackend

    options = BackendOptions(threads=1, n_ctx=1024, prefix_cache_mb=64, prefix_cache_dir=str(tmp_path))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Send a message to Alice."}]
    prompt, prefix = chat_prompt(messages, TOOLS)
    with LlamaBackend(runtime_ggufs["q8_0"], options) as backend:
        prefix_ids = backend.tokenize(prefix)
        ids = prefix_ids + backend.tokenize(prompt[len(prefix):])
        cold = ids_of(backend.stream(ids, GREEDY, 16))
        backend.reset(clear_prefix_cache=True)
        ready = backend.prepare_prefix(prefix)
        assert (ready["source"], ready["tokens"]) == ("prefilled", len(prefix_ids))
        first = backend.stream(ids, GREEDY, 16, prefix_tokens=len(prefix_ids))
        assert ids_of(first) == cold and first.info.reused_tokens == len(prefix_ids)  # continued in place
        assert backend.prepare_prefix(prefix)["source"] == "memory"
        again = backend.stream(ids, GREEDY, 16, prefix_tokens=len(prefix_ids))
        assert ids_of(again) == cold and again.info.reused_tokens == len(prefix_ids)  # the restored state, live
    with LlamaBackend(runtime_ggufs["q8_0"], options) as restarted:
        assert restarted.prepare_prefix(prefix)["source"] == "disk"
        turn = restarted.stream(ids, GREEDY, 16, prefix_tokens=len(prefix_ids))
        assert ids_of(turn) == cold and turn.info.reused_tokens == len(prefix_ids)
        stopped = threading.Event()
        stopped.set()
        other_prefix = chat_prompt([{"role": "system", "content": "Be very brief."}, messages[1]], TOOLS)[1]
        assert restarted.prepare_prefix(other_prefix, stopped)["source"] == "cancelled"
        assert restarted.tokenize(other_prefix) not in restarted.prefix_cache  # nothing half-made was saved
    memory_only = BackendOptions(threads=1, n_ctx=1024, prefix_cache_mb=0)
    with LlamaBackend(runtime_ggufs["q8_0"], memory_only) as plain:
        assert plain.prepare_prefix(prefix)["source"] == "none"
