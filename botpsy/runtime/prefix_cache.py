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

A ``DiskPrefixStore`` behind the memory cache keeps each saved state in a file as well, so
a new process on the same model file (``botpsy chat`` started again, a restarted server)
restores the tools prefix from disk instead of prefilling it: on a phone the first turn
after a restart then costs the request's tokens, not the whole tools block. Files live in
one folder per model identity (``LlamaBackend.state_namespace``: the llama.cpp build, the
model and adapter files, the context size), carry a checksum, are written atomically and
are evicted oldest-first under a byte cap. A damaged or foreign file is deleted and counted
(``CacheStats.disk_errors``), never restored, and a disk that cannot be written only costs
the speed-up: the cache is an optimisation, so its failures fall back to prefilling.

Example::

    cache = PrefixCache(max_bytes=256 << 20, disk=DiskPrefixStore("~/.cache/botpsy/prefix-states", namespace))
    state = cache.get(prefix_ids)            # None on a miss (memory first, then disk)
    cache.put(prefix_ids, saved_state_bytes)  # kept in memory and written to disk
    prefix = cacheable_prefix(messages, tools)   # the text whose state is worth keeping
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from botpsy.chat.template import IM_END, IM_START, content_text, render_tools_system


def prefix_key(ids: Sequence[int]) -> str:
    """A stable hash of token ids (the cache key)."""
    return hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).hexdigest()


@dataclass
class CacheStats:
    hits: int = 0  # memory and disk hits together
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0
    disk_hits: int = 0  # states read back from disk (a new process, or evicted from memory)
    disk_errors: int = 0  # damaged files deleted, writes that failed
    refused: int = 0  # states the backend would not take back (counted as misses, not hits)
    disk_entries: int = 0  # this model's files
    disk_bytes: int = 0
    disk_folder_bytes: int = 0  # every model's files in the folder: what the disk cap counts

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


STATE_MAGIC = b"botpsy-prefix-state\x01"  # the file format; a new version is a new magic
_DIGEST = 16
# Only files named like these are ever listed, evicted or cleaned up, so a folder shared with
# other programs (``--prefix-cache-dir ~``) loses nothing of theirs.
_STATE_NAME = re.compile(r"[0-9a-f]{32}\.state")
_TMP_NAME = re.compile(r"\.[0-9a-f]{32}\.state\.[0-9a-f.]+\.tmp")


