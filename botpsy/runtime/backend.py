"""The backend interface every model runtime implements: tokenize, stream tokens, stop.

A backend turns a prompt (the rendered chat text, or its token ids) into a stream of
``TokenOut`` items, one per generated token, and stops at an end-of-turn token, at
``max_tokens``, or when the caller closes the stream. Everything above it (the generation
driver, the agent, evaluation) talks only to this interface, so the same code runs on
llama.cpp (``llama_backend``), transformers (``hf_backend``), any OpenAI-compatible server
(``openai_backend``) and the scripted fake used in tests (``scripted``).

Example::

    backend = LlamaBackend("runs/speedrun/gguf/model-q4_k_m.gguf", BackendOptions(threads=4))
    stream = backend.stream(backend.tokenize(prompt), SamplingConfig(temperature=0), max_tokens=64)
    for token in stream:
        print(token.text, end="")
    print(stream.info.finish_reason, stream.info.prefill_ms)

``stream`` returns a ``TokenStream``: iterate it, ``close()`` it to stop early (the backend
stops computing at once), and read ``info`` (prompt size, prefix-cache use, prefill time,
why it stopped) once the first token has arrived.
"""

from __future__ import annotations

import codecs
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator, Sequence

END_OF_TURN_TEXTS = ("<|im_end|>", "<|endoftext|>")

Prompt = str | Sequence[int]
"""Rendered prompt text, or its token ids (backends with ``token_ids = True`` take both)."""


class BackendError(RuntimeError):
    """A backend could not run a request (server unreachable, prompt too long, ...)."""


class ModelLoadError(ValueError):
    """A model file that cannot be loaded: missing, corrupt, or too large for this machine."""


