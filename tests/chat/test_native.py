"""A base model's own format: its template rendered, its calls read leniently, chosen automatically."""

from __future__ import annotations

import json

import pytest

from botpsy.chat.native import ChatFormat, parse_lenient, render_native

# A short Hermes-style template of the kind pretrained instruct models carry (written for this test).
HERMES = (
    "{%- if tools %}{{ '<|im_start|>system\\nTools:' }}{%- for tool in tools %}{{ '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{ '\\nCall them as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call><|im_end|>\\n' }}{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'tool' %}{{ '<|im_start|>user\\n<tool_response>\\n' + m.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- elif m.tool_calls %}{{ '<|im_start|>assistant' }}{%- for c in m.tool_calls %}"
    "{{ '\\n<tool_call>\\n{\"name\": \"' + c.function.name + '\", \"arguments\": ' + (c.function.arguments | tojson) + '}\\n</tool_call>' }}"
    "{%- endfor %}{{ '<|im_end|>\\n' }}"
    "{%- else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.", "parameters": {
    "type": "object", "properties": {"time": {"type": "string"}, "repeat": {"type": "boolean"}}, "required": ["time"]}}}]


def test_the_native_template_renders_tools_calls_and_results():
    messages = [{"role": "user", "content": "Wake me at 7"},
                {"role": "assistant", "content": None, "reasoning_content": "dropped",
                 "tool_calls": [{"type": "function", "function": {"name": "set_alarm", "arguments": '{"time": "07:00"}'}}]},
                {"role": "tool", "content": '{"ok": true}'}]
    prompt = render_native(HERMES, messages, TOOLS)
    assert '"name": "set_alarm"' in prompt.split("<|im_end|>")[0]  # the tool's JSON in the system turn
    assert '{"name": "set_alarm", "arguments": {"time": "07:00"}}' in prompt  # string arguments became an object
    assert "<tool_response>\n{\"ok\": true}\n</tool_response>" in prompt and "dropped" not in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_a_template_that_fails_is_a_clear_error():
    with pytest.raises(ValueError, match="chat template failed to render: no tools"):
        render_native("{{ raise_exception('no tools') }}", [{"role": "user", "content": "hi"}], None)
    with pytest.raises(ValueError, match="no chat template"):
        ChatFormat.native("")


@pytest.mark.parametrize(("text", "calls"), [
    ('<tool_call>\n{"name": "set_alarm", "arguments": {"time": "07:00"}}\n</tool_call>', [("set_alarm", {"time": "07:00"})]),
    ('Sure!\n```json\n{"name": "set_alarm", "arguments": {"time": "07:00", "repeat": true}}\n```',
     [("set_alarm", {"time": "07:00", "repeat": True})]),
    ('```\n[{"name": "set_alarm", "parameters": {"time": "07:00"}}, {"name": "set_alarm", "arguments": "{\\"time\\": \\"08:00\\"}"}]\n```',
     [("set_alarm", {"time": "07:00"}), ("set_alarm", {"time": "08:00"})]),
    ('{"type": "function", "function": {"name": "set_alarm", "arguments": {"time": "07:00"}}}', [("set_alarm", {"time": "07:00"})]),
    ('<think>\nThe user wants an alarm.\n</think>\n\n{"name": "set_alarm", "arguments": {"time": "07:00"}}', [("set_alarm", {"time": "07:00"})]),
    ("<tool_call>\n<function=set_alarm>\n<parameter=time>\n07:00\n</parameter>\n</function>\n</tool_call>", [("set_alarm", {"time": "07:00"})]),
])
def test_calls_are_read_the_ways_pretrained_models_write_them(text, calls):
    parsed = parse_lenient(text, TOOLS)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == calls and parsed.ok


@pytest.mark.parametrize("text", ["It is 7 o'clock.", '```json\n{"temperature": 21}\n```', "```python\nprint('hi')\n```"])
def test_answers_and_data_are_not_calls(text):
    parsed = parse_lenient(text, TOOLS)
    assert parsed.tool_calls == [] and parsed.content == text.strip()


def test_a_broken_call_is_an_error_not_a_crash():
    parsed = parse_lenient('<tool_call>\n{"name": "set_alarm", "arguments": {"time": }\n</tool_call>', TOOLS)
    assert not parsed.tool_calls and parsed.errors[0].kind == "bad_json"