class DiskPrefixStore:
    """Saved prefix states as files ``folder/namespace/<key>.state``; past ``max_bytes`` in the whole
    folder (every namespace), the least recently used are deleted.

    A file is the magic, a blake2b digest of the state and the state. ``namespace`` names the
    model the states belong to (a state restored into another model or context size would be
    wrong, or rejected); callers build it from everything the state depends on.
    """

    def __init__(self, folder: str | Path, namespace: str, max_bytes: int = 1 << 30) -> None:
        if not namespace or "/" in namespace or namespace.startswith("."):
            raise ValueError(f"a prefix-state namespace must be a plain folder name, got {namespace!r}")
        self.folder = Path(folder).expanduser() / namespace
        self.max_bytes = max_bytes
        self.hits = self.errors = 0
        self._touched: dict[str, float] = {}  # key -> time.monotonic() of the last refresh by ``touch``

    def _path(self, ids: Sequence[int]) -> Path:
        return self.folder / f"{prefix_key(ids)}.state"

    def read(self, ids: Sequence[int]) -> bytes | None:
        """The state saved for ``ids``, or None (absent, unreadable or damaged: a damaged file is deleted)."""
        path = self._path(ids)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            self.errors += 1
            return None
        head = len(STATE_MAGIC) + _DIGEST
        state = data[head:]
        if not data.startswith(STATE_MAGIC) or data[len(STATE_MAGIC):head] != _digest(state) or not state:
            self.errors += 1
            self.discard(ids)
            return None
        try:
            os.utime(path)  # the eviction order is the order of last use
        except OSError:
            pass
        self.hits += 1
        return state

    def write(self, ids: Sequence[int], state: bytes) -> bool:
        """Save ``state`` atomically (a reader never sees half a file); False if it cannot be written."""
        size = len(STATE_MAGIC) + _DIGEST + len(state)
        if size > self.max_bytes:
            return False
        path = self._path(ids)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")  # one per writer
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as handle:
                for part in (STATE_MAGIC, _digest(state), state):  # no concatenated copy of a large state
                    handle.write(part)
            os.replace(tmp, path)
        except OSError:
            self.errors += 1  # one failure, whatever the clean-up below finds
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            return False
        self._evict(keep=path)
        return True

    def touch(self, ids: Sequence[int], state: bytes, every_s: float = 60.0) -> None:
        """Mark the file of ``ids`` as used now (a state served from memory is still in use), at most
        once every ``every_s`` seconds; a file gone meanwhile (evicted by other models' writes
        while a server kept the state in memory) is written again from ``state``."""
        key = prefix_key(ids)
        now = time.monotonic()
        if now - self._touched.get(key, -every_s) < every_s:
            return
        self._touched[key] = now
        try:
            os.utime(self._path(ids))
        except FileNotFoundError:
            self.write(ids, state)
        except OSError:
            pass

    def discard(self, ids: Sequence[int]) -> None:
        self._remove(self._path(ids))

    def clear(self) -> None:
        for path, _, _ in self._files():
            self._remove(path)

    def _remove(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            self.errors += 1

    def _files(self, every_model: bool = False) -> list[tuple[Path, int, int]]:
        """(path, size, mtime_ns) of this model's state files (``every_model``: all namespaces under
        the folder), oldest use first."""
        root = self.folder.parent if every_model else self.folder
        files = []
        for path in root.glob("*/*.state" if every_model else "*.state") if root.is_dir() else ():
            if not _STATE_NAME.fullmatch(path.name):
                continue
            try:
                stat = path.stat()
            except OSError:  # removed by another process meanwhile
                continue
            files.append((path, stat.st_size, stat.st_mtime_ns))
        return sorted(files, key=lambda item: item[2])

    def _evict(self, keep: Path) -> None:
        """Delete the least recently used files, of any model, until the folder is under the cap (the
        states of a rebuilt or deleted model file are never read again, so they age out)."""
        stale = time.time() - 600  # a temporary file this old was left by a process killed mid-write
        for tmp in self.folder.parent.glob("*/.*.tmp"):
            try:
                if _TMP_NAME.fullmatch(tmp.name) and tmp.stat().st_mtime < stale:
                    tmp.unlink()
            except OSError:
                pass
        files = self._files(every_model=True)
        total = sum(size for _, size, _ in files)
        for path, size, _ in files:
            if total <= self.max_bytes:
                break
            if path != keep:
                self._remove(path)
                total -= size

    def usage(self, every_model: bool = False) -> tuple[int, int]:
        """(files, bytes) on disk now: this model's, or (``every_model``) the whole folder's, which
        the cap counts."""
        files = self._files(every_model)
        return len(files), sum(size for _, size, _ in files)


PREFIX_STATES_ENV = "BOTPSY_PREFIX_STATES"
PREFIX_DIR_HELP = ("Keep saved prefix states (the tools block, evaluated) on disk here too, so a restart skips "
                   "prefilling them ('auto': $BOTPSY_PREFIX_STATES or ~/.cache/botpsy/prefix-states; 'off': memory only).")


def prefix_state_dir(setting: str) -> str:
    """The folder a ``--prefix-cache-dir`` setting names; empty for memory only.

    >>> prefix_state_dir("off"), prefix_state_dir("/tmp/states")
    ('', '/tmp/states')
    """
    if setting == "auto":
        setting = os.environ.get(PREFIX_STATES_ENV) or str(Path.home() / ".cache" / "botpsy" / "prefix-states")
    return "" if setting in ("", "off") else setting


def _digest(state: bytes) -> bytes:
    return hashlib.blake2b(state, digest_size=_DIGEST).digest()


class PrefixCache:
    """LRU map: prefix token ids -> saved state bytes, holding at most ``max_bytes`` in all.

    With ``disk``, every state put is also written there, and a memory miss is looked up on
    disk (and kept in memory when found).
    """

    def __init__(self, max_bytes: int = 256 << 20, disk: DiskPrefixStore | None = None) -> None:
        self.max_bytes = max_bytes
        self.disk = disk
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = self._refused = 0

    def get(self, ids: Sequence[int]) -> bytes | None:
        key = prefix_key(ids)
        state = self._entries.get(key)
        if state is not None and self.disk is not None:
            self.disk.touch(ids, state)  # its file is in use too: not the first to be evicted
        elif state is None and self.disk is not None:
            state = self.disk.read(ids)
            if state is not None:
                self._keep(key, state)
        if state is None:
            self._misses += 1
            return None
        if key in self._entries:  # a state read from disk that is too large for memory is not kept
            self._entries.move_to_end(key)
        self._hits += 1
        return state

    def put(self, ids: Sequence[int], state: bytes) -> bool:
        """Store ``state`` (and write it to disk); evict the least recently used entries to make
        room in memory. False if it cannot fit in memory."""
        if self.disk is not None:
            self.disk.write(ids, state)
        return self._keep(prefix_key(ids), state)

    def discard(self, ids: Sequence[int], refused: bool = False) -> None:
        """Forget the state for ``ids`` in memory and on disk; ``refused``: the backend could not
        restore the state ``get`` just returned, so that lookup counts as a miss."""
        if refused:
            self._hits, self._misses, self._refused = self._hits - 1, self._misses + 1, self._refused + 1
        old = self._entries.pop(prefix_key(ids), None)
        if old is not None:
            self._bytes -= len(old)
        if self.disk is not None:
            self.disk.discard(ids)

    def _keep(self, key: str, state: bytes) -> bool:
        if len(state) > self.max_bytes:
            return False
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

    def clear(self, disk: bool = False) -> None:
        """Empty the memory; the files on disk stay unless ``disk`` (they are what a restart reads)."""
        self._entries.clear()
        self._bytes = 0
        if disk and self.disk is not None:
            self.disk.clear()

    def stats(self) -> CacheStats:
        stats = CacheStats(self._hits, self._misses, self._evictions, len(self._entries), self._bytes,
                           refused=self._refused)
        if self.disk is not None:
            stats.disk_hits, stats.disk_errors = self.disk.hits, self.disk.errors
            stats.disk_entries, stats.disk_bytes = self.disk.usage()
            stats.disk_folder_bytes = self.disk.usage(every_model=True)[1]
        return stats


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
