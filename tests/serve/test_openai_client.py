"""The official ``openai`` client against ``botpsy serve`` on 127.0.0.1 with the tiny GGUF (model mode)."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from botpsy.runtime.backend import SamplingConfig
from botpsy.runtime.generate import GenerateConfig, generate
from botpsy.runtime.openai_backend import OpenAIBackend

ALARM = {"type": "function", "function": {
    "name": "set_alarm", "description": "Set an alarm.",
    "parameters": {"type": "object", "properties": {
        "day": {"type": "string", "enum": ["today", "tomorrow"]},
        "loud": {"type": "boolean"}}, "required": ["day", "loud"]}}}
WIFI = {"type": "function", "function": {
    "name": "set_wifi", "description": "Turn Wi-Fi on or off.",
    "parameters": {"type": "object", "properties": {"enabled": {"type": "boolean"}}, "required": ["enabled"]}}}
ASK = [{"role": "user", "content": "Wake me up tomorrow, loudly."}]


@pytest.fixture(scope="module")
def client(gguf_server):
    return openai.OpenAI(base_url=gguf_server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def extension(response) -> dict:
    return response.model_extra["botpsy"]


def test_models_and_health(client, gguf_server):
    assert [m.id for m in client.models.list().data] == ["tiny"]
    import urllib.request

    health = json.loads(urllib.request.urlopen(gguf_server.url + "/health").read())
    assert health["status"] == "ok" and health["mode"] == "model" and health["n_ctx"] == 2048


def test_non_streaming_chat_reports_finish_usage_and_the_loop_stop(client):
    response = client.chat.completions.create(model="tiny", messages=ASK, max_tokens=200,
                                              extra_body={"on_loop": "stop", "enable_thinking": False})
    choice = response.choices[0]
    # The untrained model writes line breaks forever: the guard stops it, and says so.
    assert choice.finish_reason == "loop" and choice.message.role == "assistant"
    info = extension(response)
    assert info["loop_detected"] and info["loop"]["kind"] == "repeat" and info["loop"]["period"] == 1
    assert info["loop"]["where"] == "answer" and info["loop"]["action"] == "stop"
    assert 0 < response.usage.completion_tokens < 200 and response.usage.prompt_tokens > 10
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens


def test_streaming_chat_matches_the_non_streaming_response(client):
    kwargs = dict(model="tiny", messages=ASK, max_tokens=120, temperature=0)
    whole = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert content.strip() == (whole.choices[0].message.content or "")
    assert reasoning.strip() == whole.choices[0].message.model_extra["reasoning_content"]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    # The loop-guard event is streamed when it happens, and the turn's end says what it did.
    events = [c.model_extra["botpsy"] for c in chunks if (c.model_extra or {}).get("botpsy", {}).get("event") == "loop"]
    assert events and events[0]["where"] == "reasoning" and events[0]["period"] == 1
    assert chunks[-2].model_extra["botpsy"]["loop"]["action"] == events[0]["action"]


@pytest.mark.parametrize("tool_choice", [{"type": "function", "function": {"name": "set_alarm"}}, "required"])
def test_forced_tool_call_is_constrained_valid_and_streams_as_deltas(client, tool_choice):
    kwargs = dict(model="tiny", messages=ASK, tools=[ALARM, WIFI], tool_choice=tool_choice, max_tokens=80)
    whole = client.chat.completions.create(**kwargs)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls", extension(whole)
    call = choice.message.tool_calls[0]
    schema = {t["function"]["name"]: t["function"]["parameters"] for t in (ALARM, WIFI)}
    if isinstance(tool_choice, dict):
        assert call.function.name == "set_alarm"
    jsonschema.validate(json.loads(call.function.arguments), schema[call.function.name])
    assert call.id.startswith("call-") and call.type == "function"

    deltas = [c.choices[0].delta for c in client.chat.completions.create(**kwargs, stream=True) if c.choices]
    calls = [d.tool_calls[0] for d in deltas if d.tool_calls]
    assert calls[0].id and calls[0].function.name == call.function.name and calls[0].function.arguments == ""
    assert len(calls) >= 3  # the header, then the arguments in fragments
    assert "".join(c.function.arguments for c in calls) == call.function.arguments


def test_tool_choice_none_and_auto_with_tools_answer_or_call(client):
    response = client.chat.completions.create(model="tiny", messages=ASK, tools=[ALARM], tool_choice="none",
                                              max_tokens=40)
    assert response.choices[0].message.tool_calls is None


def test_completions_endpoint_streams_the_same_text(client):
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    whole = client.completions.create(model="tiny", prompt=prompt, max_tokens=30, temperature=0,
                                      extra_body={"on_loop": "observe"})
    parts = [c.choices[0].text for c in client.completions.create(model="tiny", prompt=prompt, max_tokens=30,
                                                                  temperature=0, stream=True,
                                                                  extra_body={"on_loop": "observe"}) if c.choices]
    assert "".join(parts) == whole.choices[0].text and whole.choices[0].finish_reason == "length"
    assert whole.usage.completion_tokens == 30


def test_botpsy_openai_backend_through_the_server_generates_what_the_local_backend_does(gguf_server, llama_model):
    """The eval path: ``botpsy eval --model http://.../v1`` drives the same greedy turn as the GGUF in process."""
    prompt = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWake me at 7.<|im_end|>\n" \
             "<|im_start|>assistant\n<think>\n"
    config = GenerateConfig(max_tokens=90, sampling=SamplingConfig(temperature=0), on_loop="observe")
    prefix = "<|im_start|>system\nBe brief.<|im_end|>\n"
    local = generate(llama_model, prompt, config, cache_prefix=prefix)
    # The client runs its own guard (observing, as evaluation does), so the server's only observes too.
    remote_backend = OpenAIBackend(gguf_server.url + "/v1", model="tiny", extra_body={"on_loop": "observe"})
    remote = generate(remote_backend, prompt, config)
    assert remote.text == local.text and remote.finish_reason == local.finish_reason == "length"
    assert remote.loop_detected and local.loop_detected

    stopped = generate(OpenAIBackend(gguf_server.url + "/v1", model="tiny"), prompt, config)
    assert len(stopped.text) < len(local.text)  # the server's own guard (default: stop) ends a raw loop


def test_a_prompt_longer_than_the_context_is_refused_before_it_is_queued(client):
    too_long = [{"role": "user", "content": " ".join(f"word{i}" for i in range(3000))}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny", messages=too_long, max_tokens=10)
    assert caught.value.body["code"] == "context_length_exceeded" and "2048" in caught.value.body["message"]
