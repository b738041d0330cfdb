"""What the bench knows about the machine: CPU, caches, memory, OS, energy counters, resident memory.

* ``describe_machine(threads)``: CPU model, physical and logical cores, total memory, OS,
  Python, cache sizes (from ``/sys/devices/system/cpu/cpu0/cache``), the llama.cpp build.
* ``RaplMeter``: energy from Linux RAPL (``/sys/class/powercap/intel-rapl:N/energy_uj``, one
  top-level domain per CPU package; AMD CPUs are exposed under the same name). The counters
  are often readable only by root; when none can be read the bench writes "not available
  here" and never estimates energy from power ratings. Counter wrap-around is handled with
  ``max_energy_range_uj``.
* ``PeakRss``: the highest resident set size while a block runs, sampled every few
  milliseconds by a thread (psutil), because the kernel's own high-water mark covers the whole
  process and would carry one model's peak over to the next.

Example::

    meter = RaplMeter.open()            # None when RAPL is not readable
    with PeakRss() as peak:
        ...
    print(peak.bytes)
"""

from __future__ import annotations

import os
import platform
import threading
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")
CPU_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _size_bytes(text: str) -> int:
    """sysfs cache sizes: ``"32K"``, ``"1024K"``, ``"32768K"``, ``"16M"``.

    >>> _size_bytes("32K"), _size_bytes("16M")
    (32768, 16777216)
    """
    text = text.strip().upper()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text or 0)


def cache_sizes(root: Path = CPU_CACHE) -> dict[str, int]:
    """``{"L1d": bytes, "L1i": ..., "L2": ..., "L3": ...}`` as seen by CPU 0 (empty if sysfs is absent)."""
    sizes: dict[str, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        sizes[name] = size
    return sizes


def describe_machine(threads: int, system_info: dict[str, str]) -> dict[str, Any]:
    import psutil

    caches = cache_sizes()
    last_level = max((size for name, size in caches.items() if not name.endswith("i")), default=0)
    return {
        "cpu_model": cpu_model(), "physical_cores": psutil.cpu_count(logical=False) or os.cpu_count() or 1,
        "logical_cores": psutil.cpu_count() or 1, "threads_used": threads,
        "memory_bytes": int(psutil.virtual_memory().total), "os": platform.platform(),
        "python": platform.python_version(), "load_average": [round(x, 2) for x in psutil.getloadavg()],
        "caches": caches, "last_level_cache_bytes": last_level or None,
        "llama_cpp": system_info,
    }


class RaplMeter:
    """Cumulative energy of the top-level RAPL domains, in joules, wrap-around included."""

    def __init__(self, domains: list[Path]) -> None:
        self.domains = domains
        self._ranges = [self._read(d / "max_energy_range_uj") for d in domains]

    @classmethod
    def open(cls, root: Path = POWERCAP) -> "RaplMeter | None":
        """A meter over every readable package domain under ``root``, or None if there is none."""
        domains = []
        for domain in sorted(root.glob("intel-rapl:*")):
            if domain.name.count(":") != 1:  # intel-rapl:0:0 and friends are parts of a package
                continue
            try:
                cls._read(domain / "energy_uj")
                cls._read(domain / "max_energy_range_uj")
            except (OSError, ValueError):
                continue  # absent, or root-only (the default on recent kernels)
            domains.append(domain)
        return cls(domains) if domains else None

    @staticmethod
    def _read(path: Path) -> int:
        return int(path.read_text().strip())

    def names(self) -> list[str]:
        names = []
        for domain in self.domains:
            try:
                names.append(f"{domain.name} ({(domain / 'name').read_text().strip()})")
            except OSError:
                names.append(domain.name)
        return names

    def read(self) -> list[int]:
        return [self._read(d / "energy_uj") for d in self.domains]

    def joules_between(self, start: list[int], end: list[int]) -> float:
        """Joules consumed between two ``read()`` results (all domains together)."""
        total = 0
        for before, after, wrap in zip(start, end, self._ranges):
            total += after - before if after >= before else after + wrap - before
        return total / 1e6


class PeakRss:
    """Context manager: ``bytes`` is the highest RSS seen while the block ran (sampled every ``interval`` s)."""

    def __init__(self, interval: float = 0.005) -> None:
        import psutil

        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.bytes = 0

    def _sample(self) -> None:
        while True:
            self.bytes = max(self.bytes, self._process.memory_info().rss)
            if self._stop.wait(self._interval):
                return

    def __enter__(self) -> "PeakRss":
        self.bytes = self._process.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.bytes = max(self.bytes, self._process.memory_info().rss)


def rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)
