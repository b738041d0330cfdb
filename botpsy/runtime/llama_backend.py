"""The llama.cpp backend: GGUF models on the CPU through ``llama-cpp-python`` (the one module importing it).

``llama_cpp.Llama`` loads the model, tokenizes and owns the context; decoding, sampling and
state handling use the C API directly, because the generation loop needs three things
``Llama.generate`` does not give together:

* **token ids and bytes as they come**, decoded incrementally so a UTF-8 character split
  across tokens arrives whole (``Utf8Decoder``), and a stop the caller controls by closing
  the stream;
* **state reuse that works for hybrid models.** Qwen3.5's Gated DeltaNet layers carry a
  recurrent state that cannot be truncated back to an earlier position the way a KV cache
  can, so a prompt is served in one of three ways: it extends what the context already holds
  (continue in place: a restart after a thinking-budget or loop-recovery injection); it starts
  with a prefix whose full context state was saved (restore it from the ``PrefixCache``,
  evaluate the rest); or neither (clear, evaluate the prefix, save the state there, evaluate
  the rest). With ``BackendOptions.prefix_cache_dir`` saved states also go to disk, in a
  folder named by ``state_namespace``, so a new process on the same files starts warm; a state
  llama.cpp will not take back is dropped and the prefix evaluated instead. An attention-only
  model (the Qwen2 student and bases) can also cut its KV cache
  back to the longest prefix it shares with the new prompt, as llama-server does, which keeps
  a conversation's earlier turns even where re-rendering one changed a later token (a base
  model's free-form call, re-rendered by its template, differs from what it wrote);
* **little Python per token**, so the loop guard and parser on top still leave decode speed
  within a few percent of a bare llama.cpp loop (``bench/runtime_throughput.py``).

The penalty sampler is primed with the last ``penalty_last_n`` prompt tokens (as llama-server
does), so a generation restarted after an injection keeps penalising what it wrote before.

Example::

    backend = LlamaBackend("runs/speedrun/gguf/model-q4_k_m.gguf", BackendOptions(threads=4, n_ctx=8192))
    ids = backend.tokenize(prefix) + backend.tokenize(rest)
    for token in backend.stream(ids, SamplingConfig(temperature=0), 128, prefix_tokens=len(...)):
        ...
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import llama_cpp
import numpy as np

from botpsy.chat.constrain import outside
from botpsy.runtime.backend import (
    Backend,
    BackendError,
    BackendOptions,
    ModelLoadError,
    Prompt,
    SamplingConfig,
    StreamInfo,
    TokenOut,
    Utf8Decoder,
)
from botpsy.runtime.memory import MemoryEstimate, check_model_fits
from botpsy.runtime.prefix_cache import DiskPrefixStore, PrefixCache


def has_ftype(ftype_name: str) -> bool:
    """Whether this llama.cpp build knows a file type such as ``LLAMA_FTYPE_MOSTLY_BF16``."""
    return hasattr(llama_cpp, ftype_name)


def quantize_file(source: str | Path, target: str | Path, ftype_name: str, threads: int = 0) -> int:
    """``llama_model_quantize`` from ``source`` to ``target``; returns llama.cpp's status (0: ok)."""
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype_name)
    params.nthread = threads
    return llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), params)


def extra_buffer_types_enabled() -> bool:
    """Whether llama.cpp may keep weights in its extra CPU buffer types (AMX tiles, repacked quant blocks).

    On a Xeon with AMX (2026-12-05), llama-cpp-python 0.3.36 built natively compiles in ggml's AMX
    buffer type, and decoding the tiny test models segfaulted inside ``llama_decode`` (the runtime
    and agent tests); with extra buffer types off they passed. So they are off when the build
    reports AMX, and on elsewhere (where they repack Q4/Q8 weights for speed).
    ``BOTPSY_LLAMA_EXTRA_BUFTS=1`` or ``0`` forces either way.
    """
    setting = os.environ.get("BOTPSY_LLAMA_EXTRA_BUFTS", "")
    if setting in ("0", "1"):
        return setting == "1"
    return "AMX_INT8 = 1" not in llama_system_info()["system_info"]


