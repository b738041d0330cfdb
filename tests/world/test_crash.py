"""A process killed (SIGKILL) in the middle of a run of calls leaves a sound database with every completed call."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import botpsy
from botpsy.world import World

REPO_ROOT = str(Path(botpsy.__file__).resolve().parents[1])

CHILD = """
import sys
from botpsy.world import World
world = World(sys.argv[1], seed=3)
start = int(sys.argv[2])
for i in range(start, start + 100000):
    result = world.call("create_note", {"title": f"crash-{i}", "text": "x" * 300})
    assert "error" not in result, result
    world.call("set_brightness", {"level": i % 101})
    print(i, flush=True)  # printed only after both calls returned, i.e. committed
"""


def _run_and_kill(path: str, start: int, after_lines: int) -> list[int]:
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path, str(start)], stdout=subprocess.PIPE, text=True, env=env)
    done = []
    deadline = time.monotonic() + 60
    while len(done) < after_lines and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        done.append(int(line))
    os.kill(proc.pid, signal.SIGKILL)  # lands somewhere inside the next calls
    rest, _ = proc.communicate()
    done += [int(x) for x in rest.split()]
    assert proc.returncode == -signal.SIGKILL
    return done


def test_sigkill_mid_run_keeps_the_database_sound_and_every_completed_call(tmp_path):
    path = str(tmp_path / "device.db")
    reported: list[int] = []
    for round_index, after in enumerate([40, 120, 75]):
        reported += _run_and_kill(path, start=round_index * 100000, after_lines=after)
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        titles = {r[0] for r in conn.execute("SELECT title FROM notes WHERE title LIKE 'crash-%'")}
        assert {f"crash-{i}" for i in reported} <= titles  # every call the child saw complete is there
        audited = [r[0] for r in conn.execute("SELECT arguments FROM audit WHERE name = 'create_note' AND status = 'ok'")]
        assert len(audited) == len(titles)  # writes and their audit rows commit together
        assert len(titles) - len(reported) <= round_index + 1  # at most one unreported commit per kill
        conn.close()
    world = World(path)  # and the device still works
    assert "error" not in world.call("create_note", {"title": "after", "text": "fine"})
