"""``botpsy parity``: does each GGUF compute what the checkpoint computes in transformers?

For every GGUF file in an export folder, on the same token ids:

* logits over a mixed prompt set (chat turns with tools, English, Chinese, JSON, code,
  emoji): max |logit difference|, top-1 agreement and mean KL(transformers || GGUF);
* greedy generation from a few chat prompts: identical token ids and text?
* tokenization of the mixed text set by llama.cpp (``special=True``) vs the Hugging Face
  tokenizer: identical ids?

Thresholds (``THRESHOLDS``): float formats must give identical greedy text and 100% top-1;
Q8_0 top-1 >= 99% and KL <= 1e-3; Q4_K_M top-1 >= 90% and KL <= 3e-2 (meant for a trained
model); a LoRA adapter file on its base (``lora``) as Q8_0. Tokenizer agreement must be 100% for
every file.

For float formats top-1 counts near-ties as agreement: where the checkpoint's own top two
logits are closer than ``tie_margin`` (0.05), bf16 rounding (logit shifts of ~1e-2) may pick
either, and that says nothing about the conversion. The raw top-1 is reported beside it.
Quantized formats are judged on raw top-1; their thresholds already allow for flips. The report goes to ``GGUF_DIR/parity.json``; the
exit status is 1 when a threshold is missed.

Example::

    botpsy parity runs/speedrun/sft runs/speedrun/gguf
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from botpsy.export.gguf_file import GGUFFileError, check_gguf_file
from botpsy.export.quantize import file_name
from botpsy.output import emit, table

# Texts for tokenizer agreement and logit comparison. The chat text (with special tokens,
# a tool call and a tool result) is added by ``chat_texts``.
MIXED_TEXTS = {
    "english": "Set an alarm for 7:30 tomorrow morning and call it gym. Don't forget: it's Alice's birthday!",
    "chinese": "你好，请帮我把明天下午三点的会议改到四点，并提醒张伟带上报告。",
    "json": '{"name": "send_message", "arguments": {"to": "Alice", "body": "I\'ll be late", "urgent": true, "count": 3}}',
    "code": "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])  # 0 1 1 2\n",
    "emoji": "Great job 🎉🚀✅ — café, naïve, Straße; 日本語のテキスト; русский; العربية 👍🏽",
    "spacing": "  several   spaces\t\ttabs\n\n\nnewlines 12345678 3.14159 -42 ...!!! ??",
}

_TOOLS = [{"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.", "parameters": {
    "type": "object", "properties": {"hour": {"type": "integer"}, "minute": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["hour", "minute"]}}}]
_CONVERSATION = [
    {"role": "system", "content": "You are a helpful on-device assistant."},
    {"role": "user", "content": "Wake me at 7:30 for the gym."},
    {"role": "assistant", "content": "", "reasoning_content": "The user wants an alarm; set_alarm takes hour and minute.",
     "tool_calls": [{"type": "function", "function": {"name": "set_alarm", "arguments": {"hour": 7, "minute": 30, "label": "gym"}}}]},
    {"role": "tool", "content": '{"ok": true, "id": 4}'},
    {"role": "assistant", "content": "Done: your gym alarm is set for 7:30."},
]


@dataclass(frozen=True)
class Thresholds:
    min_top1: float  # fraction of positions where the argmax agrees (up to tie_margin)
    max_kl: float | None  # mean KL(transformers || GGUF) in nats
    greedy_identical: bool  # every greedy continuation must match token for token
    tie_margin: float = 0.0  # reference logit gap below which either pick counts as agreeing


THRESHOLDS = {
    "f32": Thresholds(1.0, None, True, tie_margin=0.05),
    "bf16": Thresholds(1.0, None, True, tie_margin=0.05),
    "f16": Thresholds(1.0, None, True, tie_margin=0.05),
    "q8_0": Thresholds(0.99, 1e-3, False),
    "q4_k_m": Thresholds(0.90, 3e-2, False),
    # The adapter on the quantized base it was trained on: what remains is llama.cpp's 8-bit
    # rounding of activations in quantized dot products, as for Q8_0.
    "lora": Thresholds(0.99, 1e-3, False),
}


@dataclass
class ParityConfig:
    """Compare each GGUF of an export folder with the checkpoint it came from; exit 1 on a missed threshold."""

    checkpoint: str = field(default="runs/speedrun/sft", metadata={"help": "Checkpoint folder the GGUFs were exported from.", "positional": True})
    gguf_dir: str = field(default="runs/speedrun/gguf", metadata={"help": "Folder written by `botpsy export`.", "positional": True})
    formats: str = field(default="", metadata={"help": "Comma-separated formats to check (default: those in the folder's meta.json)."})
    max_new_tokens: int = field(default=24, metadata={"help": "Greedy tokens generated per prompt."})
    n_ctx: int = field(default=1024, metadata={"help": "llama.cpp context size (raised when the longest text plus generation needs more)."})
    threads: int = field(default=0, metadata={"help": "llama.cpp threads (0: all cores)."})
    max_kl_q4_k_m: float = field(default=3e-2, metadata={"help": "KL bound for Q4_K_M (3e-2 is meant for a trained model)."})
    tie_margin: float = field(default=0.05, metadata={"help": "For float formats, reference top-2 logit gaps below this count as ties in top-1 agreement."})
    json: bool = field(default=False, metadata={"help": "Print the report as JSON."})


def chat_texts() -> dict[str, str]:
    """The full conversation with tools, and two short generation prompts (thinking on and off).

    The prompts leave out the long tools block, which the conversation already covers, to keep
    greedy generation in transformers quick.
    """
    from botpsy.chat.template import render

    return {
        "chat": render(_CONVERSATION, tools=_TOOLS, add_generation_prompt=False),
        "chat_prompt_thinking": render(_CONVERSATION[:2], enable_thinking=True),
        "chat_prompt_plain": render(_CONVERSATION[1:2], enable_thinking=False),
    }


def exported_formats(gguf_dir: Path) -> list[str]:
    """The formats the last export wrote (from meta.json), else every model-<format>.gguf present."""
    meta = gguf_dir / "meta.json"
    if meta.is_file():
        return list(json.loads(meta.read_text()).get("files", {}))
    return [n for n in THRESHOLDS if (gguf_dir / file_name(n)).exists()]


def find_files(gguf_dir: Path, formats: str) -> dict[str, Path]:
    """Format -> GGUF file to check; every file is header-checked before anything loads it."""
    if not gguf_dir.is_dir():
        raise FileNotFoundError(f"GGUF folder {gguf_dir} does not exist; run `botpsy export` first")
    names = [n.strip() for n in formats.split(",") if n.strip()] or exported_formats(gguf_dir)
    if not names:
        raise FileNotFoundError(f"{gguf_dir} holds no model-<format>.gguf files; run `botpsy export` first")
    files = {}
    for name in names:
        if name not in THRESHOLDS:
            raise ValueError(f"unknown format {name!r}; choose from {', '.join(THRESHOLDS)}")
        files[name] = check_gguf_file(gguf_dir / file_name(name)).path
    return files


# ---------------------------------------------------------------- the two sides


@dataclass
class Outputs:
    """What one implementation computed: logits per text, greedy ids per prompt, token ids per text."""

    logits: dict[str, np.ndarray]
    greedy: dict[str, list[int]]
    tokens: dict[str, list[int]]


def transformers_outputs(model, tokenizer, texts: dict[str, str], prompts: dict[str, str],
                         max_new_tokens: int, stop_ids: list[int]) -> Outputs:
    import torch

    tokens = {k: tokenizer(t, add_special_tokens=False)["input_ids"] for k, t in texts.items()}
    model.eval()
    with torch.no_grad():
        logits = {k: model(torch.tensor([ids])).logits[0].float().numpy() for k, ids in tokens.items()}
        greedy = {}
        for key in prompts:
            prompt = torch.tensor([tokens[key]])
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                 max_new_tokens=max_new_tokens, eos_token_id=stop_ids, pad_token_id=stop_ids[-1])
            greedy[key] = out[0, prompt.shape[1]:].tolist()
    return Outputs(logits, {k: _cut_at_stop(v, stop_ids) for k, v in greedy.items()}, tokens)


def _cut_at_stop(ids: list[int], stop_ids: list[int]) -> list[int]:
    """Generated ids up to and including the first stop token (generate pads after it)."""
    for i, t in enumerate(ids):
        if t in stop_ids:
            return ids[: i + 1]
    return ids


def load_llama(path: Path, n_ctx: int, threads: int):
    from botpsy.runtime.llama_backend import open_llama

    try:
        return open_llama(path, n_ctx, threads, logits_all=True)
    except ValueError as exc:
        raise GGUFFileError(f"llama.cpp could not load {path}: {exc}") from None


def llama_outputs(path: Path, reference: Outputs, texts: dict[str, str], prompts: dict[str, str],
                  config: ParityConfig, stop_ids: list[int]) -> Outputs:
    """Run the GGUF at ``path`` on the reference's token ids (not its own tokenization)."""
    longest = max(len(ids) for ids in reference.tokens.values()) + config.max_new_tokens + 1
    llm = load_llama(path, max(config.n_ctx, longest), config.threads)
    try:
        tokens = {k: llm.tokenize(t.encode("utf-8"), add_bos=False, special=True) for k, t in texts.items()}
        logits = {}
        for key, ids in reference.tokens.items():
            llm.reset()
            llm.eval(ids)
            logits[key] = np.array(llm.scores[: len(ids)], dtype=np.float32)
        greedy = {key: llama_greedy(llm, reference.tokens[key], config.max_new_tokens, stop_ids) for key in prompts}
    finally:
        llm.close()
    return Outputs(logits, greedy, tokens)