def new_llama(**kwargs) -> "llama_cpp.Llama":
    """``llama_cpp.Llama(**kwargs)``, with extra buffer types off where ``extra_buffer_types_enabled`` says so.

    ``Llama`` takes no flag for them, so its default model parameters are swapped for the
    duration of the load.
    """
    if extra_buffer_types_enabled():
        return llama_cpp.Llama(**kwargs)
    bindings = llama_cpp.llama_cpp  # the module whose defaults ``Llama.__init__`` reads
    default = bindings.llama_model_default_params

    def without_extra_buffer_types():
        params = default()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = without_extra_buffer_types
    try:
        return llama_cpp.Llama(**kwargs)
    finally:
        bindings.llama_model_default_params = default


def model_files(path: str | Path):
    """(``new_llama`` file arguments, adapter pair or ``None``) for a model file.

    A LoRA adapter GGUF (``botpsy export --formats lora``) loads as its verified base file with the
    adapter applied at run time; a missing or different base is a ``ModelLoadError``.
    """
    from botpsy.export.lora_gguf import AdapterFileError, find_adapter

    try:
        pair = find_adapter(path)
    except AdapterFileError as exc:
        raise ModelLoadError(f"cannot load the model: {exc}") from None
    if pair is None:
        return {"model_path": str(path)}, None
    return {"model_path": str(pair.base), "lora_path": str(pair.adapter)}, pair


def open_llama(path: str | Path, n_ctx: int, threads: int = 0, logits_all: bool = False):
    """A plain ``llama_cpp.Llama`` (for parity checks that read raw logits)."""
    return new_llama(**model_files(path)[0], n_ctx=n_ctx, logits_all=logits_all,
                     n_threads=threads or default_threads(), verbose=False)


def llama_system_info() -> dict[str, str]:
    """The llama.cpp build: binding version and the compiled-in CPU features (for benchmark cards)."""
    info = llama_cpp.llama_print_system_info()
    return {"llama_cpp_python": llama_cpp.__version__,
            "system_info": (info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)).strip()}


def default_threads() -> int:
    """Physical cores: llama.cpp decodes no faster on hyper-threads and slows other work down."""
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:
        return os.cpu_count() or 1


def mask_outside(logits: np.ndarray, allowed: set[int] | frozenset[int]) -> None:
    """Set every entry of ``logits`` outside ``allowed`` to -inf, in place."""
    if isinstance(allowed, frozenset):
        logits[outside(allowed, len(logits))] = -np.inf
        return
    keep = np.fromiter(allowed, dtype=np.int64)
    kept = logits[keep].copy()
    logits[:] = -np.inf
    logits[keep] = kept


