"""Trainability probe: does the reference architecture learn to copy, at which learning rates?

    .venv/bin/python bench/copy_probe.py            # writes bench_out/copy_probe.json
    .venv/bin/python bench/copy_probe.py --lrs 1e-3,3e-3 --layouts hybrid --json
    .venv/bin/python bench/copy_probe.py --lrs 1e-3 --prefix 200 --batch 16 --out bench_out/copy_probe_prefix200.json
    .venv/bin/python bench/copy_probe.py --task induction --lrs 1e-3 --layouts hybrid --prefix 16 --steps 800 \
        --batch 16 --decay-init log_uniform --out bench_out/induction_probe_hybrid.json   # and --layouts attention
    .venv/bin/python bench/copy_probe.py --task rotation --length 48 --lrs 1e-3 --layouts hybrid,attention,gpt2 \
        --steps 600 --batch 16 --decay-init log_uniform --threads 1 --out bench_out/rotation_probe.json

For each layout (``hybrid``: the speedrun's tiny preset, three Gated DeltaNet layers then one
attention layer; ``hybrid2``: DeltaNet and attention alternating; ``attention``: the same model
with every layer full attention; ``gpt2``: a GPT-2 of the same width, depth and FFN size, learned
positions and no gates, as a standard transformer to compare with) and each peak learning rate, a fresh model (seed 0, the speedrun's 4,096-token vocabulary size) trains on
``botpsy.model.probe``'s copy task and the copy accuracy is recorded every 25 steps, with the
residual-stream norms at the end. The SFT default learning rate must let the hybrid model copy
(accuracy >= 0.95 within the probe's steps).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from botpsy.config import parse_config
from botpsy.output import table, write_benchmark

LAYOUTS = {"hybrid": 4, "hybrid2": 2, "attention": 1, "gpt2": None}  # full_attention_interval (gpt2: not Qwen3.5)


@dataclass
class ProbeBenchConfig:
    """Copy-task trainability of the reference model by layout and learning rate."""

    lrs: str = field(default="1e-3,2e-3,3e-3", metadata={"help": "Comma-separated peak learning rates."})
    layouts: str = field(default="hybrid,attention", metadata={"help": "Comma-separated: " + ", ".join(LAYOUTS)})
    steps: int = field(default=150, metadata={"help": "Training steps per probe."})
    task: str = field(default="copy", metadata={
        "help": "copy: repeat a string right after a separator (a fixed distance: position alone solves it); "
                "induction: the repeat follows a random gap of tokens from the same alphabet, so only looking the "
                "previous token up does (botpsy.model.probe.induction_batch); rotation: distinct tokens, then the "
                "same tokens from a random offset, wrapping (a denser induction task, rotation_batch).",
        "choices": ["copy", "induction", "rotation"]})
    length: int = field(default=8, metadata={"help": "Tokens in the string to copy (rotation: up to 100)."})
    prefix: int = field(default=0, metadata={"help": "Random filler tokens before the string (distance to copy across); for --task induction, the filler split around the first copy."})
    batch: int = field(default=32, metadata={"help": "Sequences per step."})
    decay_init: str = field(default="transformers", metadata={
        "help": "Gated DeltaNet time steps of the fresh models: transformers' dt_bias = 1 (what "
                "bench_out/copy_probe.json was measured with) or log_uniform (botpsy init's default).",
        "choices": ["transformers", "log_uniform"]})
    beta2: float = field(default=0.999, metadata={
        "help": "AdamW's second-moment decay: 0.999 is torch's default, which every earlier probe JSON used; SFT and the "
                "other training stages use 0.95."})
    threads: int = field(default=2, metadata={"help": "torch threads."})
    out: str = field(default="bench_out/copy_probe.json", metadata={"help": "Result JSON."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def run(config: ProbeBenchConfig) -> dict:
    import dataclasses
    import time

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen3_5ForCausalLM

    from botpsy.model import cpu_kernels
    from botpsy.model.probe import copy_probe
    from botpsy.model.reference import PRESETS, hf_config, init_linear_decay
    from botpsy.train.sft import SFTConfig

    cpu_kernels.install()
    torch.set_num_threads(config.threads)
    rows = []
    for layout in config.layouts.split(","):
        spec = PRESETS["tiny"]
        if LAYOUTS[layout] is not None:
            spec = dataclasses.replace(spec, full_attention_interval=LAYOUTS[layout])
        for lr in (float(x) for x in config.lrs.split(",")):
            torch.manual_seed(0)
            if layout == "gpt2":
                model = GPT2LMHeadModel(GPT2Config(
                    vocab_size=4096, n_positions=1024, n_embd=spec.hidden_size, n_layer=spec.num_hidden_layers,
                    n_head=spec.num_attention_heads, n_inner=spec.intermediate_size, bos_token_id=2, eos_token_id=2))
                layer_types = ["gpt2_attention"] * spec.num_hidden_layers
            else:
                model = Qwen3_5ForCausalLM(hf_config(spec, vocab_size=4096, eos_token_id=2, pad_token_id=0))
                if config.decay_init == "log_uniform":
                    init_linear_decay(model, seed=0)
                layer_types = spec.layer_types
            start = time.perf_counter()
            result = copy_probe(model, lr, steps=config.steps, prefix=config.prefix, batch=config.batch, task=config.task,
                                length=config.length, beta2=config.beta2)
            rows.append({"layout": layout, "layer_types": layer_types, "lr": lr,
                         "final_copy_accuracy": round(result.final_accuracy, 4), "steps_to_95": result.steps_to_95,
                         "curve": [[s, round(a, 4)] for s, a in result.accuracy],
                         "residual_rms": [round(x, 3) for x in result.norms],
                         "seconds": round(time.perf_counter() - start, 1)})
            print(f"[copy_probe] {layout} lr {lr:g}: accuracy {result.final_accuracy:.3f}", file=sys.stderr)
    default_lr = SFTConfig().lr
    hybrid_default = [r for r in rows if r["layout"] == "hybrid" and r["lr"] == default_lr]
    return {"config": dataclasses.asdict(config), "sft_default_lr": default_lr, "probes": rows,
            "target": "hybrid model at the SFT default lr reaches copy accuracy >= 0.95",
            "target_met": bool(hybrid_default) and hybrid_default[0]["steps_to_95"] is not None}


def human(result: dict) -> str:
    rows = [{"layout": r["layout"], "lr": f"{r['lr']:g}", "copy accuracy": f"{r['final_copy_accuracy']:.3f}",
             "steps to 0.95": r["steps_to_95"] or "-",
             "residual rms (embeddings, then each layer)": " / ".join(f"{x:g}" for x in r["residual_rms"])}
            for r in result["probes"]]
    return table(rows) + (
        f"\nSFT default lr {result['sft_default_lr']:g}: target {'met' if result['target_met'] else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    config = parse_config(ProbeBenchConfig, argv, prog="copy_probe")
    result = run(config)
    write_benchmark(result, config.out, config.json, human)
    return 0 if result["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
