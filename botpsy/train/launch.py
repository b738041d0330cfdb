"""Multi-GPU launch plans: read an accelerate config and say how a stage would run under it.

The training stages are plain ``accelerate`` programs, so ``accelerate launch --config_file
configs/accelerate/zero2.yaml -m botpsy.cli sft ...`` runs them on many GPUs. GPUs are not
available here, so ``--dry-run --accelerate-config FILE`` checks the file (it parses, its
distributed type is supported, FSDP wraps a layer class that exists in Qwen3.5, the ZeRO
stage is valid) and reports the effective batch and the launch command.
"""

from __future__ import annotations

from pathlib import Path

SUPPORTED = {"NO", "MULTI_GPU", "DEEPSPEED", "FSDP", "MULTI_CPU"}


def accelerate_plan(path: str | Path, batch_tokens: int, grad_accum: int, stage_argv: list[str]) -> dict:
    """Validate an accelerate config file and describe the run it would launch."""
    from accelerate.commands.config.config_args import load_config_from_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"accelerate config {path} does not exist")
    try:
        cfg = load_config_from_file(str(path))
    except Exception as exc:  # accelerate raises several types for bad YAML / fields
        raise ValueError(f"accelerate config {path} does not parse: {exc}") from None
    kind = str(cfg.distributed_type).split(".")[-1]
    if kind not in SUPPORTED:
        raise ValueError(f"accelerate config {path}: distributed_type {kind} is not supported (use one of {sorted(SUPPORTED)})")
    problems = []
    if kind == "DEEPSPEED":
        stage = (cfg.deepspeed_config or {}).get("zero_stage")
        if stage not in (0, 1, 2, 3):
            problems.append(f"deepspeed zero_stage must be 0-3, found {stage!r}")
    if kind == "FSDP":
        layer = (cfg.fsdp_config or {}).get("fsdp_transformer_layer_cls_to_wrap")
        from transformers.models.qwen3_5 import modeling_qwen3_5

        if layer and not hasattr(modeling_qwen3_5, str(layer)):
            problems.append(f"fsdp_transformer_layer_cls_to_wrap {layer!r} is not a Qwen3.5 layer class")
    if problems:
        raise ValueError(f"accelerate config {path}: " + "; ".join(problems))
    processes = int(cfg.num_processes or 1)
    return {
        "config_file": str(path),
        "distributed_type": kind,
        "num_processes": processes,
        "mixed_precision": str(cfg.mixed_precision),
        "zero_stage": (cfg.deepspeed_config or {}).get("zero_stage") if kind == "DEEPSPEED" else None,
        "tokens_per_optimizer_step": batch_tokens * grad_accum * processes,
        "launch": "accelerate launch --config_file " + str(path) + " -m botpsy.cli " + " ".join(stage_argv),
    }
