#!/usr/bin/env bash
# The main job: set up .venv (first time only), then build botpsy's released model from its committed
# adapter and the registry base, run it beside the base on device tasks, and write runs/try/report.md.
# Extra arguments go to `botpsy try` (e.g. --tasks 60, --fresh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash runs/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/botpsy try "$@"