class LlamaBackend(Backend):
    """A GGUF model in llama.cpp; see the module docstring for how prompts reuse state."""

    name = "llama.cpp"
    supports_prefix_cache = True
    supports_constraint = True

    def __init__(self, model_path: str | Path, options: BackendOptions | None = None,
                 available_bytes: int | None = None) -> None:
        self.options = options or BackendOptions()
        self.path = Path(model_path)
        # An adapter GGUF runs on its base file: both are checked, and the adapter's weights counted.
        files, self.adapter = model_files(self.path)
        # Refuses a missing, corrupt or too-large file with a clear message before llama.cpp sees it.
        self.memory: MemoryEstimate = check_model_fits(self.adapter.base if self.adapter else self.path,
                                                       self.options.n_ctx, self.options.n_batch, available_bytes,
                                                       extra_weight_bytes=self.path.stat().st_size if self.adapter else 0)
        self.threads = self.options.threads or default_threads()
        try:
            self._llm = new_llama(
                **files, n_ctx=self.options.n_ctx, n_batch=self.options.n_batch,
                n_threads=self.threads, n_threads_batch=self.threads, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"llama.cpp could not load {self.path}: {exc}") from None
        self._ctx = self._llm.ctx
        self._vocab = llama_cpp.llama_model_get_vocab(self._llm.model)
        self.n_ctx = self._llm.n_ctx()
        self.n_vocab = self._llm.n_vocab()
        self._pieces: dict[int, bytes] = {}
        self._one = (llama_cpp.llama_token * 1)()  # reused for the one-token decode of every step
        self._evaluated: list[int] = []  # the token ids whose state the context holds, in order
        self._logits_fresh = False  # the context's logits belong to the last evaluated token
        self.prefix_cache = self._new_prefix_cache()
        self._adapter_on = self.adapter is not None
        self._other_prefix_cache: PrefixCache | None = None  # the cache of the adapter state not in use
        model = self._llm.model
        # Recurrent or hybrid layers keep a state that cannot be cut back to an earlier position.
        self.truncatable = not (llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model))

    def _new_prefix_cache(self, base_alone: bool = False) -> PrefixCache | None:
        options = self.options
        if not options.prefix_cache_mb:
            return None
        disk = None
        if options.prefix_cache_dir:
            namespace = self.state_namespace() + ("-base" if base_alone else "")
            disk = DiskPrefixStore(options.prefix_cache_dir, namespace, options.prefix_cache_disk_mb << 20)
        return PrefixCache(options.prefix_cache_mb << 20, disk=disk)

    @property
    def adapter_switchable(self) -> bool:
        return self.adapter is not None

    @property
    def adapter_on(self) -> bool:
        """Whether the LoRA adapter is applied now (False for a plain model file)."""
        return self._adapter_on

    def use_adapter(self, on: bool) -> None:
        """Apply the LoRA adapter (``on``) or run the base model alone, as loaded from the same files.

        Serves both from one set of weights in memory: llama.cpp adds the adapter's low-rank products
        at run time, so switching costs no load, only the context (its state was computed with the
        other weights; it is cleared). Each state keeps its own prefix cache (on disk, its own folder).
        A model without an adapter is always its base: ``on`` is then a no-op and ``off`` an error.
        """
        if self.adapter is None:
            super().use_adapter(on)
            return
        if on == self._adapter_on:
            return
        if on:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(self._llm._lora_adapter)
            scales = (ctypes.c_float * 1)(self._llm.lora_scale)
            status = llama_cpp.llama_set_adapters_lora(self._ctx, adapters, 1, scales)
        else:
            status = llama_cpp.llama_set_adapters_lora(self._ctx, None, 0, None)
        if status:
            raise BackendError(f"llama.cpp could not switch the adapter {'on' if on else 'off'} (status {status})")
        self._clear()
        if self._other_prefix_cache is None and self.prefix_cache is not None:
            self._other_prefix_cache = self._new_prefix_cache(base_alone=not on)
        self.prefix_cache, self._other_prefix_cache = self._other_prefix_cache, self.prefix_cache
        self._adapter_on = on

    def state_namespace(self) -> str:
        """A folder name for this model's saved states: a hash of what a state depends on.

        The llama.cpp build (the binding's version, its CPU features, the shared library's size and
        modification time), every model file loaded (path, size, modification time: a rebuilt file
        is another model), the context and batch sizes. States from any other combination are never
        offered to this context.
        """
        files = [self.adapter.base, self.path] if self.adapter is not None else [self.path]
        library = getattr(getattr(llama_cpp, "llama_cpp", None), "_lib", None)
        library_path = getattr(library, "_name", "") or ""
        files += [library_path] if library_path and Path(library_path).is_file() else []  # a rebuilt libllama
        parts = [llama_cpp.__version__, llama_system_info()["system_info"],
                 f"n_ctx={self.options.n_ctx}", f"n_batch={self.options.n_batch}"]
        for file in files:
            stat = Path(file).stat()
            parts.append(f"{Path(file).resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
        digest = hashlib.blake2b("\n".join(parts).encode("utf-8"), digest_size=8).hexdigest()
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.path.stem[:40]).lstrip(".")
        return f"{name or 'model'}-{digest}"

    def chat_template(self) -> str:
        """The template of the model as it runs now: an adapter file's own (the base file carries its
        authors' template), or the base's while the adapter is switched off."""
        if self.adapter is not None and self._adapter_on and self.adapter.chat_template:
            return self.adapter.chat_template
        return self.base_chat_template()

    def base_chat_template(self) -> str:
        """The base file's own template (the model's, for a file without an adapter)."""
        return self._llm.metadata.get("tokenizer.chat_template", "")

    # -- text <-> ids ----------------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def detokenize(self, ids: Sequence[int]) -> str:
        return b"".join(self.piece(i) for i in ids).decode("utf-8", errors="replace")

    def piece(self, token: int) -> bytes:
        """The bytes of one token, special tokens written out (``<|im_end|>``); cached."""
        data = self._pieces.get(token)
        if data is None:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
            data = self._pieces[token] = buf.raw[:n]
        return data

    def is_end_of_generation(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    # -- generation ------------------------------------------------------------------------

    def token_table(self):
        from botpsy.chat.constrain import TokenTable

        if getattr(self, "_table", None) is None:
            self._table = TokenTable([self.piece(i).decode("utf-8", errors="replace") for i in range(self.n_vocab)])
        return self._table

    def _stream(self, prompt: Prompt, sampling: SamplingConfig, max_tokens: int,
                prefix_tokens: int, info: StreamInfo, constraint=None) -> Iterator[TokenOut]:
        ids = self.prompt_ids(prompt)
        if not ids:
            raise BackendError("the prompt is empty")
        if len(ids) >= self.n_ctx:
            raise BackendError(f"the prompt has {len(ids)} tokens; the context holds {self.n_ctx} (raise n_ctx)")
        max_tokens = min(max_tokens, self.n_ctx - len(ids))
        start = time.perf_counter()
        self._prefill(ids, prefix_tokens, info)
        info.prompt_tokens = len(ids)
        info.prefill_ms = (time.perf_counter() - start) * 1000
        sampler = self._sampler(sampling, ids[-sampling.penalty_last_n:] if sampling.has_penalties else ())
        sample, ctx, piece = llama_cpp.llama_sampler_sample, self._ctx, self.piece
        decoder = Utf8Decoder()
        generated = ""
        gate_at = getattr(constraint, "gate_at", None)
        try:
            for step in range(max_tokens):
                allowed = constraint.allowed_ids(generated) if constraint is not None else None
                if allowed:
                    self._mask_logits(allowed)
                gate = gate_at(generated) if gate_at is not None else None
                if gate is not None:
                    logits = self._logits()
                    if gate.should_mask(logits):
                        logits[gate.call_ids] = -np.inf
                token = sample(sampler, ctx, -1)
                last = step == max_tokens - 1
                end = self.is_end_of_generation(token)
                text = decoder.feed(piece(token))
                text = text + decoder.flush() if end or last else text
                generated += text
                yield TokenOut(token, text)
                if end:
                    info.finish_reason = "stop"
                    return
                if not last:  # the last token's logits are never needed, so it is not evaluated
                    self._decode_one(token)
            info.finish_reason = "length"
        finally:
            llama_cpp.llama_sampler_free(sampler)

    def _prefill(self, ids: list[int], prefix_tokens: int, info: StreamInfo) -> None:
        """Bring the context to the state after ``ids``, re-evaluating as little as possible."""
        live = len(self._evaluated)
        if live and live <= len(ids) and ids[:live] == self._evaluated and (live < len(ids) or self._logits_fresh):
            info.reused_tokens = live
            self._decode(ids[live:])
            return
        prefix = ids[:prefix_tokens] if 0 < prefix_tokens < len(ids) and self.prefix_cache is not None else []
        if live and self.truncatable and self._truncate_to_common(ids, len(prefix)):
            info.reused_tokens = len(self._evaluated)
            self._decode(ids[len(self._evaluated):])
            return
        # The context cannot be rolled back (recurrent layers): start from a clean or saved state.
        self._clear()
        if prefix and self._enter_prefix(prefix) == "restored":
            info.cache_hit, info.reused_tokens = True, len(prefix)
        self._decode(ids[len(prefix):])

    def _enter_prefix(self, prefix: list[int], cancel: threading.Event | None = None) -> str:
        """From a clear context, reach the state after ``prefix``: "restored" from the prefix cache
        (memory, then disk), else "prefilled" (evaluated and saved); "cancelled" (context clear,
        nothing saved) when ``cancel`` is set between batches."""
        state = self.prefix_cache.get(prefix)
        if state is not None and self._restore(state, prefix):
            return "restored"
        if state is not None:  # not taken back (a file from a damaged or changed build): start over
            self.prefix_cache.discard(prefix, refused=True)
        for begin in range(0, len(prefix), self._llm.n_batch):
            if cancel is not None and cancel.is_set():
                self._clear()
                return "cancelled"
            self._decode(prefix[begin:begin + self._llm.n_batch])
        self.prefix_cache.put(prefix, self._save())
        return "prefilled"

    def prepare_prefix(self, prefix: str, cancel: threading.Event | None = None) -> dict[str, Any]:
        """Bring the context to the state after ``prefix`` now, so the first turn that opens with
        it only evaluates its own tokens (``botpsy chat`` runs this while the person types; ``serve``
        at start). The state is restored from the prefix cache (memory, then disk) or evaluated and
        saved; ``cancel`` stops an evaluation between batches (the context is then left clear).

        source: "memory" or "disk" (restored from there), "prefilled" (evaluated now and saved),
        "cancelled", or "none" (no prefix cache, or an empty prefix).
        """
        start = time.perf_counter()
        ids = self.tokenize(prefix) if prefix and self.prefix_cache is not None else []
        if not ids:
            return {"tokens": 0, "source": "none", "ms": 0.0}
        in_memory = ids in self.prefix_cache
        self._clear()
        source = self._enter_prefix(ids, cancel)
        if source == "restored":
            source = "memory" if in_memory else "disk"
        return {"tokens": len(ids), "source": source, "ms": round((time.perf_counter() - start) * 1000, 1)}

    def _sampler(self, sampling: SamplingConfig, history: Sequence[int]):
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = lambda sampler: llama_cpp.llama_sampler_chain_add(chain, sampler)  # noqa: E731
        if sampling.has_penalties:
            add(llama_cpp.llama_sampler_init_penalties(self.n_vocab, sampling.penalty_last_n, sampling.repeat_penalty,
                                                       0.0, sampling.presence_penalty))
        if sampling.greedy:
            add(llama_cpp.llama_sampler_init_greedy())
        else:
            if sampling.top_k > 0:
                add(llama_cpp.llama_sampler_init_top_k(sampling.top_k))
            add(llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
            if sampling.min_p > 0:
                add(llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
            add(llama_cpp.llama_sampler_init_temp(sampling.temperature))
            add(llama_cpp.llama_sampler_init_dist(sampling.seed & 0xFFFFFFFF))
        for token in history:
            llama_cpp.llama_sampler_accept(chain, token)
        return chain

    def _mask_logits(self, allowed: set[int]) -> None:
        """Set every logit outside ``allowed`` to -inf in the context's own buffer, which the
        sampler chain reads next (so penalties, top-k/p and temperature apply as usual)."""
        mask_outside(self._logits(), allowed)

    def _logits(self) -> np.ndarray:
        """The last evaluated token's logits: a view of the context's own buffer (writes reach the sampler)."""
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx, -1), shape=(self.n_vocab,))

    # -- the context's state ---------------------------------------------------------------

    def _decode_one(self, token: int) -> None:
        self._one[0] = token
        if llama_cpp.llama_decode(self._ctx, llama_cpp.llama_batch_get_one(self._one, 1)) != 0:
            position = len(self._evaluated)
            self._clear()
            raise BackendError(f"llama.cpp could not decode at position {position} (context full?)")
        self._evaluated.append(token)
        self._logits_fresh = True

    def _decode(self, ids: Sequence[int]) -> None:
        batch_size = self._llm.n_batch  # llama.cpp aborts on a batch over n_batch, which Llama caps at n_ctx
        for begin in range(0, len(ids), batch_size):
            chunk = ids[begin:begin + batch_size]
            array = (llama_cpp.llama_token * len(chunk))(*chunk)
            status = llama_cpp.llama_decode(self._ctx, llama_cpp.llama_batch_get_one(array, len(chunk)))
            if status != 0:
                self._clear()  # a failed batch leaves the context in an unknown state
                raise BackendError(f"llama.cpp decode failed with status {status} after {begin} prompt tokens")
            self._evaluated.extend(chunk)
            self._logits_fresh = True

    def _truncate_to_common(self, ids: list[int], at_least: int) -> bool:
        """Cut the KV cache back to the longest prefix it shares with ``ids`` (leaving at least one
        token to evaluate, whose logits the next sample needs), if that keeps more than ``at_least``
        tokens, which a saved prefix state would give anyway."""
        limit = min(len(self._evaluated), len(ids) - 1)
        common = next((i for i in range(limit) if self._evaluated[i] != ids[i]), limit)
        if common <= max(at_least, 0) or common == 0:
            return False
        if not llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self._ctx), 0, common, -1):
            return False
        del self._evaluated[common:]
        self._logits_fresh = False
        return True

    def _clear(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)
        self._evaluated = []
        self._logits_fresh = False

    def _save(self) -> bytes:
        """The whole context state (KV cache, recurrent states, last logits) as bytes."""
        size = llama_cpp.llama_state_get_size(self._ctx)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_get_data(self._ctx, buf, size)
        return ctypes.string_at(buf, written)

    def _restore(self, state: bytes, ids: list[int]) -> bool:
        """Put a saved state back; False (context cleared) if llama.cpp does not take it."""
        # llama.cpp only reads the buffer, so it can point straight into the immutable bytes.
        pointer = ctypes.cast(ctypes.c_char_p(state), ctypes.POINTER(ctypes.c_uint8))
        if llama_cpp.llama_state_set_data(self._ctx, pointer, len(state)) != len(state):
            self._clear()
            return False
        self._evaluated = list(ids)
        self._logits_fresh = False  # whether the saved logits come back is not relied upon
        return True

    def time_prefill_decode(self, prompt_ids: Sequence[int], decode_tokens: int,
                            between: Callable[[], None] | None = None) -> tuple[float, float]:
        """Seconds to prefill ``prompt_ids`` from a clean context, and to decode ``decode_tokens`` after it.

        For throughput benchmarks (``botpsy bench``): each step samples greedily and evaluates the
        token, but an end-of-generation token does not stop it, so any model decodes the same count.
        ``between`` runs untimed after the prefill (the bench reads energy counters there).
        """
        if len(prompt_ids) + decode_tokens >= self.n_ctx:
            raise BackendError(f"{len(prompt_ids)} + {decode_tokens} tokens do not fit the context of {self.n_ctx}")
        self._clear()
        start = time.perf_counter()
        self._decode(prompt_ids)
        prefill_s = time.perf_counter() - start
        if between is not None:
            between()
        sampler = self._sampler(SamplingConfig(temperature=0), ())
        start = time.perf_counter()
        try:
            for _ in range(decode_tokens):
                self._decode_one(llama_cpp.llama_sampler_sample(sampler, self._ctx, -1))
        finally:
            llama_cpp.llama_sampler_free(sampler)
        decode_s = time.perf_counter() - start
        self._clear()
        return prefill_s, decode_s

    def reset(self, clear_prefix_cache: bool = False) -> None:
        """Forget the evaluated context (the next prompt is prefilled from scratch or a saved prefix).

        ``clear_prefix_cache`` empties the memory cache; saved files on disk stay (what a restart reads).
        """
        self._clear()
        if clear_prefix_cache and self.prefix_cache is not None:
            self.prefix_cache.clear()

    def describe(self) -> dict[str, Any]:
        info = {"backend": self.name, "model": str(self.path), "threads": self.threads, "n_ctx": self.n_ctx}
        if self.adapter is not None:
            info["base"] = str(self.adapter.base)
            info["adapter"] = "on" if self._adapter_on else "off"
        return info

    def close(self) -> None:
        if getattr(self, "_llm", None) is not None:
            self._llm.close()
            self._llm = None


