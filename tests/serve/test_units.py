"""The small pieces of ``botpsy serve`` on their own: doctests, stop strings, the fair queue, chunk shapes."""

from __future__ import annotations

import doctest
import threading
import time

import pytest

from botpsy.runtime import loopguard
from botpsy.serve import command as serve_command
from botpsy.serve import protocol, turns
from botpsy.serve.engine import FairSlot, QueueFull
from botpsy.serve.protocol import APIError, ChatRequest, Defaults, ServeLimits, parse_chat
from botpsy.serve.responses import ChatCollector, ChatStream
from botpsy.serve.turns import CallOut, Delta, Finish, StopFilter, plan_turn
from tests.serve.conftest import sse_payloads


@pytest.mark.parametrize("module", [protocol, turns, loopguard, serve_command])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("pieces, stops, out", [
    (["Hello", " wor", "ld"], ["xyz"], "Hello world"),
    (["ab", "cS", "TOP tail"], ["STOP"], "abc"),
    (["a<", "|im", "_end|>b"], ["<|im_end|>"], "a"),
    (["one\n", "\ntwo"], ["\n\n"], "one"),
    (["ST", "ART"], ["STOP"], "START"),
])
def test_stop_filter_holds_back_only_what_could_still_be_a_stop(pieces, stops, out):
    stop = StopFilter(stops)
    text = "".join(stop.feed(piece) for piece in pieces) + stop.flush()
    assert text == out


def test_fair_slot_serves_in_arrival_order_and_skips_cancelled_waiters():
    slot = FairSlot(max_waiting=8)
    order: list[int] = []
    never = threading.Event()
    assert slot.acquire(never)
    gone = threading.Event()

    def wait(i: int, cancelled: threading.Event) -> None:
        if slot.acquire(cancelled):
            order.append(i)
            slot.release()

    threads = []
    for i in range(4):
        threads.append(threading.Thread(target=wait, args=(i, gone if i == 1 else never)))
        threads[-1].start()
        time.sleep(0.05)  # arrive in order
    gone.set()  # waiter 1's client leaves before its turn
    time.sleep(0.1)
    slot.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 2, 3] and slot.status() == {"busy": False, "waiting": 0, "served": 4}


def test_fair_slot_refuses_beyond_its_queue():
    slot = FairSlot(max_waiting=0)
    with pytest.raises(QueueFull):
        slot.acquire(threading.Event())


def request(**body) -> ChatRequest:
    return parse_chat({"messages": [{"role": "user", "content": "hi"}], **body}, ServeLimits(), Defaults())


def test_requests_take_defaults_and_botpsy_extensions():
    chat = request(max_completion_tokens=7, stop="END", chat_template_kwargs={"enable_thinking": False},
                   thinking_budget=32, top_k=5, on_loop="stop")
    assert (chat.max_tokens, chat.stop, chat.enable_thinking, chat.thinking_budget, chat.on_loop) == \
        (7, ["END"], False, 32, "stop")
    assert chat.sampling.top_k == 5 and chat.sampling.temperature == Defaults().sampling.temperature
    developer = parse_chat({"messages": [{"role": "developer", "content": "Be brief."},
                                         {"role": "user", "content": "hi"}]}, ServeLimits(), Defaults())
    assert developer.messages[0]["role"] == "system"


def test_a_call_threshold_per_request_reaches_the_turn_and_the_assistant():
    from botpsy.serve.assistant import AssistantSettings, agent_config
    from botpsy.serve.turns import TurnOptions

    assert request().call_threshold == 0.0
    assert parse_chat({"messages": [{"role": "user", "content": "hi"}]}, ServeLimits(),
                      Defaults(call_threshold=0.4)).call_threshold == 0.4  # `serve --call-threshold`
    gated = request(call_threshold=0.5)
    assert agent_config(gated, AssistantSettings(), TurnOptions()).generation.call_threshold == 0.5
    for bad in (1.5, -0.1, "high", True):
        with pytest.raises(APIError, match="call_threshold must be a number between 0.0 and 1.0"):
            request(call_threshold=bad)


def test_forced_tool_choice_renders_the_start_of_the_call_without_reasoning():
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
             for name in ("a", "b")]
    named = plan_turn(request(tools=tools, tool_choice={"type": "function", "function": {"name": "b"}}))
    assert named.prompt.endswith("</think>\n\n<tool_call>\n<function=b>\n") and not named.thinking
    assert [t["function"]["name"] for t in named.tools] == ["b"]
    required = plan_turn(request(tools=tools, tool_choice="required"))
    assert required.prompt.endswith("<tool_call>\n") and len(required.tools) == 2
    none = plan_turn(request(tools=tools, tool_choice="none"))
    assert none.tools == [] and "<tools>" not in none.prompt and none.prefill == ""


def test_plain_on_base_routes_only_requests_that_offer_no_tools():
    """With the base's template set (`serve --plain-on-base`), a request with no tools, or tool_choice
    none, renders in that template without reasoning; tools or a forced call keep botpsy's format."""
    from botpsy.serve.turns import TurnOptions
    from tests.chat.test_native import HERMES

    tools = [{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}]
    options = TurnOptions(base_template=HERMES)
    plain = plan_turn(request(), options)
    assert plain.on_base and plain.chat_format == "native" and not plain.thinking and plain.tools == []
    assert "<think>" not in plain.prompt and plain.prompt.endswith("<|im_start|>assistant\n")
    assert plan_turn(request(tools=tools, tool_choice="none"), options).on_base
    for kept in (request(tools=tools), request(tools=tools, tool_choice="required")):
        plan = plan_turn(kept, options)
        assert not plan.on_base and plan.chat_format == "botpsy" and plan.tools
    assert not plan_turn(request(), TurnOptions()).on_base  # off by default
    from botpsy.chat.template import RenderError

    refusing = TurnOptions(base_template="{{ raise_exception('a system turn is required') }}")
    with pytest.raises(RenderError, match="a system turn is required"):  # the app answers 400 with it
        plan_turn(request(), refusing)


def test_stream_and_collector_shape_the_same_turn():
    items = [Delta("reasoning", "Think."), Delta("content", "Hi"), CallOut("call-1", "f", {"x": 1}),
             Finish("tool_calls", protocol.usage(5, 3, 1), {"loop_detected": False})]
    stream = ChatStream("id", "m", include_usage=True)
    chunks = sse_payloads("".join(stream.render(item) for item in items))
    assert chunks[-1] == "[DONE]" and chunks[-2]["usage"]["total_tokens"] == 8 and chunks[-2]["choices"] == []
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"
    collector = ChatCollector("id", "m")
    for item in items:
        collector.add(item)
    message = collector.response()["choices"][0]["message"]
    assert message["content"] == "Hi" and message["reasoning_content"] == "Think."
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}
