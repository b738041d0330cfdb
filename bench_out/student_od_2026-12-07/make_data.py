"""The two prompt folders of session 22, as they were built (run from the repository root).

data-od: the distinct everyday requests of three `botpsy general` folders, thinking off, 16 held out
as dev. data-od2: the same beside data-fn5's device-world and everyday-function examples, relabelled
group "tools" (their old group kept in source_group). MOPD uses the prompts only.
"""

import json
import os
import random

S = "runs/student"


def write(folder: str, split: str, rows: list[dict]) -> None:
    os.makedirs(f"{S}/{folder}", exist_ok=True)
    with open(f"{S}/{folder}/{split}.jsonl", "w") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


rows, seen = [], set()
for folder in ["general12", "general2", "general3"]:
    for line in open(f"{S}/{folder}/general.jsonl"):
        r = json.loads(line)
        if r["messages"][0]["content"] not in seen:
            seen.add(r["messages"][0]["content"])
            rows.append({**r, "id": f"{folder}-{r['id']}", "task_id": f"{folder}-{r['id']}", "thinking": False})
random.Random(0).shuffle(rows)
general = {"dev": rows[:16], "train": rows[16:]}
for split, part in general.items():
    write("data-od", split, [{**r, "split": split} for r in part])
    tools = [{**r, "group": "tools", "source_group": r["group"]} for r in map(json.loads, open(f"{S}/data-fn5/{split}.jsonl"))
             if r.get("group") in ("device", "personal", "commerce", "special", "functions")]
    write("data-od2", split, tools + [{**r, "split": split} for r in part])
