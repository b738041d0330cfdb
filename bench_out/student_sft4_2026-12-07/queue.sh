#!/usr/bin/env bash
# Session 20: sft4 = sft3 (the from-scratch SFT with the best exact first calls, 73.3%, whose dev
# curve was still rising at its last step: 0, 21, 58, 83% at steps 0-300) trained 64 more steps on
# the same kind of mix: device data + everyday answers (general3) x6. Target: #25's exact first
# calls (>= 85% on single and parallel tasks of the 150-task draw). Then the device row.
set -uo pipefail
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
B=.venv/bin/botpsy
S=runs/student
t() { echo "[queue] $(date +%H:%M:%S) $*"; }
while pgrep -f "botpsy bench" > /dev/null; do sleep 10; done
E="$B eval --threads 2 --max-tokens 1024 --out $S/eval"
t data; rm -rf $S/data-sft4; $B data --tasks $S/tasks --out $S/data-sft4 \
  --general $S/general3/general.jsonl --general-copies 6 || exit 1
t sft; $B sft --init bench_out/student_sft3_2026-12-06/adapter --data $S/data-sft4 --out $S/sft4 \
  --steps 64 --batch-tokens 4096 --lora-rank 16 --lr 2e-4 --warmup-steps 4 --eval-every 0 \
  --eval-calls-every 32 --save-every 16 --threads 2 --no-eval-tool-choice --seed 5 \
  --detach-context --dtype auto --dev-loss-sequences 16 --test-examples 0 || exit 1
t export
$B export $S/sft4 --out $S/gguf-sft4 --formats lora --name sft4 || exit 1
t device150; $E --model $S/gguf-sft4/model-lora.gguf --label sft4 --suite device --tasks $S/tasks/test.jsonl --device-limit 150
t done
