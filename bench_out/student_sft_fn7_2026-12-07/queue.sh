#!/usr/bin/env bash
# Session 19: fn7 = fn6's recipe with the fn_answer examples paired (--functions-answer-paired): each
# answered request also appears with its fitting function offered and a call to it. fn6, without the
# twins, answered computable one-call BFCL requests in text (12 of its 14 lost simple/multiple items).
set -uo pipefail
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
B=.venv/bin/botpsy
S=runs/student
t() { echo "[queue] $(date +%H:%M:%S) $*"; }
while pgrep -f "pytest" > /dev/null; do sleep 10; done
E="$B eval --threads 2 --max-tokens 1024 --out $S/eval"
CATS="--bfcl-category simple_python --bfcl-category multiple --bfcl-category parallel --bfcl-category parallel_multiple --bfcl-category irrelevance --bfcl-category live_simple"
t data; rm -rf $S/data-fn7; $B data --tasks $S/tasks --out $S/data-fn7 --functions 2000 --functions-answer 300 --functions-answer-paired \
  --general $S/general3/general.jsonl --general $S/general12/general.jsonl --general-copies 2 --general-tools 0.5 || exit 1
t sft; $B sft --init release/botpsy-0.5b-fn2 --data $S/data-fn7 --out $S/sft-fn7 \
  --steps 64 --batch-tokens 4096 --lora-rank 16 --lr 2e-4 --warmup-steps 4 --eval-every 0 \
  --eval-calls-every 0 --save-every 16 --threads 2 --no-eval-tool-choice --seed 4 \
  --detach-context --dtype auto --dev-loss-sequences 16 --test-examples 0 || exit 1
t export
$B export $S/sft-fn7 --out $S/gguf-fn7 --formats lora --name fn7 || exit 1
t screen-bfcl60-nothink; $E --model $S/gguf-fn7/model-lora.gguf --label fn7-nothink --no-enable-thinking --suite bfcl --bfcl-limit 10 $CATS
t screen-device30; $E --model $S/gguf-fn7/model-lora.gguf --label fn7 --suite device --tasks $S/tasks/test.jsonl --device-limit 30
t bfcl300-nothink; $E --model $S/gguf-fn7/model-lora.gguf --label fn7-nothink --no-enable-thinking --suite bfcl --bfcl-limit 50 $CATS
t done
