"""Train botpsy's byte-level BPE tokenizer and save it in Hugging Face format.

The tokenizer follows Qwen's design so the same file works in transformers and llama.cpp
(GGUF ``tokenizer.ggml.model = gpt2``, ``pre = qwen2``): byte-level BPE, Qwen's split
regex, no Unicode normalisation, and the ChatML / tool-format markers as single tokens.
Its chat template (written for botpsy, see ``CHAT_TEMPLATE``) renders the Qwen3.5 wire
format, so ``AutoTokenizer.from_pretrained(path).apply_chat_template(...)`` works.

Example::

    botpsy tokenizer --corpus runs/speedrun/data/corpus.txt --vocab-size 4096 --out runs/speedrun/tokenizer
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from botpsy.chat.template import TOOLS_HEADER, TOOLS_INSTRUCTIONS
from botpsy.output import emit

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"

# Qwen2's pre-tokenizer split: contractions, letter runs with one leading non-letter,
# single digits, punctuation runs, newlines, and whitespace. llama.cpp's "qwen2" pre-type
# uses the same expression, which is what makes GGUF tokenization identical.
QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Mixed text so every tokenizer sees Chinese, emoji, code and JSON at least once, whatever
# its corpus. (Evaluation prompts are never part of it.)
COVERAGE_TEXT = """\
The quick brown fox jumps over the lazy dog. 0123456789
你好，今天天气怎么样？请帮我设置明天早上七点的闹钟。
{"name": "set_alarm", "arguments": {"hour": 7, "minute": 30, "label": "gym"}}
def add(a: int, b: int) -> int:\n    return a + b  # sum
Emoji: 😀 🚀 ✅ — café, naïve, Straße, Ελληνικά, русский, العربية, 日本語
"""

# botpsy's own Jinja chat template, written with explicit string outputs so whitespace does
# not depend on the Jinja environment's trim settings. It renders the same text as
# botpsy.chat.template.render (tests check the two agree, and that both agree with the
# official Qwen3.5 template).
_TEMPLATE_BODY = r"""
{%- macro text(c) -%}
  {%- if c is string -%}{{- c -}}{%- elif c is none -%}{%- else -%}{%- for p in c -%}{{- p.text -}}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- set sys = (text(messages[0].content) | trim) if messages[0].role == 'system' else '' -%}
{%- if tools -%}
  {{- '<|im_start|>system\n' + TOOLS_HEADER -}}
  {%- for t in tools -%}{{- '\n' -}}{{- t | tojson -}}{%- endfor -%}
  {{- '\n</tools>' + TOOLS_INSTRUCTIONS -}}
  {%- if sys -%}{{- '\n\n' + sys -}}{%- endif -%}
  {{- '<|im_end|>\n' -}}
{%- elif messages[0].role == 'system' -%}
  {{- '<|im_start|>system\n' + sys + '<|im_end|>\n' -}}
{%- endif -%}
{%- set state = namespace(query=-1) -%}
{%- for m in messages -%}
  {%- if m.role == 'user' -%}
    {%- set c = text(m.content) | trim -%}
    {%- if not (c.startswith('<tool_response>') and c.endswith('</tool_response>')) -%}{%- set state.query = loop.index0 -%}{%- endif -%}
  {%- endif -%}
{%- endfor -%}
{%- if state.query < 0 -%}{{- raise_exception('No user query found in messages.') -}}{%- endif -%}
{%- for m in messages -%}
  {%- set c = text(m.content) | trim -%}
  {%- if m.role == 'user' -%}
    {{- '<|im_start|>user\n' + c + '<|im_end|>\n' -}}
  {%- elif m.role == 'assistant' -%}
    {%- set r = '' -%}
    {%- if m.reasoning_content is string -%}
      {%- set r = m.reasoning_content -%}
    {%- elif '</think>' in c -%}
      {%- set r = c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}
      {%- set c = c.split('</think>')[-1].lstrip('\n') -%}
    {%- endif -%}
    {{- '<|im_start|>assistant\n' -}}
    {%- if loop.index0 > state.query -%}{{- '<think>\n' + (r | trim) + '\n</think>\n\n' -}}{%- endif -%}
    {{- c -}}
    {%- for call in (m.tool_calls or []) -%}
      {%- set f = call.function if call.function is defined else call -%}
      {%- if not loop.first -%}{{- '\n' -}}{%- elif c | trim -%}{{- '\n\n' -}}{%- endif -%}
      {{- '<tool_call>\n<function=' + f.name + '>\n' -}}
      {%- for k, v in (f.arguments or {}) | items -%}
        {{- '<parameter=' + k + '>\n' -}}
        {%- if v is mapping or (v is sequence and v is not string) -%}{{- v | tojson -}}{%- else -%}{{- v | string -}}{%- endif -%}
        {{- '\n</parameter>\n' -}}
      {%- endfor -%}
      {{- '</function>\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\n' -}}
  {%- elif m.role == 'tool' -%}
    {%- if loop.previtem and loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
    {{- '\n<tool_response>\n' + c + '\n</tool_response>' -}}
    {%- if loop.last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
  {%- elif m.role != 'system' or not loop.first -%}
    {{- raise_exception('Unexpected message role or misplaced system message.') -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n<think>\n' -}}
  {%- if enable_thinking is defined and enable_thinking is false -%}{{- '\n</think>\n\n' -}}{%- endif -%}
{%- endif -%}
"""
CHAT_TEMPLATE = (
    _TEMPLATE_BODY.replace("TOOLS_HEADER", json.dumps(TOOLS_HEADER))
    .replace("TOOLS_INSTRUCTIONS", json.dumps(TOOLS_INSTRUCTIONS))
    .strip()
)


@dataclass
class TokenizerConfig:
    """Train a byte-level BPE tokenizer on a text corpus and save it in Hugging Face format."""

    corpus: list[str] = field(default_factory=list, metadata={"help": "Text file(s) to train on, one document per line or free text."})
    out: str = field(default="runs/speedrun/tokenizer", metadata={"help": "Output folder (Hugging Face tokenizer files + meta.json)."})
    vocab_size: int = field(default=4096, metadata={"help": "Target vocabulary size, special tokens included."})
    min_frequency: int = field(default=2, metadata={"help": "A merge must occur at least this often in the corpus."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def build_bpe(vocab_size: int, min_frequency: int = 2):
    """An untrained tokenizer and its trainer, configured the Qwen way."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    return tok, trainer


def train_tokenizer(texts: list[str], vocab_size: int = 4096, min_frequency: int = 2):
    """Train on an in-memory list of texts and return a ``PreTrainedTokenizerFast``."""
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} is below the 256 byte symbols plus {len(SPECIAL_TOKENS)} special tokens")
    tok, trainer = build_bpe(vocab_size, min_frequency)
    tok.train_from_iterator(list(texts) + [COVERAGE_TEXT], trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=SPECIAL_TOKENS[3:],
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def read_corpus(paths: list[str]) -> list[str]:
    texts = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer corpus {path} does not exist")
        texts.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return texts


def load_tokenizer(path: str | Path):
    """Load a tokenizer folder written by ``main`` (or any Hugging Face tokenizer folder)."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{path} holds no tokenizer.json; run `botpsy tokenizer` first or pass a Hugging Face tokenizer folder")
    return AutoTokenizer.from_pretrained(str(path))


def main(config: TokenizerConfig) -> int:
    if not config.corpus:
        raise ValueError("give at least one --corpus file (the speedrun writes one with `botpsy data`)")
    texts = read_corpus(config.corpus)
    tokenizer = train_tokenizer(texts, config.vocab_size, config.min_frequency)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out))
    sample = "".join(texts[:200])
    ids = tokenizer(sample, add_special_tokens=False)["input_ids"] if sample else []
    result = {
        "out": str(out),
        "vocab_size": len(tokenizer),
        "corpus_lines": len(texts),
        "chars_per_token": round(len(sample) / max(1, len(ids)), 3),
        "special_tokens": {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS},
    }
    (out / "meta.json").write_text(json.dumps({"stage": "tokenizer", "config": vars(config), **result}, indent=2) + "\n")
    emit(result, config.json, lambda r: f"tokenizer: {r['vocab_size']} tokens, {r['chars_per_token']} chars/token -> {r['out']}")
    return 0
