"""bench/student_records.sh: evaluation records saved into the repository and restored on a fresh clone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "student_records.sh"


def records(tmp_path: Path, action: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "RUN": str(tmp_path / "run"), "STORE": str(tmp_path / "store")}
    return subprocess.run(["bash", str(SCRIPT), action], env=env, capture_output=True, text=True)


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


def test_save_then_restore_on_a_fresh_clone(tmp_path):
    run, store = tmp_path / "run", tmp_path / "store"
    stamp = json.dumps({"fingerprint": "model-lora.gguf:10:abc|{}"})
    write(run / "eval" / "lora" / "model.json", [stamp])
    write(run / "eval" / "lora" / "ifeval.jsonl", ['{"id": "1"}', '{"id": "2"}'])
    write(run / "eval" / "lora.stale" / "model.json", [stamp])  # set-aside records are not kept
    (run / "eval-screens").mkdir()
    (run / "eval-screens" / "lora").symlink_to(run / "eval" / "lora")  # a table's link: saved once, where it points
    assert records(tmp_path, "save").returncode == 0
    assert (store / "eval" / "lora" / "ifeval.jsonl").read_text().count("\n") == 2
    assert not (store / "eval" / "lora.stale").exists()
    assert not (store / "eval-screens").exists()

    # More records later: save keeps the longer file.
    write(run / "eval" / "lora" / "ifeval.jsonl", ['{"id": "1"}', '{"id": "2"}', '{"id": "3"}'])
    assert records(tmp_path, "save").returncode == 0
    assert (store / "eval" / "lora" / "ifeval.jsonl").read_text().count("\n") == 3

    # A fresh clone: everything comes back, stamp included, so `botpsy eval` resumes.
    fresh = tmp_path / "fresh"
    env = {"PATH": "/usr/bin:/bin", "RUN": str(fresh), "STORE": str(store)}
    assert subprocess.run(["bash", str(SCRIPT), "restore"], env=env).returncode == 0
    assert (fresh / "eval" / "lora" / "ifeval.jsonl").read_text().count("\n") == 3
    assert (fresh / "eval" / "lora" / "model.json").read_text().strip() == stamp


def test_restore_leaves_records_of_another_model_alone(tmp_path):
    run, store = tmp_path / "run", tmp_path / "store"
    write(store / "eval" / "lora" / "model.json", [json.dumps({"fingerprint": "old"})])
    write(store / "eval" / "lora" / "device.jsonl", ['{"id": "1"}', '{"id": "2"}'])
    write(run / "eval" / "lora" / "model.json", [json.dumps({"fingerprint": "new"})])
    write(run / "eval" / "lora" / "device.jsonl", ['{"id": "9"}'])
    result = records(tmp_path, "restore")
    assert result.returncode == 0 and "another model or settings" in result.stderr
    assert (run / "eval" / "lora" / "device.jsonl").read_text() == '{"id": "9"}\n'
    assert json.loads((run / "eval" / "lora" / "model.json").read_text())["fingerprint"] == "new"


def test_nothing_saved_and_a_wrong_action_are_clear_errors(tmp_path):
    assert "nothing saved" in records(tmp_path, "restore").stderr
    wrong = records(tmp_path, "load")
    assert wrong.returncode == 2 and "usage" in wrong.stderr
