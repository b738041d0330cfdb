"""RAPL energy counters (present, wrapped, absent), cache sizes from sysfs, peak RSS sampling."""

from __future__ import annotations

from botpsy.bench.card import NOT_AVAILABLE
from botpsy.bench.machine import PeakRss, RaplMeter, cache_sizes, rss_bytes
from botpsy.bench.measure import energy_record


def rapl_domain(root, name, energy, wrap=1_000_000, label="package-0"):
    domain = root / name
    domain.mkdir(parents=True)
    (domain / "energy_uj").write_text(f"{energy}\n")
    (domain / "max_energy_range_uj").write_text(f"{wrap}\n")
    (domain / "name").write_text(label + "\n")
    return domain


def test_no_rapl_means_not_available_here(tmp_path):
    assert RaplMeter.open(tmp_path / "missing") is None
    assert RaplMeter.open(tmp_path) is None
    assert energy_record(None, None) == NOT_AVAILABLE
    assert energy_record({"prefill": [], "decode": []}, None) == NOT_AVAILABLE


def test_a_domain_without_a_readable_counter_is_skipped(tmp_path):
    domain = rapl_domain(tmp_path, "intel-rapl:0", 5)
    (domain / "energy_uj").unlink()  # what a root-only counter looks like to the reader: unreadable
    assert RaplMeter.open(tmp_path) is None


def test_package_domains_are_summed_and_wraparound_handled(tmp_path):
    first = rapl_domain(tmp_path, "intel-rapl:0", 999_000)
    rapl_domain(tmp_path, "intel-rapl:1", 10_000, label="package-1")
    rapl_domain(tmp_path, "intel-rapl:0:0", 7, label="core")  # a part of package 0: not counted twice
    meter = RaplMeter.open(tmp_path)
    assert meter is not None and len(meter.domains) == 2
    assert meter.names() == ["intel-rapl:0 (package-0)", "intel-rapl:1 (package-1)"]
    start = meter.read()
    (first / "energy_uj").write_text("1000\n")  # wrapped past 1_000_000
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("510000\n")
    assert abs(meter.joules_between(start, meter.read()) - (0.002 + 0.5)) < 1e-9


def test_energy_record_from_measurements(tmp_path):
    rapl_domain(tmp_path, "intel-rapl:0", 0)
    record = energy_record({"prefill": [0.001, 0.003], "decode": [0.02, 0.04]}, RaplMeter.open(tmp_path))
    assert record["decode_joules_per_token"]["median"] == 0.03
    assert record["prefill_joules_per_token"]["n"] == 2


def test_cache_sizes_from_sysfs(tmp_path):
    for index, (level, kind, size) in enumerate([(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"),
                                                 (3, "Unified", "32M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(kind + "\n")
        (folder / "size").write_text(size + "\n")
    assert cache_sizes(tmp_path) == {"L1d": 32 << 10, "L1i": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
    assert cache_sizes(tmp_path / "absent") == {}


def test_peak_rss_sees_memory_allocated_and_freed_inside_the_block():
    """The sampler, not the reading at exit, must catch a peak that is gone by the end of the block.
    The margin (192 of 256 MiB) leaves room for other memory the process frees meanwhile."""
    import gc
    import time

    gc.collect()
    before = rss_bytes()
    with PeakRss() as peak:
        block = bytearray(256 << 20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
        time.sleep(0.1)  # twenty sampling intervals
        del block  # a block this large is its own mapping: freeing it lowers the RSS again
    assert peak.bytes >= before + (192 << 20)
    assert rss_bytes() < peak.bytes - (128 << 20)
