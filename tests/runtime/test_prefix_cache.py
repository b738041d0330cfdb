"""The prefix cache: LRU under a byte cap, stable keys, and the prefix every rendered turn shares.

The llama.cpp restore-equals-cold check on a hybrid GGUF is in ``test_backend_llama.py``.
"""

from __future__ import annotations

from botpsy.chat.template import render
from botpsy.runtime.prefix_cache import PrefixCache, cacheable_prefix, prefix_key

TOOLS = [{"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def test_get_put_and_stats():
    cache = PrefixCache(max_bytes=100)
    assert cache.get([1, 2, 3]) is None
    assert cache.put([1, 2, 3], b"x" * 40)
    assert cache.get([1, 2, 3]) == b"x" * 40 and [1, 2, 3] in cache and [1, 2] not in cache
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries, stats.bytes) == (1, 1, 1, 40)


def test_least_recently_used_is_evicted_to_stay_under_the_cap():
    cache = PrefixCache(max_bytes=100)
    cache.put([1], b"a" * 40)
    cache.put([2], b"b" * 40)
    cache.get([1])  # [2] is now the least recently used
    cache.put([3], b"c" * 40)
    assert [1] in cache and [3] in cache and [2] not in cache
    assert cache.stats().bytes == 80 and cache.stats().evictions == 1


def test_replacing_an_entry_and_oversized_states():
    cache = PrefixCache(max_bytes=100)
    cache.put([1], b"a" * 60)
    cache.put([1], b"b" * 70)  # same key: replaced, not counted twice
    assert cache.stats().bytes == 70 and len(cache) == 1
    assert not cache.put([2], b"c" * 101) and [2] not in cache and [1] in cache


def test_keys_depend_on_every_id_and_their_order():
    assert prefix_key([1, 2, 3]) == prefix_key((1, 2, 3))
    assert len({prefix_key([1, 2, 3]), prefix_key([3, 2, 1]), prefix_key([1, 2]), prefix_key([1, 2, 3, 0])}) == 4


def test_cacheable_prefix_is_the_start_of_every_turn():
    system = {"role": "system", "content": "Be brief."}
    turns = [[system, {"role": "user", "content": "hi"}],
             [system, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"},
              {"role": "user", "content": "Set an alarm."}]]
    for tools in (TOOLS, None):
        prefixes = {cacheable_prefix(messages, tools) for messages in turns}
        assert len(prefixes) == 1
        prefix = prefixes.pop()
        assert all(render(messages, tools).startswith(prefix) for messages in turns)
        assert prefix.endswith("<|im_end|>\n") and ("<tools>" in prefix) == bool(tools)
    assert cacheable_prefix([{"role": "user", "content": "hi"}]) == ""
    assert cacheable_prefix([{"role": "user", "content": "hi"}], TOOLS).startswith("<|im_start|>system\n# Tools")
