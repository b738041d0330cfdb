"""The prefix cache: LRU under a byte cap, stable keys, the prefix every rendered turn shares, and
the disk tier (restart, damage, eviction, unwritable folders).

The llama.cpp restore-equals-cold check on a hybrid GGUF is in ``test_backend_llama.py``.
"""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from botpsy.chat.template import render
from botpsy.runtime.prefix_cache import (
    PREFIX_STATES_ENV,
    STATE_MAGIC,
    DiskPrefixStore,
    PrefixCache,
    cacheable_prefix,
    prefix_key,
    prefix_state_dir,
)

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


# -- the disk tier -------------------------------------------------------------------------------


def test_a_new_cache_on_the_same_folder_reads_the_state_back(tmp_path):
    first = PrefixCache(max_bytes=100, disk=DiskPrefixStore(tmp_path, "model-a"))
    first.put([1, 2, 3], b"state")
    restarted = PrefixCache(max_bytes=100, disk=DiskPrefixStore(tmp_path, "model-a"))
    assert [1, 2, 3] not in restarted  # not in memory yet
    assert restarted.get([1, 2, 3]) == b"state" and [1, 2, 3] in restarted
    assert restarted.get([1, 2, 3]) == b"state"  # the second time from memory
    stats = restarted.stats()
    assert (stats.hits, stats.disk_hits, stats.misses, stats.disk_entries, stats.disk_errors) == (2, 1, 0, 1, 0)
    other_model = PrefixCache(max_bytes=100, disk=DiskPrefixStore(tmp_path, "model-b"))
    assert other_model.get([1, 2, 3]) is None and other_model.stats().misses == 1


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "foreign file", "empty state"])
def test_a_damaged_file_is_deleted_and_never_returned(tmp_path, damage):
    store = DiskPrefixStore(tmp_path, "m")
    assert store.write([7], b"0123456789")
    path = next((tmp_path / "m").glob("*.state"))
    data = path.read_bytes()
    if damage == "flipped byte":
        data = data[:-1] + bytes([data[-1] ^ 1])
    elif damage == "truncated":
        data = data[:-3]
    elif damage == "foreign file":
        data = b"GGUF" + data[4:]
    else:
        data = STATE_MAGIC + hashlib.blake2b(b"", digest_size=16).digest()
    path.write_bytes(data)
    cache = PrefixCache(max_bytes=100, disk=store)
    assert cache.get([7]) is None and not path.exists()
    assert cache.stats().disk_errors == 1
    cache.put([7], b"again")  # the slot works again
    assert PrefixCache(disk=DiskPrefixStore(tmp_path, "m")).get([7]) == b"again"


def test_files_past_the_cap_go_oldest_use_first(tmp_path):
    state = b"x" * 100
    size = len(STATE_MAGIC) + 16 + len(state)
    store = DiskPrefixStore(tmp_path, "m", max_bytes=2 * size)
    now = time.time()
    for ids, age in (([1], 300), ([2], 200)):
        store.write(ids, state)
        path = next(p for p in (tmp_path / "m").glob("*.state") if p.stat().st_mtime > now - 100)
        os.utime(path, (now - age, now - age))
    assert store.read([1]) == state  # [1] is now the most recently used
    store.write([3], state)
    assert store.usage() == (2, 2 * size)
    assert store.read([2]) is None and store.read([1]) == state and store.read([3]) == state
    assert not store.write([4], b"y" * (2 * size))  # larger than the whole cap: not written
    assert store.usage()[0] == 2


def test_an_unwritable_folder_costs_only_the_speed_up(tmp_path):
    (tmp_path / "m").write_text("a file where the folder should be")
    cache = PrefixCache(max_bytes=100, disk=DiskPrefixStore(tmp_path, "m"))
    assert cache.put([1], b"state") and cache.get([1]) == b"state"  # memory still works
    assert cache.stats().disk_errors == 1 and not list(tmp_path.glob("m/*"))


def test_clear_keeps_the_disk_unless_asked_and_discard_removes_both(tmp_path):
    cache = PrefixCache(max_bytes=100, disk=DiskPrefixStore(tmp_path, "m"))
    cache.put([1], b"a")
    cache.put([2], b"b")
    cache.clear()
    assert len(cache) == 0 and cache.stats().disk_entries == 2
    cache.discard([1])
    assert cache.get([1]) is None and cache.get([2]) == b"b"
    cache.clear(disk=True)
    assert cache.stats().disk_entries == 0 and len(cache) == 0


