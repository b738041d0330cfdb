"""A fake backend that replays scripted outputs token by token, so the runtime and the agent run offline.

Each call to ``stream`` plays the next script in order (a restart after a thinking-budget or
loop-recovery injection is a new call, so it plays the next script). A script is either a
string or a function of the prompt text returning one, for replies that depend on what the
model was shown. Text is split into tokens by a small deterministic tokenizer (special tags
whole, then words with their leading space, single spaces and punctuation), with ids given
in order of first appearance, so ``detokenize(tokenize(t)) == t`` for every text.

A script stops where an end-of-turn tag appears (the tag is the last token, as with a real
model), at ``max_tokens``, or at its end. Every call is recorded in ``calls`` (prompt text,
sampling, max_tokens), so tests can check what the model was shown.

Example::

    backend = ScriptedBackend(["I should set the alarm.\\n</think>\\n\\nDone.<|im_end|>"])
    result = generate(backend, prompt, GenerateConfig())
    assert backend.calls[0].prompt.endswith("<think>\\n")
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from botpsy.runtime.backend import (
    END_OF_TURN_TEXTS,
    Backend,
    BackendError,
    Prompt,
    SamplingConfig,
    StreamInfo,
    TokenOut,
)

Script = str | Callable[[str], str]

SPECIAL_TAGS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
                "</tool_call>", "<tool_response>", "</tool_response>")
_PIECES = re.compile("|".join(re.escape(tag) for tag in SPECIAL_TAGS) + r"| ?\w+|\s|[^\w\s]")


@dataclass
class ScriptedCall:
    prompt: str
    sampling: SamplingConfig
    max_tokens: int
    prefix_tokens: int


class ScriptedBackend(Backend):
    """Replays ``scripts`` one per ``stream`` call; ``token_delay_s`` simulates decode time."""

    name = "scripted"

    def __init__(self, scripts: Sequence[Script], token_delay_s: float = 0.0) -> None:
        self.scripts = list(scripts)
        self.token_delay_s = token_delay_s
        self.calls: list[ScriptedCall] = []
        self._ids: dict[str, int] = {}
        self._texts: list[str] = []

    def tokenize(self, text: str) -> list[int]:
        return [self._id(piece) for piece in _PIECES.findall(text)]

    def detokenize(self, ids: Sequence[int]) -> str:
        return "".join(self._texts[i] for i in ids)

    def _id(self, piece: str) -> int:
        if piece not in self._ids:
            self._ids[piece] = len(self._texts)
            self._texts.append(piece)
        return self._ids[piece]

    @property
    def remaining(self) -> int:
        """Scripts not played yet."""
        return len(self.scripts) - len(self.calls)

    def _stream(self, prompt: Prompt, sampling: SamplingConfig, max_tokens: int,
                prefix_tokens: int, info: StreamInfo) -> Iterator[TokenOut]:
        text = prompt if isinstance(prompt, str) else self.detokenize(prompt)
        index = len(self.calls)
        self.calls.append(ScriptedCall(text, sampling, max_tokens, prefix_tokens))
        if index >= len(self.scripts):
            raise BackendError(f"the scripted backend has only {len(self.scripts)} scripts; call {index + 1} has none")
        script = self.scripts[index]
        output = script(text) if callable(script) else script
        info.prompt_tokens = len(self.tokenize(text))
        ids = self.tokenize(output)
        for token in ids[:max_tokens]:
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            piece = self._texts[token]
            yield TokenOut(token, piece)
            if piece in END_OF_TURN_TEXTS:
                info.finish_reason = "stop"
                return
        info.finish_reason = "length" if len(ids) > max_tokens else "stop"
