"""SFT on a tiny model: the loss falls, weights change, and a killed run resumes exactly."""

from __future__ import annotations

import json

import pytest
import torch

from botpsy.model.checkpoint import load_checkpoint
from botpsy.train.sft import SFTConfig, main
from tests.chat.conversations import ALARM, WEATHER, A, S, U, call

pytestmark = pytest.mark.slow

CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito"]


def make_examples(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        city = CITIES[i % len(CITIES)]
        rows.append({
            "messages": [S("You are a phone assistant."), U(f"weather in {city}?"),
                         A("", f"Weather for {city}.", [call("get_weather", city=city)])],
            "tools": [WEATHER, ALARM], "thinking": i % 2 == 0, "kind": "single",
        })
    return rows


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for split, n in (("train", 24), ("dev", 4), ("test", 3)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make_examples(n)))
    return folder


def run(tiny_checkpoint, data_dir, out, **overrides):
    settings = dict(init=str(tiny_checkpoint), data=str(data_dir), out=str(out), steps=8, batch_tokens=2048,
                    lr=3e-3, warmup_steps=2, eval_every=0, eval_examples=2, eval_max_new_tokens=24, save_every=2, threads=1)
    config = SFTConfig(**{**settings, **overrides})
    assert main(config) == 0


def test_loss_falls_and_weights_change(tiny_checkpoint, data_dir, tmp_path):
    out = tmp_path / "sft"
    run(tiny_checkpoint, data_dir, out, eval_calls_every=4)
    curves = [json.loads(line) for line in (out / "curves.jsonl").read_text().splitlines()]
    losses = [c["loss"] for c in curves if "loss" in c]
    assert len(losses) == 8 and losses[-1] < losses[0]
    periodic = [c for c in curves if c.get("step") == 4][0]["dev"]  # the periodic call check
    assert {"exact_call_rate", "schema_valid_rate", "tool_choice_rate"} <= set(periodic)
    before, after = load_checkpoint(tiny_checkpoint).model, load_checkpoint(out).model
    changed = [n for (n, p), (_, q) in zip(before.state_dict().items(), after.state_dict().items()) if not torch.equal(p, q)]
    assert changed
    meta = json.loads((out / "meta.json").read_text())
    assert meta["stage"] == "sft" and meta["steps"] == 8 and "exact_call_rate" in meta["dev"]
    test = meta["test_single_call"]
    assert "exact_call_rate" in test["constrained"] and test["constrained"]["call_examples"] == test["call_examples"]
    records = [json.loads(line) for line in (out / "test_calls.jsonl").read_text().splitlines()]
    assert [r["constrained"] for r in records] == [False] * 3 + [True] * 3  # plain, then constrained
    assert sum(r["exact"] for r in records if r["constrained"]) / 3 == test["constrained"]["exact_call_rate"]


