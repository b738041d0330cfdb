#!/usr/bin/env bash
# Run the whole test suite (set-up included). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash runs/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -q "$@"