@dataclass
class SamplingConfig:
    """How the next token is chosen. ``temperature`` 0 means greedy (the other knobs then only
    matter through the penalties, which still reshape the logits)."""

    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature; 0 = greedy."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling: keep the smallest set of tokens with this much probability."})
    top_k: int = field(default=20, metadata={"help": "Keep only the k most likely tokens (0 = all)."})
    min_p: float = field(default=0.0, metadata={"help": "Drop tokens less likely than min_p times the top token's probability."})
    repeat_penalty: float = field(default=1.0, metadata={"help": "Divide the logits of recently seen tokens by this (1 = off)."})
    presence_penalty: float = field(default=0.0, metadata={"help": "Subtract this from the logits of recently seen tokens (0 = off)."})
    penalty_last_n: int = field(default=64, metadata={"help": "How many recent tokens the penalties look at."})
    seed: int = field(default=0, metadata={"help": "Random seed, so sampled generations can be reproduced."})

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or not 0.0 <= self.min_p < 1.0:
            raise ValueError(f"need top_k >= 0 and 0 <= min_p < 1, got {self.top_k}, {self.min_p}")
        if self.repeat_penalty <= 0:
            raise ValueError(f"repeat_penalty must be positive, got {self.repeat_penalty}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def has_penalties(self) -> bool:
        return self.repeat_penalty != 1.0 or self.presence_penalty != 0.0

    def with_penalties(self, repeat_penalty: float, presence_penalty: float) -> "SamplingConfig":
        """A copy whose penalties are at least the given ones (used to resample out of a loop)."""
        return replace(self, repeat_penalty=max(self.repeat_penalty, repeat_penalty),
                       presence_penalty=max(self.presence_penalty, presence_penalty))


@dataclass
class BackendOptions:
    """How a local backend runs the model."""

    threads: int = field(default=0, metadata={"help": "CPU threads for decoding (0 = all physical cores)."})
    n_ctx: int = field(default=8192, metadata={"help": "Context size in tokens (prompt + generation)."})
    n_batch: int = field(default=512, metadata={"help": "Prompt tokens evaluated per batch during prefill."})
    prefix_cache_mb: int = field(
        default=256, metadata={"help": "Memory for saved prompt-prefix states (the tools block), LRU; 0 disables."})
    prefix_cache_dir: str = field(default="", metadata={
        "help": "Also keep saved prefix states in this folder, so a restarted process skips the tools prefill "
                "(empty: memory only)."})
    prefix_cache_disk_mb: int = field(default=1024, metadata={"help": "Most disk space for saved prefix states."})


@dataclass
class TokenOut:
    """One generated token. ``text`` is what it completes: empty while a UTF-8 character is split
    across tokens, then the whole character with the token that finishes it."""

    id: int
    text: str
    logprob: float | None = None
    top_logprobs: dict[str, float] | None = None


@dataclass
class StreamInfo:
    """What a backend reports about one ``stream`` call (filled in before the first token)."""

    prompt_tokens: int = 0
    reused_tokens: int = 0  # prompt tokens not evaluated again (restored prefix or live state)
    cache_hit: bool = False  # a saved prefix state was restored
    prefill_ms: float = 0.0
    finish_reason: str | None = None  # "stop" (end of turn) or "length" (max_tokens / context full)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TokenStream:
    """The tokens of one ``stream`` call: an iterator that can be closed early."""

    def __init__(self, tokens: Iterator[TokenOut], info: StreamInfo) -> None:
        self._tokens = tokens
        self.info = info

    def __iter__(self) -> "TokenStream":
        return self

    def __next__(self) -> TokenOut:
        return next(self._tokens)

    def close(self) -> None:
        close = getattr(self._tokens, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "TokenStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def no_adapter_to_switch(model: str) -> str:
    """Why ``--plain-on-base`` (eval, serve) refuses ``model``: it is not an adapter file."""
    return (f"--plain-on-base needs a LoRA adapter GGUF run by llama.cpp (`botpsy export --formats lora`); "
            f"{model} has no adapter to switch off")


class Backend(ABC):
    """A model that can stream tokens. Subclasses implement ``tokenize``, ``detokenize``, ``_stream``.

    ``token_ids`` says whether prompts may be token ids and whether ``TokenOut.id`` are the
    model's own ids (False for HTTP backends, whose ids only identify the token's text).
    ``supports_prefix_cache`` says whether ``prefix_tokens`` can save prefill time.
    """

    name = "backend"
    token_ids = True
    supports_prefix_cache = False
    supports_constraint = False  # can mask its logits with a CallConstraint (local backends)

    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens written as text (``<|im_end|>``) become their ids."""

    @abstractmethod
    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens included."""

    def stream(self, prompt: Prompt, sampling: SamplingConfig, max_tokens: int,
               prefix_tokens: int = 0, constraint: Any = None) -> TokenStream:
        """Generate after ``prompt``; ``prefix_tokens`` leading ids form a prefix worth caching.

        ``constraint`` (a ``botpsy.chat.constrain.CallConstraint``, or anything with
        ``allowed_ids(text)``) is asked before each token with the text generated so far in this
        call; only backends with ``supports_constraint`` take one.
        """
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        if constraint is not None and not self.supports_constraint:
            raise ValueError(f"the {self.name} backend cannot constrain its tokens")
        info = StreamInfo()
        if constraint is None:  # backends without constraint support keep their plain signature
            return TokenStream(self._stream(prompt, sampling, max_tokens, prefix_tokens, info), info)
        return TokenStream(self._stream(prompt, sampling, max_tokens, prefix_tokens, info, constraint=constraint), info)

    @abstractmethod
    def _stream(self, prompt: Prompt, sampling: SamplingConfig, max_tokens: int,
                prefix_tokens: int, info: StreamInfo) -> Iterator[TokenOut]:
        """Yield tokens; fill ``info`` before the first one and set ``info.finish_reason`` at the end."""

    def prepare_prefix(self, prefix: str, cancel: Any = None) -> dict[str, Any]:
        """Have the state after ``prefix`` ready before a turn needs it (a prefix-cache backend
        evaluates or restores it now; ``cancel``, a ``threading.Event``, stops that early).
        Returns {tokens, source, ms}; source is "none" here."""
        return {"tokens": 0, "source": "none", "ms": 0.0}

    def token_table(self):
        """Every token's text (``botpsy.chat.constrain.TokenTable``), built once; constraint backends only."""
        raise NotImplementedError(f"the {self.name} backend has no token table")

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        return self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)

    def describe(self) -> dict[str, Any]:
        """A short description for records (which backend, which model)."""
        return {"backend": self.name}

    def chat_template(self) -> str:
        """The model's own Jinja chat template ("" when the backend does not know one)."""
        return ""

    def base_chat_template(self) -> str:
        """The template of the base a switchable adapter runs on (the model's own otherwise)."""
        return self.chat_template()

    @property
    def adapter_switchable(self) -> bool:
        """Whether the model runs a LoRA adapter on a base that ``use_adapter(False)`` can run alone."""
        return False

    def use_adapter(self, on: bool) -> None:
        """Apply the model's LoRA adapter (``on``) or run its base alone; only where ``adapter_switchable``."""
        if not on:
            raise BackendError(f"the {self.name} backend has no adapter it can switch off")

    def close(self) -> None:
        """Release the model (the backend cannot be used afterwards)."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Utf8Decoder:
    """Token bytes -> text, holding back a character split across tokens until it is complete.

    >>> decoder = Utf8Decoder()
    >>> [decoder.feed(b) for b in ("é".encode()[:1], "é".encode()[1:], b"!")]
    ['', 'é', '!']
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        """Whatever is still held back (an unfinished character becomes U+FFFD)."""
        return self._decoder.decode(b"", final=True)