def test_killed_run_resumes_to_identical_weights(tiny_checkpoint, data_dir, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run(tiny_checkpoint, data_dir, straight)
    run(tiny_checkpoint, data_dir, resumed, interrupt_after=5)  # state saved at step 4, step 5 lost
    assert not (resumed / "model.safetensors").exists()
    run(tiny_checkpoint, data_dir, resumed)
    a, b = load_checkpoint(straight).model.state_dict(), load_checkpoint(resumed).model.state_dict()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_a_run_that_stops_mid_epoch_is_continued_where_it_stopped(tiny_checkpoint, data_dir, tmp_path):
    """Stopping at --steps inside an epoch saves that position: asking the same folder for more steps
    goes on with the same epoch's next batches, as one longer run would (not a fresh shuffle)."""
    straight, continued = tmp_path / "straight", tmp_path / "continued"
    run(tiny_checkpoint, data_dir, straight, steps=6, batch_tokens=384)
    run(tiny_checkpoint, data_dir, continued, steps=3, batch_tokens=384)
    meta = json.loads((continued / "meta.json").read_text())
    assert 0 < meta["epochs"] < 1  # a fraction of the first epoch, not "1"
    run(tiny_checkpoint, data_dir, continued, steps=6, batch_tokens=384)
    tokens = lambda out: [c["tokens_seen"] for c in map(json.loads, (out / "curves.jsonl").read_text().splitlines()) if "loss" in c]
    assert tokens(continued) == tokens(straight) and len(tokens(straight)) == 6
    assert json.loads((continued / "meta.json").read_text())["epochs"] == json.loads((straight / "meta.json").read_text())["epochs"]
    run(tiny_checkpoint, data_dir, continued, steps=6, batch_tokens=384)  # asked again once done: no new steps, no error
    assert tokens(continued) == tokens(straight)


def test_dry_run_reports_plan(tiny_checkpoint, data_dir, tmp_path, capsys):
    run(tiny_checkpoint, data_dir, tmp_path / "dry", dry_run=True, json=True)
    plan = json.loads(capsys.readouterr().out)
    assert plan["train_sequences"] == 24 and plan["num_processes"] == 1
    assert not (tmp_path / "dry").exists()


def test_dtype_auto_is_resolved_before_loading(tiny_checkpoint, data_dir, tmp_path, capsys):
    from botpsy.train.common import resolve_dtype

    run(tiny_checkpoint, data_dir, tmp_path / "dry", dry_run=True, json=True, dtype="auto")
    assert json.loads(capsys.readouterr().out)["dtype"] == resolve_dtype("auto")


@pytest.mark.parametrize("name,kind,processes", [("zero2", "DEEPSPEED", 8), ("fsdp", "FSDP", 8), ("cpu", "NO", 1)])
def test_accelerate_configs_parse_and_dry_run_uses_them(tiny_checkpoint, data_dir, tmp_path, capsys, name, kind, processes):
    from tests.chat.official_template import REPO

    config_file = REPO / "configs/accelerate" / f"{name}.yaml"
    run(tiny_checkpoint, data_dir, tmp_path / "dry", dry_run=True, json=True, accelerate_config=str(config_file))
    plan = json.loads(capsys.readouterr().out)["launch_plan"]
    assert plan["distributed_type"] == kind and plan["num_processes"] == processes
    assert plan["tokens_per_optimizer_step"] == 2048 * processes
    assert plan["launch"].startswith(f"accelerate launch --config_file {config_file} -m botpsy.cli sft")


def test_broken_accelerate_config_is_a_clear_error(tmp_path):
    from botpsy.train.launch import accelerate_plan

    bad = tmp_path / "bad.yaml"
    bad.write_text("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_transformer_layer_cls_to_wrap: LlamaLayer\n")
    with pytest.raises(ValueError, match="LlamaLayer"):
        accelerate_plan(bad, 1024, 1, ["sft"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        accelerate_plan(tmp_path / "none.yaml", 1024, 1, ["sft"])


def test_accelerate_launch_runs_the_stage_on_cpu(tiny_checkpoint, data_dir, tmp_path):
    """The real launcher, with the CPU config, starts `botpsy sft` and the stage sees it."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.chat.official_template import REPO

    launcher = Path(sys.executable).with_name("accelerate")
    cmd = [str(launcher), "launch", "--config_file", str(REPO / "configs/accelerate/cpu.yaml"), "-m", "botpsy.cli", "sft",
           "--init", str(tiny_checkpoint), "--data", str(data_dir), "--out", str(tmp_path / "o"), "--dry-run", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout[done.stdout.index("{"):])
    assert plan["distributed_type"] == "DistributedType.NO" and plan["train_sequences"] == 24


def test_loss_on_all_or_context_tokens(tiny_tokenizer):
    from botpsy.train.encode import IGNORE
    from botpsy.train.sft import encode_all

    tokenizer = tiny_tokenizer
    examples = make_examples(2)
    assistant, _ = encode_all(examples, tokenizer, 2048)
    every, _ = encode_all(examples, tokenizer, 2048, loss_on="all")
    context, _ = encode_all(examples, tokenizer, 2048, loss_on="context")
    for a, e, c in zip(assistant, every, context):
        assert a.input_ids == e.input_ids == c.input_ids and e.labels == e.input_ids
        # context labels are exactly the tokens the assistant labels leave out
        assert all((x == IGNORE) != (y == IGNORE) for x, y in zip(a.labels, c.labels))
        assert 0 < a.n_loss_tokens < c.n_loss_tokens


def test_lora_hints_name_the_settings_a_pretrained_base_wants():
    import doctest

    from botpsy.train import sft

    assert doctest.testmod(sft).failed == 0
    slow = sft.lora_hints(SFTConfig(lora_rank=16), attention_only=True, native_bf16=True)
    assert len(slow) == 2 and "--dtype bfloat16" in slow[0] and "--detach-context" in slow[1]
    # a hybrid model ignores --detach-context (botpsy.train.common.hidden_after), so it is not suggested
    assert len(sft.lora_hints(SFTConfig(lora_rank=16), attention_only=False, native_bf16=True)) == 1
    # where bfloat16 is emulated (AVX2-only CPUs), float32 is the fast choice and no hint is given
    assert sft.lora_hints(SFTConfig(lora_rank=16, detach_context=True), attention_only=True, native_bf16=False) == []
