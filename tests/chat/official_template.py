"""Find the official Qwen3.5 chat template inside the llama-cpp-python source archive.

The project does not ship the template; tests read it from the sdist that `runs/setup.sh`
keeps in `.cache/sdist` (or fetch it with pip, which serves it from its cache).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MEMBER_SUFFIX = "vendor/llama.cpp/models/templates/Qwen3.5-4B.jinja"


def _candidates() -> list[str]:
    found = []
    if os.environ.get("BOTPSY_LLAMA_SDIST"):
        found.append(os.environ["BOTPSY_LLAMA_SDIST"])
    found += glob.glob(str(REPO / ".cache/sdist/llama_cpp_python-*.tar.gz"))
    return found


def _download(dest: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
           "llama-cpp-python==0.3.36", "-d", str(dest)]
    subprocess.run(cmd, capture_output=True, timeout=300)
    return glob.glob(str(dest / "llama_cpp_python-*.tar.gz"))


def load_official_template() -> tuple[str | None, str]:
    """(template text or None, where it came from / why it is missing)."""
    paths = _candidates() or _download(REPO / ".cache/sdist")
    for path in paths:
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.name.endswith(MEMBER_SUFFIX):
                    return tar.extractfile(member).read().decode("utf-8"), path
    return None, "no llama-cpp-python 0.3.36 sdist in .cache/sdist and pip could not download one"