def llama_greedy(llm, prompt: list[int], max_new_tokens: int, stop_ids: list[int]) -> list[int]:
    llm.reset()
    llm.eval(prompt)
    generated: list[int] = []
    while len(generated) < max_new_tokens:
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        generated.append(token)
        if token in stop_ids:
            break
        llm.eval([token])
    return generated


# ---------------------------------------------------------------- comparing


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def compare(reference: Outputs, candidate: Outputs, tokenizer, tie_margin: float = 0.0) -> dict:
    """The parity numbers of ``candidate`` against ``reference``."""
    hf = np.concatenate([reference.logits[k] for k in reference.logits])
    gg = np.concatenate([candidate.logits[k] for k in reference.logits])
    log_p, log_q = log_softmax(hf), log_softmax(gg)
    kl = (np.exp(log_p) * (log_p - log_q)).sum(axis=-1)
    # The candidate's pick agrees up to ties when the reference scores it within tie_margin of its best.
    picked = hf[np.arange(len(hf)), gg.argmax(-1)]
    within_ties = hf.max(-1) - picked <= tie_margin
    greedy = {}
    for key, ids in reference.greedy.items():
        other = candidate.greedy[key]
        first_diff = next((i for i, (a, b) in enumerate(zip(ids, other)) if a != b), None)
        if first_diff is None and len(ids) != len(other):
            first_diff = min(len(ids), len(other))
        greedy[key] = {"identical": first_diff is None, "first_difference": first_diff,
                       "transformers": tokenizer.decode(ids), "gguf": tokenizer.decode(other)}
    token_mismatch = [k for k in reference.tokens if reference.tokens[k] != candidate.tokens[k]]
    return {
        "positions": int(hf.shape[0]),
        "max_abs_logit_diff": float(np.abs(hf - gg).max()),
        "top1_agreement_raw": float((hf.argmax(-1) == gg.argmax(-1)).mean()),
        "top1_agreement": float(within_ties.mean()),
        "tie_margin": tie_margin,
        "mean_kl": float(kl.mean()),
        "max_kl": float(kl.max()),
        "greedy_identical": sum(g["identical"] for g in greedy.values()) / len(greedy),
        "greedy": greedy,
        "tokenizer_agreement": 1 - len(token_mismatch) / len(reference.tokens),
        "tokenizer_mismatches": token_mismatch,
    }


