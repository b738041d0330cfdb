"""``botpsy eval --plain-on-base``: turns offered no tools run on the base alone, turns with tools on the adapter.

The tiny Qwen2 student's LoRA adapter is written against a copy of its base that carries a Hermes chat
template (as the registry's Qwen2.5 bases do), so the routed turns also go through the base's own format.
Each routed record is checked against the record of the model it was routed to, run on its own.
"""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def routed_files(student_sft, qwen2_gguf, tiny_tokenizer, tmp_path_factory):
    """(adapter GGUF on a Hermes-template base, that base file)."""
    from botpsy.export.gguf_writer import write_gguf
    from botpsy.export.lora_gguf import write_lora_gguf
    from tests.chat.test_native import HERMES

    folder = tmp_path_factory.mktemp("routed")
    base = write_gguf(qwen2_gguf[1], tiny_tokenizer, folder / "hermes-base.gguf", name="tiny-hermes",
                      chat_template=HERMES)
    write_lora_gguf(student_sft, folder / "model-lora.gguf", base=str(base))
    return folder / "model-lora.gguf", base


@pytest.fixture
def switches(monkeypatch) -> list[bool]:
    """What the code under test asks of the real llama.cpp backend's ``use_adapter``, in order."""
    from botpsy.runtime.llama_backend import LlamaBackend

    calls: list[bool] = []
    real = LlamaBackend.use_adapter

    def spy(self, on: bool) -> None:
        calls.append(on)
        real(self, on)
    monkeypatch.setattr(LlamaBackend, "use_adapter", spy)
    return calls


def _records(out, label: str, suite: str) -> list[dict]:
    return [json.loads(line) for line in (out / label / f"{suite}.jsonl").read_text().splitlines()]


def test_tool_less_items_are_answered_by_the_base_and_tool_items_by_the_adapter(routed_files, tmp_path, switches):
    from botpsy.cli import main as cli_main

    adapter, base = routed_files
    out = tmp_path / "eval"
    common = ["--suite", "device,ifeval", "--limit", "2", "--max-tokens", "24", "--threads", "1", "--out", str(out)]
    assert cli_main(["eval", "--model", str(adapter), "--label", "adapter", *common]) == 0
    assert cli_main(["eval", "--model", str(base), "--label", "base", *common]) == 0
    assert cli_main(["eval", "--model", str(adapter), "--label", "routed", "--plain-on-base", *common]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["plain_on_base"] == {"routed": True} and summary["chat_format"] == {"routed": "botpsy"}

    assert switches == [True] * 2 + [False] * 2  # the device suite runs first, then IFEval
    ifeval = {label: _records(out, label, "ifeval") for label in ("adapter", "base", "routed")}
    prompt_tokens = {label: [r["generations"][0]["prompt_tokens"] for r in ifeval[label]] for label in ifeval}
    assert prompt_tokens["routed"] == prompt_tokens["base"] != prompt_tokens["adapter"]  # the base's own template
    assert [r["raw"] for r in ifeval["routed"]] == [r["raw"] for r in ifeval["base"]]
    def steps(label):
        return [[{k: v for k, v in step.items() if not k.endswith("_ms")} for step in r["steps"]]
                for r in _records(out, label, "device")]
    assert steps("routed") == steps("adapter")  # device tasks offer tools: the adapter, in botpsy's format
    stamp = json.loads((out / "routed" / "model.json").read_text())["fingerprint"]
    assert '"plain_on_base": true' in stamp  # routed records never mix with the adapter's own
    assert "plain_on_base" not in json.loads((out / "adapter" / "model.json").read_text())["fingerprint"]


def test_plain_on_base_refuses_a_model_without_an_adapter(routed_files, tmp_path, capsys):
    from botpsy.cli import main as cli_main

    _, base = routed_files
    assert cli_main(["eval", "--model", str(base), "--plain-on-base", "--suite", "ifeval", "--limit", "1",
                     "--out", str(tmp_path / "eval")]) == 2
    assert "needs a LoRA adapter GGUF" in capsys.readouterr().err


def test_the_server_answers_a_request_without_tools_on_the_base_and_one_with_tools_on_the_adapter(
        routed_files, switches):
    """`botpsy serve --plain-on-base`, built from its flags, on the real llama.cpp backend: the base's own
    template and the adapter off for a plain request, the adapter on for the next request with tools."""
    from botpsy.chat.native import ChatFormat
    from botpsy.runtime.backend import BackendOptions, SamplingConfig
    from botpsy.runtime.generate import GenerateConfig, generate
    from botpsy.runtime.llama_backend import LlamaBackend
    from botpsy.serve.app import create_app
    from botpsy.serve.command import RunningServer, ServeConfig, build_state
    from tests.serve.test_protocol import post

    adapter, base = routed_files
    tool = {"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.",
                                             "parameters": {"type": "object", "properties": {}}}}
    question = {"messages": [{"role": "user", "content": "Set an alarm for 7."}], "max_tokens": 8, "temperature": 0}
    with LlamaBackend(base, BackendOptions(threads=1, n_ctx=1024)) as plain:  # what the base alone answers
        prompt, _ = ChatFormat.own(plain.chat_template()).prompt(question["messages"], None, enable_thinking=False)
        expected = generate(plain, prompt, GenerateConfig(max_tokens=8, sampling=SamplingConfig(temperature=0.0),
                                                          chat_format="native"))
    with LlamaBackend(adapter, BackendOptions(threads=1, n_ctx=1024)) as backend:
        state = build_state(ServeConfig(model=str(adapter), plain_on_base=True), backend)
        with RunningServer(create_app(state)) as server:
            status, answer = post(server.url + "/v1/chat/completions", question)
            assert status == 200 and answer["botpsy"]["answered_by"] == "base"
            assert answer["usage"]["prompt_tokens"] == expected.prompt_tokens  # the base's own template
            assert answer["choices"][0]["message"]["content"] == expected.content
            status, with_tools = post(server.url + "/v1/chat/completions", {**question, "tools": [tool]})
            assert status == 200 and "answered_by" not in with_tools["botpsy"]
    assert switches == [False, True]


def test_the_server_refuses_plain_on_base_without_an_adapter(routed_files):
    from botpsy.config import ConfigError
    from botpsy.runtime.backend import BackendOptions
    from botpsy.runtime.llama_backend import LlamaBackend
    from botpsy.serve.command import ServeConfig, build_state

    _, base = routed_files
    with LlamaBackend(base, BackendOptions(threads=1, n_ctx=512)) as plain:
        with pytest.raises(ConfigError, match="needs a LoRA adapter GGUF"):
            build_state(ServeConfig(model=str(base), plain_on_base=True), plain)
