"""The generation driver on the scripted backend: parsing, loop policies, thinking budget, cap hits."""

from __future__ import annotations

import pytest

from botpsy.chat.stream import ContentDelta, ReasoningDelta, ToolCallEnd
from botpsy.chat.template import generation_prompt
from botpsy.runtime.backend import SamplingConfig
from botpsy.runtime.generate import (
    BudgetReached,
    Finished,
    GenerateConfig,
    LoopDetected,
    chat_prompt,
    generate,
    generate_stream,
)
from botpsy.runtime.scripted import ScriptedBackend

PROMPT = "<|im_start|>user\nWake me at 7.<|im_end|>\n" + generation_prompt(True)
NO_THINK_PROMPT = "<|im_start|>user\nWake me at 7.<|im_end|>\n" + generation_prompt(False)
LOOP = "Let me check the alarm list once more. " * 30  # 9 tokens per copy, far past the guard's 64
TOOLS = [{"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.", "parameters": {
    "type": "object", "properties": {"hour": {"type": "integer"}}, "required": ["hour"]}}}]


def run(scripts, **config):
    backend = ScriptedBackend(scripts)
    return backend, generate(backend, config.pop("prompt", PROMPT), GenerateConfig(**config))


def test_plain_turn_is_parsed_and_counted():
    script = ("The user wants an alarm at 7.\n</think>\n\nSetting it.\n\n<tool_call>\n<function=set_alarm>\n"
              "<parameter=hour>\n7\n</parameter>\n</function>\n</tool_call><|im_end|>")
    backend = ScriptedBackend([script])
    events = list(generate_stream(backend, PROMPT, GenerateConfig(), tools=TOOLS))
    result = events[-1].result
    assert result.finish_reason == "stop" and not result.loop_detected and not result.budget_hit
    assert result.reasoning == "The user wants an alarm at 7."
    assert result.content == "Setting it."
    assert [(c.name, c.arguments) for c in result.parsed.tool_calls] == [("set_alarm", {"hour": 7})]
    assert result.completion_tokens == len(backend.tokenize(script))
    assert result.reasoning_tokens == len(backend.tokenize("The user wants an alarm at 7.\n</think>"))
    assert result.text == script[: -len("<|im_end|>")]
    assert result.prompt_tokens == len(backend.tokenize(PROMPT)) and result.backend_calls == 1
    kinds = [type(e) for e in events]
    assert kinds.index(ReasoningDelta) < kinds.index(ContentDelta) < kinds.index(ToolCallEnd) < kinds.index(Finished)
    assert isinstance(events[-1], Finished) and kinds.count(Finished) == 1


def test_loop_stop_policy_ends_the_turn_early():
    backend, result = run(["Thinking. " + LOOP + "Never reached.<|im_end|>"], on_loop="stop")
    assert result.finish_reason == "loop"
    assert (result.loop_detected, result.loop_kind, result.loop_where) == (True, "repeat", "reasoning")
    assert result.loop_period == 9
    assert result.completion_tokens < 100 < len(backend.tokenize(LOOP))
    assert len(backend.calls) == 1 and "Never" not in result.text


def test_recover_closes_the_reasoning_and_lets_the_model_answer():
    backend, result = run(["Thinking. " + LOOP, "It is set for 7.<|im_end|>"], on_loop="recover")
    assert result.finish_reason == "stop" and result.loop_where == "reasoning"
    assert backend.calls[1].prompt.endswith("\n</think>\n\n")
    assert backend.calls[1].prompt.startswith(PROMPT)
    assert result.content == "It is set for 7." and result.reasoning.startswith("Thinking. Let me check")
    assert result.injected_tokens == len(backend.tokenize("\n</think>\n\n"))
    assert [e["action"] for e in result.loop_events] == ["recover"]


def test_recover_stops_on_a_loop_in_the_answer():
    backend, result = run(["Short thought.\n</think>\n\n" + LOOP, "unused"], on_loop="recover")
    assert result.finish_reason == "loop" and result.loop_where == "answer"
    assert len(backend.calls) == 1


def test_resample_cuts_back_to_the_first_copy_and_raises_penalties():
    backend, result = run(["Thinking. " + LOOP, "A new idea.\n</think>\n\nDone.<|im_end|>"],
                          on_loop="resample", sampling=SamplingConfig(temperature=0.0, seed=5))
    assert result.finish_reason == "stop" and result.resamples == 1 and result.loop_detected
    assert result.reasoning.count("Let me check the alarm list once more") == 1, "later copies are dropped"
    assert result.reasoning.endswith("A new idea.")
    second = backend.calls[1]
    assert second.sampling.repeat_penalty == 1.3 and second.sampling.presence_penalty == 0.5
    assert second.sampling.seed == 6
    assert second.prompt == PROMPT + result.text[: result.text.index("A new idea.")]
    assert result.dropped_tokens == result.loop_events[0]["dropped_tokens"] > 0
    assert result.content == "Done."


