"""The GGUF header check: damaged files give one clear GGUFFileError naming the file and the fault."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from botpsy.export.gguf_file import GGUFFileError, check_gguf_file, read_layout, tensor_table, tensor_type_counts


@pytest.fixture(scope="module")
def small_gguf(tmp_path_factory):
    """A valid GGUF with metadata of every shape (string, int, float, arrays) and two tensors."""
    import gguf

    path = tmp_path_factory.mktemp("gguf_file") / "small.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen35")
    writer.add_name("small")
    writer.add_block_count(1)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_sections([3, 3, 2, 0])
    writer.add_token_list(["a", "b", "<|im_end|>"])
    writer.add_tensor("token_embd.weight", np.arange(3 * 64, dtype=np.float32).reshape(3, 64))
    writer.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_valid_file_reads_back(small_gguf):
    layout = check_gguf_file(small_gguf)
    assert (layout.version, layout.tensor_count, layout.architecture) == (3, 2, "qwen35")
    assert layout.expected_size == layout.file_size
    assert tensor_type_counts(small_gguf) == {"F32": 2}
    shapes = {t.name: t.shape for t in tensor_table(small_gguf)}
    assert shapes == {"token_embd.weight": (64, 3), "output_norm.weight": (64,)}


def test_every_truncation_is_reported_as_truncation(small_gguf, tmp_path):
    data = small_gguf.read_bytes()
    data_offset = read_layout(small_gguf).data_offset
    cut_file = tmp_path / "cut.gguf"
    # Every byte of header, metadata and tensor table; every 16th of the tensor data.
    for cut in [*range(data_offset + 1), *range(data_offset + 1, len(data), 16)]:
        cut_file.write_bytes(data[:cut])
        with pytest.raises(GGUFFileError) as info:
            check_gguf_file(cut_file)
        assert str(cut_file) in str(info.value) and "truncated" in str(info.value), (cut, str(info.value))


def test_truncated_tensor_data_says_how_much_is_missing(small_gguf, tmp_path):
    data = small_gguf.read_bytes()
    path = tmp_path / "short.gguf"
    path.write_bytes(data[:-100])
    with pytest.raises(GGUFFileError, match=r"short\.gguf is truncated: .* \(100 missing\)"):
        check_gguf_file(path)
    read_layout(path)  # the header and tables alone are intact


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00garbage" * 64, r"not a GGUF file: it starts with b'\\x00gar'"),
        (b"PK\x03\x04" + bytes(200), "not a GGUF file"),
        (b"GGUF" + struct.pack("<IQQ", 99, 0, 0), "GGUF version 99"),
        (b"GGUF" + struct.pack("<IQQ", 3, 2**40, 0), "claims 1099511627776 tensors"),
        (b"GG", "shorter than the 24-byte GGUF header"),
    ],
)
def test_corrupt_headers(tmp_path, content, message):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(GGUFFileError, match=message) as info:
        check_gguf_file(path)
    assert str(path) in str(info.value)


def test_garbage_after_a_valid_header_never_escapes_as_another_error(small_gguf, tmp_path):
    data = bytearray(small_gguf.read_bytes())
    rng = random.Random(0)
    path = tmp_path / "scrambled.gguf"
    for trial in range(200):
        scrambled = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            scrambled[rng.randrange(24, len(data))] = rng.randrange(256)
        path.write_bytes(bytes(scrambled))
        try:
            check_gguf_file(path)  # harmless changes (inside tensor data, say) may pass
        except GGUFFileError as exc:
            assert str(path) in str(exc), trial


def test_missing_file(tmp_path):
    with pytest.raises(GGUFFileError, match="does not exist"):
        check_gguf_file(tmp_path / "none.gguf")