def test_namespaces_and_folder_settings(tmp_path, monkeypatch):
    for bad in ("", "a/b", ".hidden"):
        with pytest.raises(ValueError, match="plain folder name"):
            DiskPrefixStore(tmp_path, bad)
    monkeypatch.setenv(PREFIX_STATES_ENV, str(tmp_path / "states"))
    assert prefix_state_dir("auto") == str(tmp_path / "states")
    monkeypatch.delenv(PREFIX_STATES_ENV)
    assert prefix_state_dir("auto").endswith(os.path.join(".cache", "botpsy", "prefix-states"))
    assert prefix_state_dir("off") == prefix_state_dir("") == ""


def test_the_cap_covers_every_model_so_states_of_a_rebuilt_file_age_out(tmp_path):
    state = b"x" * 100
    size = len(STATE_MAGIC) + 16 + len(state)
    old_build, new_build = (DiskPrefixStore(tmp_path, name, max_bytes=2 * size) for name in ("m-old", "m-new"))
    old_build.write([1], state)
    past = time.time() - 100
    os.utime(next((tmp_path / "m-old").glob("*.state")), (past, past))
    new_build.write([1], state)
    new_build.write([2], state)  # three files over a two-file cap: the old build's goes
    assert old_build.usage() == (0, 0) and new_build.usage() == (2, 2 * size)


def test_a_write_cleans_up_what_a_killed_writer_left(tmp_path):
    store = DiskPrefixStore(tmp_path, "m")
    (tmp_path / "m").mkdir()
    left, fresh = (tmp_path / "m" / f".{c * 32}.state.99.1f2e3d4c.tmp" for c in "ab")  # as `write` names them
    left.write_bytes(b"half a state")
    fresh.write_bytes(b"being written now")
    an_hour_ago = time.time() - 3600
    os.utime(left, (an_hour_ago, an_hour_ago))
    store.write([1], b"state")
    assert not left.exists() and fresh.exists() and store.read([1]) == b"state"


def test_files_that_are_not_ours_are_never_evicted_or_cleared(tmp_path):
    """``--prefix-cache-dir ~`` must not cost the user a file: only botpsy's names are touched."""
    theirs = [tmp_path / "m" / "game.state", tmp_path / "other" / "notes.state", tmp_path / "m" / ".editor.tmp"]
    for path in theirs:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"z" * 500)
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    store = DiskPrefixStore(tmp_path, "m", max_bytes=200)
    assert store.write([1], b"x" * 100) and store.write([2], b"y" * 100)
    store.clear()
    assert all(path.read_bytes() == b"z" * 500 for path in theirs) and store.usage() == (0, 0)


def test_a_state_served_from_memory_keeps_its_file_young_and_rewrites_it_if_evicted(tmp_path):
    """A long-running server hits its state in memory; its file must not be the first evicted, and
    a file other models' writes evicted meanwhile comes back, so the next restart still reads it."""
    store = DiskPrefixStore(tmp_path, "server")
    cache = PrefixCache(max_bytes=1000, disk=store)
    cache.put([1], b"tools")
    path = next((tmp_path / "server").glob("*.state"))
    an_hour_ago = time.time() - 3600
    os.utime(path, (an_hour_ago, an_hour_ago))
    assert cache.get([1]) == b"tools"  # a memory hit
    assert path.stat().st_mtime > an_hour_ago + 3000
    os.utime(path, (an_hour_ago, an_hour_ago))
    cache.get([1])  # within a minute of the last refresh: no file access
    assert path.stat().st_mtime == pytest.approx(an_hour_ago)
    store._touched.clear()
    path.unlink()  # evicted by another model's states
    assert cache.get([1]) == b"tools" and PrefixCache(disk=DiskPrefixStore(tmp_path, "server")).get([1]) == b"tools"


def test_stats_count_this_models_files_and_the_whole_folder(tmp_path):
    mine, other = DiskPrefixStore(tmp_path, "mine"), DiskPrefixStore(tmp_path, "other")
    other.write([9], b"x" * 100)
    cache = PrefixCache(disk=mine)
    cache.put([1], b"y" * 50)
    size = len(STATE_MAGIC) + 16
    stats = cache.stats()
    assert (stats.disk_entries, stats.disk_bytes, stats.disk_folder_bytes) == (1, size + 50, 2 * size + 150)
