#!/bin/bash
# Session 22: od's answers run about 5x longer than fn2's, so IFEval is screened on its first 100 prompts
# (resuming queue25's records), then BFCL (10 a category) and 30 device tasks; IFEval's second 100 last.
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
S=runs/student
t() { echo "== $1 $(date -u +%H:%M:%S)"; }
E=".venv/bin/botpsy eval --threads 2 --max-tokens 1024"
M=$S/gguf-od/model-lora.gguf
t ifeval100; $E --out $S/eval-nothink-ifeval200 --model $M --label od-nothink --no-enable-thinking --suite ifeval --if-limit 100
t bfcl60; $E --out $S/eval --model $M --label od-nothink-gate50 --no-enable-thinking --call-threshold 0.5 --suite bfcl --bfcl-limit 10 \
  --bfcl-category simple_python --bfcl-category multiple --bfcl-category parallel \
  --bfcl-category parallel_multiple --bfcl-category irrelevance --bfcl-category live_simple
t device30; $E --out $S/eval-nothink-device30 --model $M --label od-nothink --no-enable-thinking --suite device --tasks $S/tasks/test.jsonl --device-limit 30
t done