def missed_thresholds(fmt: str, metrics: dict, thresholds: Thresholds) -> list[str]:
    """Readable lines for every threshold ``metrics`` misses (empty when all pass)."""
    missed = []
    if metrics["top1_agreement"] < thresholds.min_top1:
        ties = f" (near-ties within {thresholds.tie_margin} count as agreeing)" if thresholds.tie_margin else ""
        missed.append(f"{fmt}: top-1 agreement {metrics['top1_agreement']:.2%} < {thresholds.min_top1:.0%}{ties}")
    if thresholds.max_kl is not None and metrics["mean_kl"] > thresholds.max_kl:
        missed.append(f"{fmt}: mean KL {metrics['mean_kl']:.2e} > {thresholds.max_kl:.0e}")
    if thresholds.greedy_identical and metrics["greedy_identical"] < 1:
        differing = [k for k, g in metrics["greedy"].items() if not g["identical"]]
        missed.append(f"{fmt}: greedy text differs on {differing}")
    if metrics["tokenizer_agreement"] < 1:
        missed.append(f"{fmt}: llama.cpp tokenizes differently: {metrics['tokenizer_mismatches']}")
    return missed


def thresholds_for(fmt: str, config: ParityConfig) -> Thresholds:
    base = THRESHOLDS[fmt]
    if fmt == "q4_k_m":
        return replace(base, max_kl=config.max_kl_q4_k_m)
    return replace(base, tie_margin=config.tie_margin) if base.tie_margin else base


