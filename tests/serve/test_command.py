"""``botpsy serve`` as a command: a real process on 127.0.0.1, the tiny GGUF, the official client, a clean stop."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import openai

from botpsy.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_health(url: str, process: subprocess.Popen, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode()
        try:
            return json.loads(urllib.request.urlopen(url + "/health", timeout=2).read())
        except OSError:
            time.sleep(0.2)
    raise AssertionError("botpsy serve did not come up")


def test_botpsy_serve_process_answers_the_openai_client(serve_gguf, tmp_path):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "botpsy.cli", "serve", "--model", str(serve_gguf), "--port", str(port), "--threads", "1",
         "--n-ctx", "2048", "--temperature", "0", "--max-tokens", "48", "--on-loop", "stop"],
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        health = wait_for_health(url, process)
        assert health["mode"] == "model" and health["model"] == "model-q8_0"
        page = urllib.request.urlopen(url + "/").read().decode()
        assert "<title>botpsy</title>" in page
        client = openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0, timeout=120)
        chunks = list(client.chat.completions.create(model="model-q8_0", stream=True, messages=[
            {"role": "user", "content": "What time is it?"}], extra_body={"enable_thinking": False}))
        assert chunks[0].choices[0].delta.role == "assistant"
        final = [c for c in chunks if c.choices and c.choices[0].finish_reason]
        assert len(final) == 1 and final[0].choices[0].finish_reason in ("stop", "length", "loop")
        assert "loop_detected" in final[0].model_extra["botpsy"]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0


def test_botpsy_serve_refuses_a_missing_model(tmp_path, capsys):
    assert cli_main(["serve", "--model", str(tmp_path / "missing.gguf")]) == 2
    assert "missing.gguf" in capsys.readouterr().err


def test_botpsy_serve_refuses_a_bad_call_threshold_before_loading_a_model(tmp_path, capsys):
    assert cli_main(["serve", "--call-threshold", "2", "--model", str(tmp_path / "missing.gguf")]) == 2
    err = capsys.readouterr().err
    assert "call_threshold must be in [0, 1]" in err and "missing.gguf" not in err
