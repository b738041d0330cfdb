"""Varied conversations for checking the renderer against the official Qwen3.5 template."""

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city <today> & \"tomorrow\"",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "城市名"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
ALARM = {
    "type": "function",
    "function": {
        "name": "set_alarm",
        "description": "Set an alarm.",
        "parameters": {
            "type": "object",
            "properties": {
                "hour": {"type": "integer"},
                "minute": {"type": "integer"},
                "repeat": {"type": "array", "items": {"type": "string"}},
                "enabled": {"type": "boolean"},
                "meta": {"type": "object"},
            },
            "required": ["hour"],
        },
    },
}


def call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


U = lambda text: {"role": "user", "content": text}  # noqa: E731
S = lambda text: {"role": "system", "content": text}  # noqa: E731
T = lambda text: {"role": "tool", "content": text}  # noqa: E731


def A(content="", reasoning=None, calls=None):
    msg = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = calls
    return msg


# (name, messages, tools, add_generation_prompt, enable_thinking)
CONVERSATIONS = [
    ("plain_user", [U("hi")], None, True, True),
    ("system_user", [S("You are helpful."), U("hi")], None, True, True),
    ("no_think", [S("Be brief."), U("hi")], None, True, False),
    ("no_generation_prompt", [U("hi"), A("hello!")], None, False, True),
    ("tools_no_system", [U("weather in Paris?")], [WEATHER], True, True),
    ("tools_system", [S("You are a phone assistant."), U("weather?")], [WEATHER, ALARM], True, True),
    ("tools_empty_system", [S("   "), U("weather?")], [WEATHER], True, False),
    ("whitespace_trim", [S("\n sys \n"), U("  padded  \n")], None, True, True),
    ("unicode", [U("你好，世界 😀 café <b>&amp;</b>")], [WEATHER], True, True),
    (
        "single_call",
        [U("Wake me at 7"), A("", "User wants an alarm.", [call("set_alarm", hour=7, minute=0)])],
        [ALARM],
        False,
        True,
    ),
    (
        "call_with_text",
        [U("Wake me at 7"), A("Sure, setting it.", "Alarm needed.", [call("set_alarm", hour=7)])],
        [ALARM],
        False,
        True,
    ),
    (
        "typed_args",
        [U("alarm"), A("", "x", [call("set_alarm", hour=7, enabled=True, repeat=["mon", "tue"], meta={"k": None, "v": 1.5})])],
        [ALARM],
        False,
        True,
    ),
    (
        "parallel_calls",
        [U("weather in Paris and Rome"), A("", "two cities", [call("get_weather", city="Paris"), call("get_weather", city="Rome", days=3)])],
        [WEATHER],
        False,
        True,
    ),
    (
        "tool_results",
        [
            U("weather in Paris and Rome"),
            A("", "two cities", [call("get_weather", city="Paris"), call("get_weather", city="Rome")]),
            T('{"temp": 20}'),
            T('{"temp": 25, "note": "<sunny> & dry"}'),
        ],
        [WEATHER],
        True,
        True,
    ),
    (
        "tool_then_answer",
        [
            U("weather in Paris"),
            A("", "look it up", [call("get_weather", city="Paris")]),
            T('{"temp": 20}'),
            A("It is 20 degrees.", "Answer from the result."),
        ],
        [WEATHER],
        False,
        True,
    ),
    (
        "reasoning_dropped_before_last_query",
        [U("first"), A("one", "old thoughts"), U("second"), A("two", "new thoughts")],
        None,
        False,
        True,
    ),
    (
        "think_inside_content",
        [U("first"), A("<think>\ninline thoughts\n</think>\n\nanswer one"), U("second")],
        None,
        True,
        True,
    ),
    (
        "think_inside_content_last",
        [U("q"), A("<think>\ninline\n</think>\n\nfinal")],
        None,
        False,
        True,
    ),
    (
        "multi_turn_tools",
        [
            S("sys"),
            U("alarm at 7"),
            A("", "set it", [call("set_alarm", hour=7)]),
            T('{"ok": true}'),
            A("Done.", "report"),
            U("and weather in 北京?"),
            A("", "weather", [call("get_weather", city="北京")]),
            T('{"temp": 3}'),
        ],
        [ALARM, WEATHER],
        True,
        False,
    ),
    (
        "content_parts",
        [{"role": "user", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "part two"}]}],
        None,
        True,
        True,
    ),
    (
        "multiline_value",
        [U("note"), A("", "r", [call("get_weather", city="line one\nline two")])],
        [WEATHER],
        False,
        True,
    ),
    (
        "user_message_of_tool_responses",
        [U("q"), A("", "r", [call("get_weather", city="X")]), U("<tool_response>\n{}\n</tool_response>")],
        [WEATHER],
        True,
        True,
    ),
    ("empty_reasoning_after_query", [U("q"), A("answer")], None, False, True),
    ("json_string_in_content", [U('{"a": "<b>"}'), A('{"ok": "é"}')], None, True, True),
]
