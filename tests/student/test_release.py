"""Releases: a committed adapter on a base, built into a GGUF; and `botpsy try`, the README's main command.

The tiny Qwen2 GGUF and its LoRA SFT folder stand in for the registry base and the committed adapter.
"""

from __future__ import annotations

import json

import pytest

from botpsy.model import releases
from botpsy.model.bases import BaseModelError
from botpsy.model.releases import Release


@pytest.fixture
def tiny_release(student_sft, qwen2_gguf, monkeypatch, tmp_path):
    """A release named 'tiny-sft' whose adapter is the tiny SFT folder; models cache in tmp_path."""
    cache = tmp_path / "models"
    monkeypatch.setenv("BOTPSY_MODELS", str(cache))
    rel = Release(name="tiny-sft", folder=str(student_sft), base=str(qwen2_gguf[0]), format="q8_0",
                  sha256="0" * 64, stage="sft")
    monkeypatch.setitem(releases.RELEASES, "tiny-sft", rel)
    return rel, cache


@pytest.mark.parametrize("name", sorted(releases.RELEASES))
def test_the_committed_releases_are_known_and_their_adapters_are_in_the_repository(name):
    rel = releases.release(name)
    assert rel.base == "qwen2.5-coder-0.5b" and len(rel.sha256) == 64 and int(rel.sha256, 16) >= 0
    folder = releases.adapter_folder(rel)
    assert json.loads((folder / "meta.json").read_text())["base"] == rel.base
    assert (folder / "README.md").read_text().startswith(f"# {name}:")  # its model card


def test_an_unknown_release_is_a_clear_error():
    with pytest.raises(BaseModelError, match="unknown release"):
        releases.release("botpsy-9b")


def test_a_release_builds_once_and_then_opens_by_name(tiny_release):
    from botpsy.agent.backends import open_backend
    from botpsy.runtime.backend import BackendOptions, ModelLoadError

    rel, cache = tiny_release
    with pytest.raises(ModelLoadError, match="botpsy models --build tiny-sft"):
        open_backend("tiny-sft", BackendOptions(threads=1))
    record = releases.build("tiny-sft", threads=1, root=None)
    path = cache / "tiny-sft-q8_0.gguf"
    assert record["file"] == str(path) and path.is_file() and record["bytes"] == path.stat().st_size
    assert record["matches_recorded"] is False  # the fixture records a made-up hash: reported, not refused
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")]  # no half-built leftovers
    before = path.stat().st_mtime_ns
    assert releases.build("tiny-sft", threads=1) == record and path.stat().st_mtime_ns == before  # reused
    backend = open_backend("tiny-sft", BackendOptions(threads=1, n_ctx=512))
    try:
        assert backend.tokenize("hello")
    finally:
        backend.close()


def test_a_missing_adapter_is_a_clear_error(tmp_path):
    rel = Release(name="gone", folder="release/gone", base="qwen2.5-coder-0.5b", format="q4_k_m", sha256="", stage="sft")
    with pytest.raises(BaseModelError, match="adapter of gone is missing"):
        releases.adapter_folder(rel, tmp_path)


def test_the_models_command_lists_and_builds_releases(tiny_release, capsys):
    from botpsy.cli import main

    rel, cache = tiny_release
    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["name"]: r["built"] for r in listed["releases"]}["tiny-sft"] is None
    assert main(["models", "--build", "tiny-sft", "--threads", "1", "--json"]) == 0
    built = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert built["tiny-sft"]["file"] == str(cache / rel.filename)
    assert main(["models", "--path", "tiny-sft"]) == 0
    assert capsys.readouterr().out.strip() == str(cache / rel.filename)


@pytest.mark.slow
def test_botpsy_try_builds_evaluates_benches_and_reports(tiny_release, tmp_path, capsys):
    from botpsy.tryout import STEPS, TryConfig, main

    run = tmp_path / "try"
    config = TryConfig(run=str(run), release="tiny-sft", tasks=2, max_tokens=16, threads=1)
    assert main(config) == 0
    summary = json.loads((run / "eval" / "summary.json").read_text())
    assert set(summary["models"]) == {"tiny-sft", "base"}
    device = summary["models"]["tiny-sft"]["suites"]["device"]
    assert device["tasks"] == 2 and {"generated_tokens_per_solved", "ttft_ms_median", "decode_tokens_per_s"} <= set(device)
    assert len(json.loads((run / "bench" / "card.json").read_text())["models"]) == 2
    report = (run / "report.md").read_text()
    assert "tasks solved" in report and "botpsy chat --model tiny-sft" in report and "peak RSS" in report
    capsys.readouterr()
    assert main(config) == 0  # resumes: every step done already
    assert capsys.readouterr().out.count("done already") == len(STEPS)
