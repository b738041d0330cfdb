"""runs/student/general12/general.jsonl, rebuilt from the committed banks (run from the repository root).

fn4's `general-merged.jsonl`: sft2's everyday answers (ids g1-) and general2's (g2-), answers the
runtime's loop detector flags left out. Rebuilt on 2026-12-08 on a fresh checkout: 225 rows, 7
dropped, as recorded; with general2/general3 copied from bench_out, `botpsy data` for data-fn5 gave
the recorded counts (6,412 train examples, 1,412 everyday) and make_data.py 315 + 16 od prompts.
"""
import json
import os

from botpsy.train.rewards import loop_fired

BANKS = [("g1", "bench_out/student_sft2_2026-12-06/general/general.jsonl"),
         ("g2", "bench_out/student_general2_2026-12-07/general.jsonl")]
out, dropped = [], 0
for tag, path in BANKS:
    for line in open(path):
        r = json.loads(line)
        if loop_fired([m["content"] for m in r["messages"] if m["role"] == "assistant"]):
            dropped += 1
            continue
        out.append({**r, "id": f"{tag}-{r['id']}", "task_id": f"{tag}-{r.get('task_id', r['id'])}"})
print(len(out), dropped)  # 225 7
os.makedirs("runs/student/general12", exist_ok=True)
with open("runs/student/general12/general.jsonl", "w") as f:
    f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in out)
