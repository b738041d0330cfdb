"""The tool-prefix cache: saved model states at the end of a prompt prefix, LRU under a memory cap.

On every turn of an agent the prompt opens with the same system turn (the tools block and
the system prompt, often 1-3k tokens); on a phone re-reading it dominates the time to the
first token. A backend that supports it saves its whole evaluated state right after that
prefix and, when a later prompt starts with the same token ids, restores the state and
evaluates only the rest.

The whole context state is saved (not a truncated KV cache) because Qwen3.5's Gated DeltaNet
layers keep a recurrent state that cannot be rolled back to an earlier position: the only
way back to the prefix boundary is a copy taken there. Entries are keyed by a hash of the
prefix ids, so one entry is kept per tool set (and per system prompt).

Example::

    cache = PrefixCache(max_bytes=256 << 20)
    state = cache.get(prefix_ids)            # None on a miss
    cache.put(prefix_ids, saved_state_bytes)
    prefix = cacheable_prefix(messages, tools)   # the text whose state is worth keeping
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from botpsy.chat.template import IM_END, IM_START, content_text, render_tools_system


def prefix_key(ids: Sequence[int]) -> str:
    """A stable hash of token ids (the cache key)."""
    return hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class PrefixCache:
    """LRU map: prefix token ids -> saved state bytes, holding at most ``max_bytes`` in all."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = 0

    def get(self, ids: Sequence[int]) -> bytes | None:
        key = prefix_key(ids)
        state = self._entries.get(key)
        if state is None:
            self._misses += 1
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return state

    def put(self, ids: Sequence[int], state: bytes) -> bool:
        """Store ``state``; evict the least recently used entries to make room. False if it cannot fit."""
        if len(state) > self.max_bytes:
            return False
        key = prefix_key(ids)
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old)
        while self._entries and self._bytes + len(state) > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= len(evicted)
            self._evictions += 1
        self._entries[key] = state
        self._bytes += len(state)
        return True

    def __contains__(self, ids: Sequence[int]) -> bool:
        return prefix_key(ids) in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def stats(self) -> CacheStats:
        return CacheStats(self._hits, self._misses, self._evictions, len(self._entries), self._bytes)


def cacheable_prefix(messages: list[dict], tools: list[dict] | None = None) -> str:
    """The rendered system turn (tools block + system prompt): the part every turn shares.

    ``render(messages, tools)`` always starts with exactly this text, so an agent passes it
    as ``cache_prefix`` to ``generate``. Empty when there is neither a tool nor a system prompt.

    >>> cacheable_prefix([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    '<|im_start|>system\\nBe brief.<|im_end|>\\n'
    """
    first_is_system = bool(messages) and messages[0].get("role") == "system"
    system = content_text(messages[0].get("content")).strip() if first_is_system else ""
    if tools:
        return render_tools_system(list(tools), system)
    if first_is_system:
        return f"{IM_START}system\n{system}{IM_END}\n"
    return ""