def run_parity(config: ParityConfig) -> dict:
    """Compare every selected GGUF with the checkpoint; return the report written to parity.json."""
    from botpsy.model.checkpoint import load_checkpoint

    gguf_dir = Path(config.gguf_dir)
    files = find_files(gguf_dir, config.formats)
    checkpoint = load_checkpoint(config.checkpoint, dtype="float32")
    tokenizer = checkpoint.tokenizer
    stop_ids = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    chats = chat_texts()
    texts = {**MIXED_TEXTS, **chats}
    prompts = {k: v for k, v in chats.items() if k.startswith("chat_prompt")}
    reference = transformers_outputs(checkpoint.model, tokenizer, texts, prompts, config.max_new_tokens, stop_ids)
    results, missed = {}, []
    for fmt, path in files.items():
        thresholds = thresholds_for(fmt, config)
        candidate = llama_outputs(path, reference, texts, prompts, config, stop_ids)
        metrics = compare(reference, candidate, tokenizer, thresholds.tie_margin)
        fmt_missed = missed_thresholds(fmt, metrics, thresholds)
        results[fmt] = {"file": path.name, "thresholds": asdict(thresholds), "passed": not fmt_missed, **metrics}
        missed += fmt_missed
    report = {"checkpoint": str(checkpoint.path), "gguf_dir": str(gguf_dir), "passed": not missed,
              "missed": missed, "formats": results}
    (gguf_dir / "parity.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report


def human_report(report: dict) -> str:
    rows = [{"format": fmt, "max|dlogit|": f"{r['max_abs_logit_diff']:.2e}", "top-1": f"{r['top1_agreement']:.2%}", "raw top-1": f"{r['top1_agreement_raw']:.2%}",
             "KL": f"{r['mean_kl']:.2e}", "greedy same": f"{r['greedy_identical']:.0%}",
             "tokenizer": f"{r['tokenizer_agreement']:.0%}", "pass": "yes" if r["passed"] else "NO"}
            for fmt, r in report["formats"].items()]
    lines = [table(rows)] + [f"missed: {m}" for m in report["missed"]]
    lines.append(f"report: {Path(report['gguf_dir']) / 'parity.json'}")
    return "\n".join(lines)


def main(config: ParityConfig) -> int:
    report = run_parity(config)
    emit(report, config.json, human_report)
    return 0 if report["passed"] else 1
