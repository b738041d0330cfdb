"""llama.cpp on the student's attention-only family: the KV cache is cut back to the longest shared prefix."""

from __future__ import annotations

import pytest

from botpsy.runtime.backend import BackendOptions, SamplingConfig

pytestmark = pytest.mark.slow

GREEDY = SamplingConfig(temperature=0)


def test_an_attention_only_model_reuses_the_longest_shared_prefix(qwen2_gguf, tiny_tokenizer):
    from botpsy.runtime.llama_backend import LlamaBackend

    backend = LlamaBackend(qwen2_gguf[0], BackendOptions(threads=1, n_ctx=2048, prefix_cache_mb=0))
    try:
        assert backend.truncatable
        first = backend.tokenize("<|im_start|>user\nSet an alarm for seven tomorrow and tell Ana.<|im_end|>\n<|im_start|>assistant\n")
        written = [t.id for t in backend.stream(first, GREEDY, 6)]
        # The next turn re-renders the assistant's text differently: it shares only the user turn.
        shared = len(backend.tokenize("<|im_start|>user\nSet an alarm for seven tomorrow and tell Ana.<|im_end|>\n"))
        second = first[:shared] + backend.tokenize("<|im_start|>assistant\nDone.<|im_end|>\n<|im_start|>user\nthanks<|im_end|>\n")
        assert second[:len(first)] != first + written[: len(second) - len(first)]
        warm = backend.stream(second, GREEDY, 8)
        warm_ids = [t.id for t in warm]
        assert warm.info.reused_tokens >= shared and not warm.info.cache_hit
        backend.reset()
        cold = backend.stream(second, GREEDY, 8)
        assert [t.id for t in cold] == warm_ids and cold.info.reused_tokens == 0
        # A prompt that is a strict prefix of what was evaluated still evaluates its last token.
        again = backend.stream(second[:-3], GREEDY, 2)
        assert len([t for t in again]) >= 1 and again.info.reused_tokens == len(second) - 4
    finally:
        backend.close()

