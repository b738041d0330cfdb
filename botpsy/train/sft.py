"""Stage 1 of the recipe: supervised fine-tuning on device-world agent trajectories.

Loss is on assistant tokens only (reasoning, calls, answers; see ``encode.py``). Batches
group similar lengths under a token budget, the learning rate warms up then follows a
cosine, gradients accumulate, the dev split is scored periodically (loss and exact-call
accuracy), and the full training state is checkpointed so a killed run resumes to the
same weights.

On one CPU::

    botpsy sft --init runs/speedrun/base --data runs/speedrun/data --out runs/speedrun/sft

On GPUs, the same command under ``accelerate launch`` (see ``configs/accelerate/``)::

    accelerate launch --config_file configs/accelerate/zero2.yaml -m botpsy.cli sft \\
        --init /models/Qwen3.5-0.8B --data runs/big/data --out runs/big/sft --batch-tokens 65536
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from botpsy.config import save_config
from botpsy.eval.report import pct
from botpsy.output import emit
from botpsy.train.lora import load_for_training, trainable_parameters


@dataclass
class SFTConfig:
    """Fine-tune a checkpoint on chat-format trajectories with loss on assistant tokens only."""

    init: str = field(default="runs/speedrun/base", metadata={"help": "Checkpoint to start from: a botpsy stage folder, a local Qwen3.5 checkpoint, a known base name (`botpsy models`) or a .gguf file."})
    data: str = field(default="runs/speedrun/data", metadata={"help": "Folder with train.jsonl and dev.jsonl from `botpsy data`."})
    out: str = field(default="runs/speedrun/sft", metadata={"help": "Output checkpoint folder (also holds train_state/ for resuming, curves.jsonl, and test_calls.jsonl: each scored test call)."})
    stage: str = field(default="sft", metadata={"help": "Stage name written to meta.json (teachers reuse this trainer)."})
    steps: int = field(default=400, metadata={"help": "Optimizer steps."})
    batch_tokens: int = field(default=8192, metadata={"help": "Padded tokens per micro-batch."})
    grad_accum: int = field(default=1, metadata={"help": "Micro-batches per optimizer step."})
    lora_rank: int = field(default=0, metadata={"help": "LoRA rank through peft on every linear layer, the tool-call tokens' rows trained beside it (botpsy.train.lora); OUT then holds only the adapter. An adapter folder as --init keeps training its own adapter (any rank > 0). 0: train every weight (the tiny model)."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (the update is scaled by alpha / rank)."})
    dtype: str = field(default="float32", metadata={"help": "Weight dtype while training (auto: bfloat16 where the hardware computes it natively, else float32; bfloat16 for the pretrained student: the adapter itself stays float32).", "choices": ["auto", "float32", "bfloat16"]})
    detach_context: bool = field(default=False, metadata={"help": "Encode the context before the first labelled token without gradient (forward only, cached): about 2.5x faster steps for the LoRA student, whose prompts are mostly context (botpsy.train.common.causal_lm_loss)."})
    lr: float = field(default=1e-3, metadata={"help": "Peak learning rate (the tiny model: 1e-3; above about 2e-3 it stopped learning to copy; a LoRA adapter: about 3e-4)."})
    min_lr_ratio: float = field(default=0.1, metadata={"help": "Final learning rate as a fraction of the peak."})
    warmup_steps: int = field(default=20, metadata={"help": "Linear warm-up steps."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    grad_clip: float = field(default=1.0, metadata={"help": "Gradient-norm clip."})
    max_length: int = field(default=2048, metadata={"help": "Longer sequences are skipped (and counted)."})
    loss_on: str = field(default="assistant", metadata={"help": "Tokens that carry loss: the assistant's own (SFT) or all tokens (plain language modelling, e.g. to pretrain a from-scratch base on in-domain text).", "choices": ["assistant", "all", "context"]})
    eval_every: int = field(default=100, metadata={"help": "Steps between dev-loss evaluations (0: only at the end, where exact-call accuracy is also scored)."})
    eval_calls_every: int = field(default=0, metadata={"help": "Steps between dev call checks (greedy first calls of --eval-examples dev examples, and which offered tool is likeliest); 0: only at the end."})
    dev_loss_sequences: int = field(default=64, metadata={"help": "Dev sequences whose loss is measured (0: all); the rest of dev.jsonl still feeds the call check."})
    eval_examples: int = field(default=24, metadata={"help": "Dev examples whose first call is generated and scored."})
    test_examples: int = field(default=100, metadata={"help": "At the end, score the first call of up to this many single-call test-split tasks (DATA/test.jsonl, held-out templates) and record it in meta.json."})
    eval_tool_choice: bool = field(default=True, metadata={"help": "Also rank the offered tools by likelihood in the call checks (one forward pass per offered tool and example, twice: costly for a 0.5B model on a CPU)."})
    eval_max_new_tokens: int = field(default=160, metadata={"help": "Generation limit for the dev call check."})
    save_every: int = field(default=50, metadata={"help": "Steps between resumable checkpoints."})
    resume: bool = field(default=True, metadata={"help": "Continue from OUT/train_state if it exists."})
    seed: int = field(default=0, metadata={"help": "Seed for data order."})
    threads: int = field(default=0, metadata={"help": "Torch CPU threads (0: torch's default)."})
    interrupt_after: int | None = field(default=None, metadata={"help": "Testing aid: stop after this step as if killed (state saved at the last checkpoint only)."})
    dry_run: bool = field(default=False, metadata={"help": "Load everything, report the plan (incl. any accelerate config in effect) and exit without training."})
    accelerate_config: str | None = field(default=None, metadata={"help": "With --dry-run: check this accelerate config (configs/accelerate/*.yaml) and show how it would launch."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; run `botpsy data` first")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n} is not valid JSON: {exc}") from None
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def encode_all(examples: list[dict], tokenizer, max_length: int, loss_on: str = "assistant"):
    from botpsy.train.encode import IGNORE, Encoded, encode_example

    items, skipped = [], 0
    for example in examples:
        encoded = encode_example(example, tokenizer, max_length)
        skipped += int(not encoded)
        if loss_on == "all":
            encoded = [Encoded(input_ids=e.input_ids, labels=list(e.input_ids)) for e in encoded]
        elif loss_on == "context":
            encoded = [Encoded(input_ids=e.input_ids, labels=[IGNORE if y != IGNORE else x for x, y in zip(e.input_ids, e.labels)])
                       for e in encoded]
        items.extend(e for e in encoded if e.n_loss_tokens)
    return items, skipped


def main(config: SFTConfig) -> int:
    import torch
    from accelerate import Accelerator

    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.train import common, dev_eval

    config.dtype = common.resolve_dtype(config.dtype)  # auto: bfloat16 only where the hardware has it
    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.out)
    ckpt, model, adapter_meta = load_for_training(config.init, config.lora_rank, config.lora_alpha, config.dtype)
    tokenizer = ckpt.tokenizer
    train_rows = read_jsonl(Path(config.data) / "train.jsonl")
    dev_rows = read_jsonl(Path(config.data) / "dev.jsonl")
    train, skipped = encode_all(train_rows, tokenizer, config.max_length, config.loss_on)
    dev, _ = encode_all(dev_rows, tokenizer, config.max_length)
    if config.dev_loss_sequences:
        dev = dev[: config.dev_loss_sequences]
    if not train:
        raise ValueError(f"no training sequences fit max_length={config.max_length}")
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    for hint in lora_hints(config, common.attention_only(model)):
        print(f"[{config.stage}] note: {hint}", file=sys.stderr)
    plan = {
        "init": config.init, "dtype": config.dtype, "train_sequences": len(train), "skipped_too_long": skipped, "dev_sequences": len(dev),
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in trainable_parameters(model)), "distributed_type": str(accelerator.distributed_type),
        "num_processes": accelerator.num_processes, "mixed_precision": accelerator.mixed_precision,
        "accelerate_config": os.environ.get("ACCELERATE_CONFIG_FILE"),
    }
    if config.dry_run:
        if config.accelerate_config:
            from botpsy.train.launch import accelerate_plan

            argv = ["sft", "--init", config.init, "--data", config.data, "--out", config.out]
            plan["launch_plan"] = accelerate_plan(config.accelerate_config, config.batch_tokens, config.grad_accum, argv)
        emit(plan, config.json, lambda p: "\n".join(f"{k}: {v}" for k, v in p.items()))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, out / "config.json.sft")
    result = train_loop(config, model, tokenizer, train, dev, dev_rows, accelerator, out, common, dev_eval)
    if result is None:  # interrupted on purpose (tests)
        return 0
    model = accelerator.unwrap_model(model)
    test_file = Path(config.data) / "test.jsonl"
    if config.test_examples and test_file.is_file():
        singles = [r for r in read_jsonl(test_file) if r.get("kind") == "single"][: config.test_examples]
        records: list[dict] = []  # each call, plain and constrained, for reading what fails
        result["test_single_call"] = {**dev_eval.call_accuracy(model, tokenizer, singles, config.eval_max_new_tokens,
                                                               records=records),
                                      **(dev_eval.tool_choice(model, tokenizer, singles) if config.eval_tool_choice else {}),
                                      # as the runtime decodes by default: calls kept to the offered tools
                                      "constrained": dev_eval.call_accuracy(model, tokenizer, singles,
                                                                            config.eval_max_new_tokens, constrained=True,
                                                                            records=records)}
        if accelerator.is_main_process:
            write_jsonl(out / "test_calls.jsonl", records)
    meta = {"init": config.init, "init_stage": ckpt.meta.get("stage"), "data": config.data,
            **adapter_meta,
            "data_meta": _read_meta(Path(config.data)), "config": vars(config), **plan, **result}
    if accelerator.is_main_process:
        save_checkpoint(model, tokenizer, out, stage=config.stage, meta=meta)
    emit(result, config.json, lambda r: summary_line(config.stage, r, out))
    return 0


def lora_hints(config: SFTConfig, attention_only: bool, native_bf16: bool | None = None) -> list[str]:
    """Settings a LoRA run on a pretrained base usually wants, where the flags leave them off.

    Measured on the 0.5B student (2 cores): float32 trains at 104 tokens/s against bf16's 250, and
    float32 without ``--detach-context`` ran out of 23 GB on its first 8,192-token batch.

    >>> lora_hints(SFTConfig(lora_rank=16), attention_only=True, native_bf16=True)[0][:22]
    'LoRA in float32 trains'
    >>> lora_hints(SFTConfig(lora_rank=16, dtype="bfloat16", detach_context=True), attention_only=True)
    []
    >>> lora_hints(SFTConfig(), attention_only=True)  # full fine-tuning: no hints
    []
    """
    if not config.lora_rank:
        return []
    hints = []
    if native_bf16 is None:
        from botpsy.train.common import resolve_dtype

        native_bf16 = resolve_dtype("auto") == "bfloat16"
    if config.dtype == "float32" and native_bf16:
        hints.append("LoRA in float32 trains at about half the speed of --dtype bfloat16 (or auto) on this hardware")
    if attention_only and not config.detach_context:
        hints.append("without --detach-context every context token carries gradient: about 2.5x slower steps and "
                     "far more memory (botpsy student sets it)")
    return hints


def summary_line(stage: str, r: dict, out: Path) -> str:
    line = (f"{stage}: {r['steps']} steps, final dev loss {r['dev']['loss']:.3f}, "
            f"dev exact calls {r['dev'].get('exact_call_rate', 0):.0%}")
    test = r.get("test_single_call")
    if test:
        line += f", test single-call: schema-valid {test['schema_valid_rate']:.0%}, exact {test['exact_call_rate']:.0%}"
        if "tool_choice_rate" in test:
            line += (f", picks the right offered tool {test['tool_choice_rate']:.0%} (chance {test['chance_rate']:.0%}; "
                     f"with another request swapped in {pct(test['tool_choice_rate_other_request'])})")
        line += (f"; constrained decoding: schema-valid {test['constrained']['schema_valid_rate']:.0%}, "
                 f"exact {test['constrained']['exact_call_rate']:.0%}")
    return line + f" -> {out}"


def _read_meta(folder: Path) -> dict:
    path = folder / "meta.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def train_loop(config, model, tokenizer, train, dev, dev_rows, accelerator, out, common, dev_eval):
    """The optimisation loop; returns the final metrics, or None when interrupted on purpose."""
    import torch
    from tqdm import tqdm

    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, common.cosine_with_warmup(config.warmup_steps, config.steps, config.min_lr_ratio))
    model, optimizer, schedule = accelerator.prepare(model, optimizer, schedule)
    progress = common.Progress()
    accelerator.register_for_checkpointing(progress)
    if config.resume and common.load_training_state(accelerator, out):
        print(f"[{config.stage}] resuming at step {progress.step}")
    curves = common.CurveWriter(out / "curves.jsonl", progress.step)
    pad_id = tokenizer.pad_token_id
    if config.eval_calls_every and progress.step == 0:  # the learning curve's first point: the untrained start
        curves.write({"step": 0, "tokens_seen": 0,
                      "dev": call_checks(config, accelerator.unwrap_model(model), tokenizer, dev_rows, dev_eval)})
    speed = common.Throughput()
    bar = tqdm(total=config.steps, initial=progress.step, desc=config.stage, unit="step", disable=not accelerator.is_main_process)
    while progress.step < config.steps:
        batches = common.token_budget_batches(train, config.batch_tokens, config.seed, progress.epoch)
        shard = batches[accelerator.process_index :: accelerator.num_processes]
        while progress.batch_in_epoch < len(shard) and progress.step < config.steps:
            model.train()
            losses, step_tokens = [], 0
            micro = shard[progress.batch_in_epoch : progress.batch_in_epoch + config.grad_accum]
            for batch in micro:
                ids, labels = common.collate([train[i] for i in batch], pad_id)
                ids, labels = ids.to(accelerator.device), labels.to(accelerator.device)
                if accelerator.num_processes == 1:
                    loss = common.causal_lm_loss(model, ids, labels, config.detach_context)
                else:  # the wrapped model's own forward keeps gradient synchronisation intact
                    loss = model(input_ids=ids, labels=labels).loss
                # Accumulate by hand: each micro-batch contributes an equal share of the step.
                accelerator.backward(loss / len(micro))
                losses.append(loss.item())
                step_tokens += int(ids.numel())
            progress.batch_in_epoch += len(micro)
            progress.tokens_seen += step_tokens
            accelerator.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            progress.step += 1
            record = {"step": progress.step, "tokens_seen": progress.tokens_seen, "loss": sum(losses) / len(losses),
                      "lr": schedule.get_last_lr()[0],
                      "tokens_per_s": speed.add(step_tokens)}
            if config.eval_every and progress.step % config.eval_every == 0 and progress.step < config.steps:
                # Periodic checks score loss only; greedy call generation runs once, at the end.
                record["dev"] = {"loss": dev_eval.mean_loss(accelerator.unwrap_model(model), dev, pad_id)}
            if config.eval_calls_every and progress.step % config.eval_calls_every == 0 and progress.step < config.steps:
                record.setdefault("dev", {}).update(call_checks(config, accelerator.unwrap_model(model), tokenizer, dev_rows, dev_eval))
            curves.write(record)
            bar.update(1)
            bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_s']:.0f}")
            if progress.step % config.save_every == 0:
                common.save_training_state(accelerator, out)
            if config.interrupt_after is not None and progress.step >= config.interrupt_after:
                bar.close()
                return None
        if progress.batch_in_epoch >= len(shard):  # the epoch is done (not just the steps asked for)
            progress.epoch += 1
            progress.batch_in_epoch = 0
    bar.close()
    common.save_training_state(accelerator, out)
    dev_metrics = evaluate(config, accelerator.unwrap_model(model), tokenizer, dev, dev_rows, dev_eval, pad_id)
    curves.write({"step": progress.step, "tokens_seen": progress.tokens_seen, "dev": dev_metrics})
    # Recomputed here: a resumed run that was already done never entered the loop above.
    batches = common.token_budget_batches(train, config.batch_tokens, config.seed, progress.epoch)
    epochs = progress.epoch + progress.batch_in_epoch / max(1, len(batches[accelerator.process_index :: accelerator.num_processes]))
    return {"steps": progress.step, "epochs": round(epochs, 3), "tokens_seen": progress.tokens_seen, "dev": dev_metrics}


def evaluate(config, model, tokenizer, dev, dev_rows, dev_eval, pad_id) -> dict:
    return {"loss": dev_eval.mean_loss(model, dev, pad_id), **call_checks(config, model, tokenizer, dev_rows, dev_eval)}


def call_checks(config, model, tokenizer, dev_rows, dev_eval) -> dict:
    """Greedy first-call accuracy and offered-tool choice on the first ``eval_examples`` dev call turns."""
    if not config.eval_examples:
        return {}
    examples = _call_examples(dev_rows, config.eval_examples)
    metrics = dev_eval.call_accuracy(model, tokenizer, examples, config.eval_max_new_tokens)
    if config.eval_tool_choice:
        metrics.update(dev_eval.tool_choice(model, tokenizer, examples))
    return metrics


def _call_examples(rows: list[dict], n: int) -> list[dict]:
    from botpsy.train.dev_eval import first_call_turn

    return [r for r in rows if first_call_turn(r) is not None][:n]
