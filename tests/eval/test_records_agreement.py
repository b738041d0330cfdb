"""bench/records_agreement.py: two runs' records compared item by item."""

import importlib.util
import json
import subprocess
import sys


def load():
    spec = importlib.util.spec_from_file_location("records_agreement", "bench/records_agreement.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_counts_shared_items_identical_text_and_verdicts(tmp_path):
    write(tmp_path / "a.jsonl", [{"id": "x", "raw": "same", "correct": True, "seconds": 4.0},
                                 {"id": "y", "raw": "one", "correct": False, "seconds": 6.0},
                                 {"id": "only-a", "raw": "", "correct": True, "seconds": 1.0}])
    write(tmp_path / "b.jsonl", [{"id": "y", "raw": "two", "correct": False, "seconds": 12.0},
                                 {"id": "x", "raw": "same", "correct": True, "seconds": 10.0}])
    result = subprocess.run([sys.executable, "bench/records_agreement.py", str(tmp_path / "a.jsonl"),
                             str(tmp_path / "b.jsonl"), "--out", str(tmp_path / "out.json")],
                            capture_output=True, text=True, check=True)
    summary = json.loads((tmp_path / "out.json").read_text())
    assert summary == json.loads(result.stdout)
    assert summary["shared_items"] == 2 and summary["identical_text"] == 1 and summary["same_verdict"] == 2
    assert summary["differing_items"] == ["y"] and summary["correct_first"] == summary["correct_second"] == 1
    assert summary["median_seconds_first"] == 5.0 and summary["median_seconds_second"] == 11.0


def test_a_cut_line_is_a_clear_error(tmp_path):
    import pytest

    (tmp_path / "cut.jsonl").write_text('{"id": "x", "raw": "a"}\n{"id": "y", "ra')
    with pytest.raises(ValueError, match=r"cut.jsonl, line 2: not a JSON record"):
        load().read(tmp_path / "cut.jsonl")