def test_the_harness_picks_the_native_format_for_a_foreign_template():
    from botpsy.eval.harness import chat_format_for
    from botpsy.model.tokenizer import CHAT_TEMPLATE
    from botpsy.runtime.scripted import ScriptedBackend

    class WithTemplate(ScriptedBackend):
        def __init__(self, template):
            super().__init__(["hi"])
            self.template = template

        def chat_template(self):
            return self.template

    assert chat_format_for(WithTemplate(HERMES), "auto") == "native"
    assert chat_format_for(WithTemplate(CHAT_TEMPLATE), "auto") == "botpsy"
    assert chat_format_for(WithTemplate(""), "auto") == "botpsy"
    assert chat_format_for(WithTemplate(HERMES), "botpsy") == "botpsy"


def test_a_native_generation_reads_calls_leniently_and_is_not_constrained():
    from botpsy.runtime.generate import GenerateConfig, generate
    from botpsy.runtime.scripted import ScriptedBackend

    text = '```json\n{"name": "set_alarm", "arguments": {"time": "07:00"}}\n```<|im_end|>'
    result = generate(ScriptedBackend([text]), render_native(HERMES, [{"role": "user", "content": "7am"}], TOOLS),
                      GenerateConfig(max_tokens=64, chat_format="native"), tools=TOOLS)
    assert [(c.name, c.arguments) for c in result.parsed.tool_calls] == [("set_alarm", {"time": "07:00"})]
    assert result.reasoning == "" and result.finish_reason == "stop"


def test_doctests():
    import doctest

    import botpsy.chat.native as native

    assert doctest.testmod(native).failed == 0


def test_bfcl_reads_a_native_answer_leniently():
    from botpsy.eval.bfcl import bfcl_items
    from botpsy.eval.bfcl.scoring import score_item

    item = bfcl_items(["simple_python"], limit=1)[0]
    truth = item.ground_truth[0]
    name, options = next(iter(truth.items()))
    arguments = {k: v[0] for k, v in options.items() if v and v[0] != ""}
    fenced = f'```json\n{{"name": "{name}", "arguments": {json.dumps(arguments)}}}\n```'
    assert score_item(item, fenced, native=True).valid
    assert not score_item(item, fenced).valid  # botpsy's strict reader wants its own format
    irrelevant = bfcl_items(["irrelevance"], limit=1)[0]
    assert score_item(irrelevant, "I cannot do that with these tools.", native=True).valid


def test_the_system_turn_with_the_tools_is_the_cacheable_prefix():
    from botpsy.chat.native import native_prefix

    messages = [{"role": "system", "content": "You are a phone assistant."}, {"role": "user", "content": "Wake me at 7"}]
    prompt = render_native(HERMES, messages, TOOLS)
    prefix = native_prefix(HERMES, messages, TOOLS, prompt)
    assert prefix.endswith("You are a phone assistant.<|im_end|>\n") and '"set_alarm"' in prefix
    assert prompt.startswith(prefix) and "Wake me" not in prefix
    # the next turn of the same episode shares it
    later = messages + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "thanks"}]
    assert native_prefix(HERMES, later, TOOLS, render_native(HERMES, later, TOOLS)) == prefix
    # no system turn, or a template whose system render is not the prompt's beginning: nothing cached
    assert native_prefix(HERMES, messages[1:], TOOLS, render_native(HERMES, messages[1:], TOOLS)) == ""
    assert native_prefix(HERMES, messages, TOOLS, "something else") == ""


def test_the_eval_suites_native_prompts_carry_the_same_prefix():
    """Suites render through ChatFormat: a base model's episode restores its tools block every turn there too."""
    from botpsy.chat.native import ChatFormat, native_prefix

    messages = [{"role": "system", "content": "You are a phone assistant."}, {"role": "user", "content": "Wake me at 7"}]
    prompt, prefix = ChatFormat.native(HERMES).prompt(messages, TOOLS, enable_thinking=False)
    assert prompt == render_native(HERMES, messages, TOOLS)
    assert prefix and prefix == native_prefix(HERMES, messages, TOOLS, prompt)
