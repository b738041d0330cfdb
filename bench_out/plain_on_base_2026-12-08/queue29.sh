#!/bin/bash
# Session 23: the release adapter fn2 with --plain-on-base (turns without tools on the base alone, in its own
# template), checked against the rows it routes to: IFEval's first 50 of the 200 prompts against the base 0.5B's
# records, and 2 BFCL items a category (every BFCL item offers tools) against fn2-nothink-gate50's.
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
while pgrep -f "queue28.sh" > /dev/null || pgrep -f "pytest" > /dev/null; do sleep 20; done
S=runs/student
t() { echo "== $1 $(date -u +%H:%M:%S)"; }
[ -f $S/gguf-fn2/model-lora.gguf ] || .venv/bin/botpsy export release/botpsy-0.5b-fn2 --out $S/gguf-fn2 --formats lora --name botpsy-0.5b-fn2 || exit 1
E=".venv/bin/botpsy eval --threads 2 --max-tokens 1024 --out $S/eval --model $S/gguf-fn2/model-lora.gguf --label fn2-plainbase --plain-on-base --no-enable-thinking --call-threshold 0.5"
t bfcl12; $E --suite bfcl --bfcl-limit 2 --bfcl-category simple_python --bfcl-category multiple --bfcl-category parallel \
  --bfcl-category parallel_multiple --bfcl-category irrelevance --bfcl-category live_simple
t ifeval50; $E --suite ifeval --if-limit 50
t done
