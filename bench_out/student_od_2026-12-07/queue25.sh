#!/bin/bash
# Session 22: stop the on-policy distillation (queue23, scheduled for 24 steps) at its step-16 checkpoint for
# time, finish it there (final dev check, adapter saved), then evaluate the adapter (od).
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
S=runs/student
until grep -q '"step": 16, "loss"' $S/mopd-od/curves.jsonl; do sleep 10; done
seen=$(date +%s)
until [ $(stat -c %Y $S/mopd-od/train_state/custom_checkpoint_0.pkl) -ge $seen ]; do sleep 5; done
sleep 20
pkill -f "runs/student/queue23.sh"; pkill -f "botpsy mopd"; sleep 5
t() { echo "== $1 $(date -u +%H:%M:%S)"; }
t finish
sed 's/--steps 24/--steps 16/' $S/queue23.sh | bash || exit 1
E=".venv/bin/botpsy eval --threads 2 --max-tokens 1024"
M=$S/gguf-od/model-lora.gguf
t export; .venv/bin/botpsy export $S/mopd-od --out $S/gguf-od --formats lora --name botpsy-0.5b-od || exit 1
t ifeval200; $E --out $S/eval-nothink-ifeval200 --model $M --label od-nothink --no-enable-thinking --suite ifeval --if-limit 200
t bfcl60; $E --out $S/eval --model $M --label od-nothink-gate50 --no-enable-thinking --call-threshold 0.5 --suite bfcl --bfcl-limit 10 \
  --bfcl-category simple_python --bfcl-category multiple --bfcl-category parallel \
  --bfcl-category parallel_multiple --bfcl-category irrelevance --bfcl-category live_simple
t device30; $E --out $S/eval-nothink-device30 --model $M --label od-nothink --no-enable-thinking --suite device --tasks $S/tasks/test.jsonl --device-limit 30
t done
