#!/bin/bash
# Session 21: the call gate (threshold 0.5, chosen before the run) on fn2, thinking off, BFCL 300.
set -e
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/botpsy eval --threads 2 --max-tokens 1024 --out runs/student/eval --model runs/student/gguf-fn2/model-lora.gguf \
  --label fn2-nothink-gate50 --no-enable-thinking --call-threshold 0.5 --suite bfcl --bfcl-limit 50 \
  --bfcl-category simple_python --bfcl-category multiple --bfcl-category parallel \
  --bfcl-category parallel_multiple --bfcl-category irrelevance --bfcl-category live_simple
echo DONE
