"""Any OpenAI-compatible ``/v1/completions`` server (vLLM, llama-server, Ollama) as a backend, stdlib only.

The raw completions endpoint is used, not chat completions: the prompt is the text botpsy
rendered itself, so the wire format (tools block, ``<think>``, ``<tool_call>``) is exactly
botpsy's whichever server runs the model, and teachers or peers served elsewhere are
evaluated by the same agent and parser. The response is read as server-sent events
(``stream: true``) and each event's text becomes tokens; when the server returns
``logprobs`` (ask with ``logprobs=N``) each token comes with its log-probability and the top
N alternatives, which teachers need for distillation.

Token ids: HTTP servers return text, not ids, so ``TokenOut.id`` numbers distinct token texts
in order of first appearance (enough for the loop guard, which only compares ids).
``tokenize``/``detokenize`` need a local tokenizer (any object with ``encode``/``decode``).

Example::

    backend = OpenAIBackend("http://127.0.0.1:8000/v1", model="Qwen/Qwen3.5-4B", logprobs=5)
    for token in backend.stream(prompt_text, SamplingConfig(temperature=0.6), max_tokens=512):
        print(token.text, token.logprob)
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Iterable, Iterator, Sequence

from botpsy.runtime.backend import (
    END_OF_TURN_TEXTS,
    Backend,
    BackendError,
    Prompt,
    SamplingConfig,
    StreamInfo,
    TokenOut,
)


class OpenAIBackend(Backend):
    name = "openai"
    token_ids = False

    def __init__(self, base_url: str, model: str = "", api_key: str | None = None, timeout_s: float = 120.0,
                 logprobs: int = 0, tokenizer: Any = None, extra_body: dict[str, Any] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.logprobs = logprobs
        self.tokenizer = tokenizer
        self.extra_body = dict(extra_body or {})
        self._ids: dict[str, int] = {}

    def tokenize(self, text: str) -> list[int]:
        return list(self._local_tokenizer().encode(text))

    def detokenize(self, ids: Sequence[int]) -> str:
        return self._local_tokenizer().decode(list(ids))

    def _local_tokenizer(self) -> Any:
        if self.tokenizer is None:
            raise BackendError("this OpenAI-compatible backend has no local tokenizer; pass tokenizer= "
                               "(e.g. a Hugging Face tokenizer) to count or convert token ids")
        return self.tokenizer

    def request_body(self, prompt: str, sampling: SamplingConfig, max_tokens: int) -> dict[str, Any]:
        """The JSON body: standard OpenAI fields, plus the common extensions only when they do something."""
        body: dict[str, Any] = {
            "model": self.model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, "stop": list(END_OF_TURN_TEXTS),
            "temperature": sampling.temperature, "top_p": sampling.top_p, "seed": sampling.seed,
            "presence_penalty": sampling.presence_penalty,
        }
        if sampling.top_k > 0:
            body["top_k"] = sampling.top_k
        if sampling.min_p > 0:
            body["min_p"] = sampling.min_p
        if sampling.repeat_penalty != 1.0:  # llama-server and vLLM spell it differently
            body["repeat_penalty"] = body["repetition_penalty"] = sampling.repeat_penalty
        if self.logprobs:
            body["logprobs"] = self.logprobs
        body.update(self.extra_body)
        return body

    def _stream(self, prompt: Prompt, sampling: SamplingConfig, max_tokens: int,
                prefix_tokens: int, info: StreamInfo) -> Iterator[TokenOut]:
        text = prompt if isinstance(prompt, str) else self.detokenize(prompt)
        start = time.perf_counter()
        response = self._post(self.request_body(text, sampling, max_tokens))
        try:
            for event in server_sent_events(response, self.url):
                if not info.prefill_ms:  # as seen from here: request, queueing and prefill together
                    info.prefill_ms = (time.perf_counter() - start) * 1000
                usage = event.get("usage") or {}
                info.prompt_tokens = int(usage.get("prompt_tokens") or info.prompt_tokens)
                for choice in event.get("choices") or []:
                    yield from self._tokens(choice)
                    if choice.get("finish_reason"):
                        info.finish_reason = "length" if choice["finish_reason"] == "length" else "stop"
        finally:
            response.close()
        info.finish_reason = info.finish_reason or "stop"

    def _post(self, body: dict[str, Any]):
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            return urllib.request.urlopen(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            detail = exc.read(500).decode("utf-8", errors="replace")
            raise BackendError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise BackendError(f"cannot reach {self.url}: {getattr(exc, 'reason', exc)}") from None

    def _tokens(self, choice: dict[str, Any]) -> Iterator[TokenOut]:
        """One ``TokenOut`` per token when logprobs name the tokens, else one for the event's text."""
        text = choice.get("text") or ""
        scored = scored_tokens(choice.get("logprobs"))
        if scored and "".join(token for token, _, _ in scored) == text:
            for token, logprob, top in scored:
                yield TokenOut(self._id(token), token, logprob, top)
        elif text:
            yield TokenOut(self._id(text), text)

    def _id(self, text: str) -> int:
        return self._ids.setdefault(text, len(self._ids))

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "url": self.base_url, "model": self.model}


def server_sent_events(lines: Iterable[bytes], url: str) -> Iterator[dict[str, Any]]:
    """The JSON payloads of ``data:`` lines until ``[DONE]``; an error payload raises ``BackendError``."""
    for raw in lines:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            continue  # blank separators, comments, "event:" lines
        payload = line[len("data:"):].strip()
        if payload == "[DONE]":
            return
        try:
            event = json.loads(payload)
        except json.JSONDecodeError:
            raise BackendError(f"{url} sent an event that is not JSON: {payload[:200]}") from None
        if isinstance(event, dict) and event.get("error"):
            error = event["error"]
            raise BackendError(f"{url} reported an error: {error.get('message', error) if isinstance(error, dict) else error}")
        if isinstance(event, dict):
            yield event


def scored_tokens(logprobs: Any) -> list[tuple[str, float | None, dict[str, float] | None]]:
    """(token, logprob, top alternatives) from either logprobs shape servers send.

    Completions style: ``{"tokens": [...], "token_logprobs": [...], "top_logprobs": [{tok: lp}]}``;
    chat style (newer llama-server): ``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}``.

    >>> scored_tokens({"tokens": ["Hi", "!"], "token_logprobs": [-0.1, -2.0], "top_logprobs": None})
    [('Hi', -0.1, None), ('!', -2.0, None)]
    """
    if not isinstance(logprobs, dict):
        return []
    if isinstance(logprobs.get("content"), list):
        return [(item.get("token", ""), item.get("logprob"),
                 {alt["token"]: alt["logprob"] for alt in item.get("top_logprobs") or []} or None)
                for item in logprobs["content"]]
    tokens = logprobs.get("tokens") or []
    values = logprobs.get("token_logprobs") or [None] * len(tokens)
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    return [(token, value, dict(top) if top else None) for token, value, top in zip(tokens, values, tops)]
