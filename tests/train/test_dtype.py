"""``--dtype auto``: bfloat16 only where the hardware computes it natively."""

import doctest

import pytest

from botpsy.train import common

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse2 avx avx2 fma
processor\t: 1
flags\t\t: fpu sse2 avx avx2 fma
"""


def test_doctests():
    assert doctest.run_docstring_examples(common.resolve_dtype, {"resolve_dtype": common.resolve_dtype}) is None
    assert doctest.testmod(common).failed == 0


def test_cpu_flags_are_read_from_cpuinfo():
    assert common.cpu_flags(CPUINFO) == {"fpu", "sse2", "avx", "avx2", "fma"}
    assert common.cpu_flags("") == set()


@pytest.mark.parametrize(("cuda", "flags", "expected"), [
    (False, {"avx2"}, "float32"),                 # AVX2 only: bfloat16 is emulated, many times slower
    (False, {"avx512f", "avx512_bf16"}, "bfloat16"),
    (False, {"amx_bf16"}, "bfloat16"),
    (True, set(), "bfloat16"),                    # a GPU with bfloat16 support
])
def test_auto_picks_bfloat16_only_where_it_is_native(cuda, flags, expected):
    assert common.resolve_dtype("auto", cuda=cuda, flags=flags) == expected


def test_explicit_dtypes_pass_through_and_unknown_ones_are_refused():
    assert common.resolve_dtype("bfloat16", cuda=False, flags=set()) == "bfloat16"
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        common.resolve_dtype("fp8")
