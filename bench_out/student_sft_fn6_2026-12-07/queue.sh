#!/usr/bin/env bash
# Session 19: fn6 = fn2 continued with requests it should answer itself while tools are offered:
# fn_answer examples (worked answers, offered functions of the request's parameter shape) and
# everyday answers with unneeded tools (--general-tools 0.5). Target: BFCL irrelevance with
# thinking off (fn2: 10 of 50). Then screens and the 300-item BFCL row with thinking off.
set -uo pipefail
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
B=.venv/bin/botpsy
S=runs/student
t() { echo "[queue] $(date +%H:%M:%S) $*"; }
until grep -q "\] .* done" $S/queue17b.log; do sleep 10; done
E="$B eval --threads 2 --max-tokens 1024 --out $S/eval"
CATS="--bfcl-category simple_python --bfcl-category multiple --bfcl-category parallel --bfcl-category parallel_multiple --bfcl-category irrelevance --bfcl-category live_simple"
t data; rm -rf $S/data-fn6; $B data --tasks $S/tasks --out $S/data-fn6 --functions 2000 --functions-answer 600 \
  --general $S/general3/general.jsonl --general $S/general12/general.jsonl --general-copies 2 --general-tools 0.5 || exit 1
t sft; $B sft --init release/botpsy-0.5b-fn2 --data $S/data-fn6 --out $S/sft-fn6 \
  --steps 64 --batch-tokens 4096 --lora-rank 16 --lr 2e-4 --warmup-steps 4 --eval-every 0 \
  --eval-calls-every 0 --save-every 16 --threads 2 --no-eval-tool-choice --seed 4 \
  --detach-context --dtype auto --dev-loss-sequences 16 --test-examples 0 || exit 1
t export
$B export $S/sft-fn6 --out $S/gguf-fn6 --formats lora --name fn6 || exit 1
t screen-bfcl60-nothink; $E --model $S/gguf-fn6/model-lora.gguf --label fn6-nothink --no-enable-thinking --suite bfcl --bfcl-limit 10 $CATS
t screen-device30; $E --model $S/gguf-fn6/model-lora.gguf --label fn6 --suite device --tasks $S/tasks/test.jsonl --device-limit 30
t bfcl300-nothink; $E --model $S/gguf-fn6/model-lora.gguf --label fn6-nothink --no-enable-thinking --suite bfcl --bfcl-limit 50 $CATS
t screen-ifeval50-nothink; $E --model $S/gguf-fn6/model-lora.gguf --label fn6-nothink --no-enable-thinking --suite ifeval --if-limit 50
t done
