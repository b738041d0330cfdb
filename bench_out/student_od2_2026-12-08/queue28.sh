#!/bin/bash
# Session 23 (rerun of session 22's queue27 on a fresh checkout): MOPD with the general teacher (base 1.5B, own template) *beside* a tools
# group whose teacher is fn2 itself (device-world and everyday-function prompts), so the tool behaviour is
# held where the general teacher pulls. Same settings as od otherwise (16 steps scheduled), then the screens.
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
while pgrep -f "pytest" > /dev/null; do sleep 20; done
S=runs/student
t() { echo "== $1 $(date -u +%H:%M:%S)"; }
t teachers
.venv/bin/botpsy teachers --init release/botpsy-0.5b-fn2 --data $S/data-od2 --out $S/teachers-od2 --groups general,tools \
  --teacher-init general=qwen2.5-coder-1.5b --teacher-init tools=release/botpsy-0.5b-fn2 --own-template general \
  --steps 0 --eval-examples 8 --eval-max-new-tokens 96 --no-eval-other --dtype float32 --threads 2 || exit 1
t mopd
.venv/bin/botpsy mopd --student release/botpsy-0.5b-fn2 --teachers $S/teachers-od2/manifest.json \
  --data $S/data-od2 --out $S/mopd-od2 --groups general,tools --lora-rank 16 --steps 16 \
  --prompts-per-step 8 --max-new-tokens 160 --rollout-batch-size 8 --score-batch 2 --detach-prompt \
  --rollout-backend llama --dtype float32 --lr 2e-4 --warmup-steps 3 --eval-examples 8 --eval-max-new-tokens 96 \
  --save-every 4 --threads 2 || exit 1
E=".venv/bin/botpsy eval --threads 2 --max-tokens 1024"
M=$S/gguf-od2/model-lora.gguf
t export; .venv/bin/botpsy export $S/mopd-od2 --out $S/gguf-od2 --formats lora --name botpsy-0.5b-od2 || exit 1
t bfcl60; $E --out $S/eval --model $M --label od2-nothink-gate50 --no-enable-thinking --call-threshold 0.5 --suite bfcl --bfcl-limit 10 \
  --bfcl-category simple_python --bfcl-category multiple --bfcl-category parallel \
  --bfcl-category parallel_multiple --bfcl-category irrelevance --bfcl-category live_simple
t device30; $E --out $S/eval-nothink-device30 --model $M --label od2-nothink --no-enable-thinking --suite device --tasks $S/tasks/test.jsonl --device-limit 30
t ifeval100; $E --out $S/eval-nothink-ifeval200 --model $M --label od2-nothink --no-enable-thinking --suite ifeval --if-limit 100
t done
