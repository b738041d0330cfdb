"""The OpenAI-compatible backend against a tiny SSE server started on 127.0.0.1 in the test."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from botpsy.chat.template import generation_prompt
from botpsy.runtime.backend import BackendError, SamplingConfig
from botpsy.runtime.generate import GenerateConfig, generate
from botpsy.runtime.openai_backend import OpenAIBackend, scored_tokens

PROMPT = "<|im_start|>user\nWake me at 7.<|im_end|>\n" + generation_prompt(True)


class FakeServer:
    """Plays ``replies`` (one per request) as completion chunks of one word each; records requests."""

    def __init__(self, replies: list[str], status: int = 200) -> None:
        self.replies, self.status, self.requests = list(replies), status, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if server.status != 200:
                    self.send_response(server.status)
                    self.end_headers()
                    self.wfile.write(b'{"error": "model overloaded"}')
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for event in server.events(body):
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def events(self, body):
        reply = self.replies.pop(0)
        stop = next((reply.index(s) for s in body["stop"] if s in reply), None)  # servers cut at stop strings
        words = re.findall(r"\s*\S+", reply[:stop] if stop is not None else reply)
        finish = "stop" if stop is not None or len(words) <= body["max_tokens"] else "length"
        words = words[: body["max_tokens"]]
        for index, word in enumerate(words):
            choice = {"index": 0, "text": word, "finish_reason": finish if index == len(words) - 1 else None}
            if body.get("logprobs"):
                choice["logprobs"] = {"tokens": [word], "token_logprobs": [-0.5], "top_logprobs": [{word: -0.5}]}
            yield {"choices": [choice]}
        yield {"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": len(words)}}

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory():
    servers = []

    def make(replies, status=200):
        servers.append(FakeServer(replies, status))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def test_streams_text_with_logprobs_and_sends_the_rendered_prompt(server_factory):
    server = server_factory(["It is set.<|im_end|>"])
    backend = OpenAIBackend(server.url, model="tiny", api_key="k", logprobs=2)
    sampling = SamplingConfig(temperature=0.3, top_k=5, repeat_penalty=1.1, seed=9)
    stream = backend.stream(PROMPT, sampling, max_tokens=16)
    tokens = list(stream)
    assert [t.text for t in tokens] == ["It", " is", " set."]
    assert all(t.logprob == -0.5 and t.top_logprobs == {t.text: -0.5} for t in tokens)
    assert stream.info.finish_reason == "stop" and stream.info.prompt_tokens == 42
    request = server.requests[0]
    assert request["path"] == "/v1/completions" and request["auth"] == "Bearer k"
    body = request["body"]
    assert body["prompt"] == PROMPT and body["stream"] is True and body["max_tokens"] == 16
    assert (body["temperature"], body["top_k"], body["seed"], body["repetition_penalty"]) == (0.3, 5, 9, 1.1)
    assert "min_p" not in body  # neutral extensions are left out for strict servers


def test_length_finish_and_ids_number_distinct_texts(server_factory):
    server = server_factory(["a b a b a b"])
    stream = OpenAIBackend(server.url).stream(PROMPT, SamplingConfig(), max_tokens=4)
    tokens = list(stream)
    assert [t.id for t in tokens] == [0, 1, 2, 1] and stream.info.finish_reason == "length"


def test_generate_end_to_end_with_a_loop_recovery(server_factory):
    loop = " ".join(["check the alarm again."] * 40)
    server = server_factory([loop, "Done, 7 am.<|im_end|>"])
    result = generate(OpenAIBackend(server.url), PROMPT, GenerateConfig(on_loop="recover"))
    assert result.loop_detected and result.loop_where == "reasoning" and result.finish_reason == "stop"
    assert result.content == "Done, 7 am."
    second_prompt = server.requests[1]["body"]["prompt"]
    assert second_prompt.startswith(PROMPT + "check the alarm again.") and second_prompt.endswith("\n</think>\n\n")


def test_http_errors_and_unreachable_servers_are_clear(server_factory):
    server = server_factory([], status=503)
    with pytest.raises(BackendError, match="HTTP 503.*overloaded"):
        list(OpenAIBackend(server.url).stream(PROMPT, SamplingConfig(), 4))
    with pytest.raises(BackendError, match="cannot reach"):
        list(OpenAIBackend("http://127.0.0.1:9/v1", timeout_s=2).stream(PROMPT, SamplingConfig(), 4))


def test_tokenize_needs_a_local_tokenizer():
    with pytest.raises(BackendError, match="local tokenizer"):
        OpenAIBackend("http://127.0.0.1:9/v1").tokenize("hi")

    class Chars:
        def encode(self, text):
            return [ord(c) for c in text]

        def decode(self, ids):
            return "".join(map(chr, ids))

    backend = OpenAIBackend("http://127.0.0.1:9/v1", tokenizer=Chars())
    assert backend.detokenize(backend.tokenize("hé")) == "hé"


def test_scored_tokens_reads_the_chat_style_shape():
    chat_style = {"content": [{"token": "Hi", "logprob": -0.2, "top_logprobs": [{"token": "Hi", "logprob": -0.2}]}]}
    assert scored_tokens(chat_style) == [("Hi", -0.2, {"Hi": -0.2})]
    assert scored_tokens(None) == []
