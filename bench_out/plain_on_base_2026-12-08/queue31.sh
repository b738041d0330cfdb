#!/bin/bash
# Session 23, after od2's screens: the full test suite, then fn2 --plain-on-base on all 200 IFEval prompts
# (resumes the 50 of queue29; the same records folder and settings).
cd /work/main
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
while pgrep -f "queue30.sh" > /dev/null; do sleep 15; done
t() { echo "== $1 $(date -u +%H:%M:%S)"; }
t tests; bash runs/test.sh > runs/student/test_full.log 2>&1; echo "rc=$?"; tail -3 runs/student/test_full.log
S=runs/student
t ifeval200; .venv/bin/botpsy eval --threads 2 --max-tokens 1024 --out $S/eval --model $S/gguf-fn2/model-lora.gguf --label fn2-plainbase \
  --plain-on-base --no-enable-thinking --call-threshold 0.5 --suite ifeval --if-limit 200
t done