class BareLlamaLoop:
    """The reference a llama_cpp user would write (``Llama.generate`` + ``detokenize``), for benchmarks.

    ``bench/runtime_throughput.py`` compares the decode speed of ``generate()`` (backend, parser
    and loop guard) with this loop on the same file, prompt and threads.
    """

    def __init__(self, model_path: str | Path, threads: int, n_ctx: int) -> None:
        self._llm = new_llama(**model_files(model_path)[0], n_ctx=n_ctx, n_threads=threads,
                              n_threads_batch=threads, verbose=False)
        self._vocab = llama_cpp.llama_model_get_vocab(self._llm.model)

    def run(self, prompt_ids: Sequence[int], max_tokens: int,
            sampling: SamplingConfig) -> tuple[list[int], float, float]:
        """Generate from a fresh context; return (token ids, wall and CPU seconds from the first token to the last)."""
        self._llm.reset()
        self._llm.set_seed(sampling.seed)
        ids: list[int] = []
        first = first_cpu = 0.0
        for token in self._llm.generate(list(prompt_ids), top_k=sampling.top_k, top_p=sampling.top_p,
                                        min_p=sampling.min_p, temp=sampling.temperature,
                                        repeat_penalty=sampling.repeat_penalty,
                                        presence_penalty=sampling.presence_penalty, reset=True):
            if not ids:
                first, first_cpu = time.perf_counter(), time.process_time()
            ids.append(token)
            self._llm.detokenize([token], special=True)
            if llama_cpp.llama_vocab_is_eog(self._vocab, token) or len(ids) >= max_tokens:
                break
        return ids, time.perf_counter() - first, time.process_time() - first_cpu

    def close(self) -> None:
        self._llm.close()
