#!/usr/bin/env bash
# The main job: set up .venv (first time only), then run the whole recipe at tiny scale.
# Extra arguments go to `botpsy speedrun` (e.g. --fresh, --run runs/other, --sft-steps 100).
set -euo pipefail
cd "$(dirname "$0")/.."
bash runs/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/botpsy speedrun "$@"