def test_resample_gives_up_after_max_resamples():
    backend, result = run(["Thinking. " + LOOP] * 3, on_loop="resample", max_resamples=2)
    assert result.finish_reason == "loop" and result.resamples == 2
    assert [e["action"] for e in result.loop_events] == ["resample", "resample", "stop"]
    assert len(backend.calls) == 3


def test_observe_records_the_loop_and_runs_to_the_end():
    script = "Thinking. " + LOOP + "\n</think>\n\nOK.<|im_end|>"
    backend, result = run([script], on_loop="observe")
    assert result.finish_reason == "stop" and result.loop_detected and result.loop_period == 9
    assert result.text == script[: -len("<|im_end|>")]
    assert result.content == "OK." and len(backend.calls) == 1


def test_thinking_budget_closes_at_a_sentence_end():
    reasoning = "First I look at the request and the time asked for. Then I check the list of alarms here"
    backend, result = run([reasoning + " and more words follow without an end", "Set for 7.<|im_end|>"],
                          thinking_budget=5)
    assert result.budget_hit and result.finish_reason == "stop"
    assert result.reasoning == "First I look at the request and the time asked for."
    assert result.content == "Set for 7."
    assert backend.calls[1].prompt.endswith("asked for.\n</think>\n\n")


def test_thinking_budget_closes_hard_after_the_slack():
    words = " word" * 100
    backend, result = run([words, "Answer.<|im_end|>"], thinking_budget=10, budget_slack=5)
    assert result.budget_hit and result.reasoning_tokens == 15
    assert result.reasoning == words[: 15 * 5].strip() and result.content == "Answer."


def test_budget_events_and_no_budget_after_the_reasoning_closed():
    script = "Brief.\n</think>\n\n" + "Plenty of answer text here. " * 10 + "<|im_end|>"
    events = list(generate_stream(ScriptedBackend([script]), PROMPT, GenerateConfig(thinking_budget=4)))
    assert not any(isinstance(e, BudgetReached) for e in events)
    assert events[-1].result.finish_reason == "stop" and not events[-1].result.budget_hit


def test_cap_hit_is_length():
    backend, result = run(["Thinking on and on about many different things " * 20], max_tokens=25)
    assert result.finish_reason == "length" and result.completion_tokens == 25
    assert result.parsed.errors and result.parsed.errors[0].kind  # the reasoning never closed


def test_thinking_off_prompt_treats_everything_as_answer():
    backend, result = run([LOOP], prompt=NO_THINK_PROMPT, on_loop="stop")
    assert result.loop_where == "answer" and result.reasoning_tokens == 0 and result.reasoning == ""


def test_closing_the_event_stream_closes_the_backend_stream():
    closed = []

    class Watched(ScriptedBackend):
        def _stream(self, *args):
            try:
                yield from super()._stream(*args)
            finally:
                closed.append(True)

    events = generate_stream(Watched(["one two three four five"]), PROMPT)
    assert isinstance(next(events), ReasoningDelta)
    events.close()
    assert closed == [True]


def test_loop_events_are_streamed_before_the_result():
    events = list(generate_stream(ScriptedBackend(["Hm. " + LOOP, "Fine.<|im_end|>"]), PROMPT))
    detected = [e for e in events if isinstance(e, LoopDetected)]
    assert len(detected) == 1 and detected[0].action == "recover" and detected[0].loop.period == 9


def test_chat_prompt_prefix_is_cached_per_turn():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Wake me at 7."}]
    prompt, prefix = chat_prompt(messages, TOOLS)
    assert prompt.startswith(prefix) and "<tools>" in prefix and prefix.endswith("<|im_end|>\n")
    backend = ScriptedBackend(["Done.\n</think>\n\nOK.<|im_end|>"])
    generate(backend, prompt, cache_prefix=prefix)
    assert backend.calls[0].prefix_tokens == len(backend.tokenize(prefix))
    with pytest.raises(ValueError, match="beginning of the prompt"):
        generate(backend, prompt, cache_prefix="not the start")


def test_config_rejects_unknown_policy():
    with pytest.raises(ValueError, match="on_loop"):
        GenerateConfig(on_loop="retry")
