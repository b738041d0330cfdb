#!/bin/bash
# On-policy distillation of fn2 toward the base 1.5B on everyday requests (thinking off, the teacher in its own template).
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/botpsy mopd --student release/botpsy-0.5b-fn2 --teachers runs/student/teachers-od/manifest.json \
  --data runs/student/data-od --out runs/student/mopd-od --groups general --lora-rank 16 --steps 24 \
  --prompts-per-step 8 --max-new-tokens 160 --rollout-batch-size 8 --score-batch 2 --detach-prompt \
  --rollout-backend llama --dtype float32 --lr 2e-4 --warmup-steps 3 --eval-examples 8 --eval-max-new-tokens 96 --save-every 4 --threads 2
