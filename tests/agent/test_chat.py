"""``botpsy chat``: one-shot JSON, confirmation policy, clear model errors, and a real pty session."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from botpsy.agent.chat import ChatConfig, ChatSession, Display, main
from botpsy.agent.loop import Agent
from botpsy.agent.show import Style
from botpsy.runtime.scripted import ScriptedBackend
from botpsy.world import World
from tests.agent.conftest import call, turn

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def write_replies(path: Path, replies: list[str]) -> str:
    path.write_text(json.dumps(replies))
    return f"scripted:{path}"


def contact_of(db: Path) -> str:
    world = World(str(db))
    contact = world.read("SELECT id FROM contacts ORDER BY id LIMIT 1")[0]["id"]
    world.close()
    return contact


def state(db: Path) -> dict:
    world = World(str(db))
    snapshot = world.snapshot(full=True)
    world.close()
    return snapshot


def test_one_shot_json_prints_steps_and_answer(tmp_path, capsys):
    model = write_replies(tmp_path / "r.json", [turn("", call("set_alarm", time="07:00")), turn("Alarm set for 7.")])
    code = main(ChatConfig(request="set an alarm for 7", model=model, db=str(tmp_path / "d.sqlite"), json=True))
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["answer"] == "Alarm set for 7." and record["stop_reason"] == "answer"
    assert [s["type"] for s in record["steps"]] == ["model", "tool", "model", "final"]
    assert record["steps"][1]["result"]["time"] == "07:00"
    assert record["stats"]["tool_calls"] == 1 and record["sensitive_calls"] == "declined"
    alarms = state(tmp_path / "d.sqlite")["alarms"]
    assert any(row["time"] == "07:00" for row in alarms.values())


@pytest.mark.parametrize("yes", [False, True])
def test_one_shot_declines_sensitive_calls_unless_yes(tmp_path, capsys, yes):
    db = tmp_path / "d.sqlite"
    World(str(db)).close()
    contact, before = contact_of(db), state(db)
    model = write_replies(tmp_path / "r.json", [turn("", call("send_message", contact_id=contact, text="hi")),
                                                turn("Done.")])
    main(ChatConfig(request="text them hi", model=model, db=str(db), json=True, yes=yes))
    record = json.loads(capsys.readouterr().out)
    confirmation = next(s for s in record["steps"] if s["type"] == "confirmation")
    assert confirmation["approved"] is yes
    assert (state(db) == before) is not yes


def test_the_call_threshold_reaches_generation_and_a_bad_one_fails_before_the_model_loads(tmp_path):
    from botpsy.agent.chat import agent_config

    assert agent_config(ChatConfig(call_threshold=0.5)).generation.call_threshold == 0.5
    with pytest.raises(ValueError, match="call_threshold"):
        main(ChatConfig(request="hi", model=str(tmp_path / "none.gguf"), call_threshold=1.5))


def test_missing_and_corrupt_models_get_a_clear_message(tmp_path, capsys):
    assert main(ChatConfig(request="hi", model=str(tmp_path / "none.gguf"), db=str(tmp_path / "d.sqlite"))) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    assert main(ChatConfig(request="hi", model=str(bad), db=str(tmp_path / "d.sqlite"))) == 2
    err = capsys.readouterr().err
    assert "bad.gguf" in err and "Traceback" not in err
    assert main(ChatConfig(request="hi", model=write_replies(tmp_path / "r.json", []) + "x",
                           db=str(tmp_path / "d.sqlite"))) == 2


def test_a_file_that_is_not_a_device_database_is_refused(tmp_path):
    db = tmp_path / "notes.txt"
    db.write_text("not a database" * 100)
    model = write_replies(tmp_path / "r.json", [turn("Hi.")])
    with pytest.raises(ValueError, match="not a botpsy device database"):
        main(ChatConfig(request="hi", model=model, db=str(db)))


def test_session_commands_and_approval(tmp_path):
    world = World(":memory:", seed=3)
    contact = world.read("SELECT id FROM contacts ORDER BY id LIMIT 1")[0]["id"]
    backend = ScriptedBackend([turn("", call("send_message", contact_id=contact, text="hi")), turn("Sent.")])
    answers = iter(["y"])
    out = _Buffer()
    session = ChatSession(Agent(backend, world), Display(out, Style(), show_thinking=False),
                          read=lambda prompt: out.echo(prompt, next(answers)))
    session.ask("text them hi")
    text = out.getvalue()
    assert "allow it? [y/N] y" in text and "[approved]" in text and '"sent"' in text
    assert "(thinking..." in text and "Let me think" not in text  # reasoning hidden
    for command in ("/tools", "/state", "/stats", "/think on", "/nonsense"):
        assert session.command(command)
    text = out.getvalue()
    assert "* send_message" in text and "settings: wifi=" in text and "completion_tokens" in text
    assert "reasoning is shown" in text and "/quit" in text
    assert not session.command("/quit")


class _Buffer:
    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def echo(self, prompt, answer):
        self.parts.append(prompt + answer + "\n")
        return answer

    def getvalue(self):
        return "".join(self.parts)


# ---- a real terminal -------------------------------------------------------------------------


class Terminal:
    """``botpsy chat`` on a pseudo-terminal: send keystrokes, wait for text (ANSI codes kept in ``raw``)."""

    def __init__(self, args: list[str]):
        master, slave = os.openpty()
        env = {**os.environ, "TERM": "xterm", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "botpsy.cli", "chat", *args], stdin=slave, stdout=slave,
                                     stderr=slave, cwd=ROOT, env=env, close_fds=True)
        os.close(slave)
        self.master, self.raw = master, ""

    def expect(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        while text not in ANSI.sub("", self.raw):
            left = deadline - time.time()
            if left <= 0 or self.proc.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                raise AssertionError(f"did not see {text!r}; screen:\n{ANSI.sub('', self.raw)[-2000:]}")
            if select.select([self.master], [], [], min(left, 0.2))[0]:
                try:
                    self.raw += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:  # the child closed the terminal
                    pass

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=30)
        finally:
            os.close(self.master)


def test_declining_in_a_real_terminal_leaves_the_database_unchanged(tmp_path):
    db = tmp_path / "device.sqlite"
    World(str(db), seed=5).close()
    contact, before = contact_of(db), state(db)
    model = write_replies(tmp_path / "r.json", [
        turn("", call("send_message", contact_id=contact, text="I'm running late"),
             reasoning="The user wants to text their contact."),
        turn("OK, I did not send it."),
    ])
    term = Terminal(["--model", model, "--db", str(db)])
    term.expect("you> ")
    term.send("tell them I'm running late")
    term.expect("allow it? [y/N]")
    assert "\x1b[2mthinking: " in term.raw  # reasoning streams dimmed on a terminal
    term.send("n")
    term.expect("assistant: OK, I did not send it.")
    term.expect("you> ")
    term.send("/stats")
    term.expect("completion_tokens")
    term.send("/quit")
    assert term.close() == 0
    screen = ANSI.sub("", term.raw)
    assert "[declined]" in screen and "declined_by_user" in screen
    assert state(db) == before
    world = World(str(db))
    assert [a["status"] for a in world.audit_log() if a["actor"] == "user"] == ["declined"]
    world.close()


class PreparingBackend(ScriptedBackend):
    """A scripted model with a prefix cache's seam: records what ``prepare_prefix`` was given and
    whether it finished before the first turn streamed (the real part: test_backend_llama.py)."""

    supports_prefix_cache = True

    def __init__(self, scripts, delay_s=0.0):
        super().__init__(scripts)
        self.prepared, self.delay_s, self.log = [], delay_s, []

    def prepare_prefix(self, prefix, cancel=None):
        time.sleep(self.delay_s)
        self.prepared.append(prefix)
        self.log.append("prepared")
        return {"tokens": len(self.tokenize(prefix)), "source": "prefilled", "ms": 1.0}

    def _stream(self, prompt, sampling, max_tokens, prefix_tokens, info):
        self.log.append("stream")
        return super()._stream(prompt, sampling, max_tokens, prefix_tokens, info)


def test_the_tools_prefix_is_prepared_while_the_person_types(tmp_path):
    world = World(":memory:", seed=3)
    backend = PreparingBackend([turn("Hello.")], delay_s=0.3)
    out = _Buffer()
    lines = iter(["hello", "/stats"])

    def read(prompt):
        line = next(lines, None)
        if line is None:
            raise EOFError  # Ctrl-D
        return out.echo(prompt, line)

    session = ChatSession(Agent(backend, world), Display(out, Style(), show_thinking=False), read=read)
    session.prepare_in_background()
    session.loop()
    assert backend.log[:2] == ["prepared", "stream"]  # the first turn waited for the prefix
    first = backend.calls[0]
    assert first.prompt.startswith(backend.prepared[0]) and first.prefix_tokens == len(backend.tokenize(backend.prepared[0]))
    assert "tools prefix:" in out.getvalue() and "prefilled" in out.getvalue()


def test_a_failed_preparation_leaves_the_first_turn_to_prefill(tmp_path):
    class Failing(PreparingBackend):
        def prepare_prefix(self, prefix, cancel=None):
            raise RuntimeError("disk full")

    world = World(":memory:", seed=3)
    backend = Failing([turn("Hello.")])
    out = _Buffer()
    session = ChatSession(Agent(backend, world), Display(out, Style(), show_thinking=False), read=lambda p: "")
    session.prepare_in_background()
    session.ask("hello")
    assert "Hello." in out.getvalue() and session.prepared["source"] == "failed"
    assert session.command("/stats") and "not prepared (disk full)" in out.getvalue()


def test_leaving_before_the_preparation_ends_cancels_it_before_the_model_closes(tmp_path):
    class Slow(PreparingBackend):
        def prepare_prefix(self, prefix, cancel=None):
            for _ in range(500):  # 5 s unless cancelled, like a long prefill checked between batches
                if cancel is not None and cancel.is_set():
                    return {"tokens": 1, "source": "cancelled", "ms": 1.0}
                time.sleep(0.01)
            return {"tokens": 1, "source": "prefilled", "ms": 5000.0}

    def read(prompt):
        raise EOFError  # Ctrl-D at once

    session = ChatSession(Agent(Slow([]), World(":memory:", seed=3)), Display(_Buffer(), Style(), show_thinking=False),
                          read=read)
    started = time.perf_counter()
    session.prepare_in_background()
    session.loop()
    assert session.prepared["source"] == "cancelled" and time.perf_counter() - started < 2.0
    assert session._preparing is None  # the thread is done before main closes the model
