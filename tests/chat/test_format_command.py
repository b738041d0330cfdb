"""``botpsy format render|parse`` through the real command-line entry point."""

from __future__ import annotations

import io
import json
import sys

import pytest

from botpsy.chat import generation_prompt, render
from botpsy.cli import main

CONVERSATION = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Wake me at 7"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "set_alarm", "arguments": "{\"hour\": 7}"}}]},
        {"role": "tool", "content": "{\"ok\": true}"},
    ],
}
OUTPUT = ("Alarm is set.\n</think>\n\nDone.\n\n<tool_call>\n<function=set_alarm>\n<parameter=hour>\n"
          "07\n</parameter>\n<parameter=label>\n007\n</parameter>\n</function>\n</tool_call><|im_end|>")


def write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("think", [True, False])
def test_render_prints_the_exact_prompt(tmp_path, capsys, standard_tools, think):
    path = write(tmp_path, "conv.json", {**CONVERSATION, "tools": standard_tools})
    assert main(["format", "render", path] + ([] if think else ["--no-think"])) == 0
    printed = capsys.readouterr().out
    assert printed == render(CONVERSATION["messages"], standard_tools, enable_thinking=think)
    assert printed.endswith(generation_prompt(think))


def test_render_reads_stdin_and_can_print_json(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(CONVERSATION)))
    assert main(["format", "render", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"prompt": render(CONVERSATION["messages"])}


def test_parse_prints_json_with_schema_types(tmp_path, capsys, standard_tools):
    out_path, tools_path = write(tmp_path, "out.txt", OUTPUT), write(tmp_path, "tools.json", standard_tools)
    assert main(["format", "parse", out_path, "--tools", tools_path]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "reasoning": "Alarm is set.", "content": "Done.",
        "tool_calls": [{"name": "set_alarm", "arguments": {"hour": 7, "label": "007"}}], "errors": []}


def test_parse_without_tools_guesses_and_reports_errors_as_data(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("<think>\n\n</think>\n\n<tool_call>\nbroken"))
    assert main(["format", "parse", "-", "--no-think"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tool_calls"] == [] and [e["kind"] for e in result["errors"]] == ["truncated_tool_call"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(OUTPUT))
    assert main(["format", "parse"]) == 0
    assert json.loads(capsys.readouterr().out)["tool_calls"][0]["arguments"] == {"hour": "07", "label": "007"}


@pytest.mark.parametrize("files, argv, message", [
    ({}, ["render", "{dir}/missing.json"], "does not exist"),
    ({"c.json": "{not json"}, ["render", "{dir}/c.json"], "not valid JSON"),
    ({"c.json": "[1, 2]"}, ["render", "{dir}/c.json"], "\"messages\" list"),
    ({"c.json": '{"messages": [3]}'}, ["render", "{dir}/c.json"], "message 0 must be an object"),
    ({"c.json": '{"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}'}, ["render", "{dir}/c.json"],
     "\"tools\" must be a list"),
    ({"c.json": '{"messages": [{"role": "assistant", "content": "x", "tool_calls": ["f"]}]}'},
     ["render", "{dir}/c.json"], "tool call that is not an object"),
    ({"c.json": '{"messages": [{"role": "assistant", "content": "hi"}]}'}, ["render", "{dir}/c.json"],
     "no user query"),
    ({}, ["parse", "{dir}/missing.txt"], "does not exist"),
    ({"o.txt": "x", "t.json": '{"tools": 5}'}, ["parse", "{dir}/o.txt", "--tools", "{dir}/t.json"],
     "list of tool objects"),
    ({"o.bin": b"\xff\xfe\x00"}, ["parse", "{dir}/o.bin"], "not UTF-8"),
])
def test_bad_input_files_give_one_error_line_and_exit_2(tmp_path, capsys, files, argv, message):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    assert main(["format"] + [arg.format(dir=tmp_path) for arg in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("botpsy format: error: ") and message in captured.err
    assert captured.err.count("\n") == 1
