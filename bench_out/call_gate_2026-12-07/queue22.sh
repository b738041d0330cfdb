#!/bin/bash
# Session 21, after queue21: (1) BFCL categories outside the 300-item draw, fn2 thinking off with
# and without the call gate (a held-out check of the threshold); (2) the gate on the 150 device tasks.
cd /work/main
while kill -0 30908 2>/dev/null; do sleep 10; done
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
M=runs/student/gguf-fn2/model-lora.gguf
for T in 0.5 0; do
  L=heldout-fn2-nothink-gate$T
  .venv/bin/botpsy eval --threads 2 --max-tokens 1024 --out runs/student/eval_heldout --model $M --label $L \
    --no-enable-thinking --call-threshold $T --suite bfcl --bfcl-limit 50 \
    --bfcl-category live_irrelevance --bfcl-category live_multiple
done
.venv/bin/botpsy eval --threads 2 --max-tokens 1024 --out runs/student/eval --model $M \
  --label fn2-nothink-gate50 --no-enable-thinking --call-threshold 0.5 --suite device \
  --tasks runs/student/tasks/test.jsonl --device-limit 150
echo DONE
