"""LoRA adapters through ``peft`` for the pretrained student (the tiny reference model trains in full).

A pretrained 0.5B model cannot be fine-tuned in full on a 2-core CPU in useful time, and the
result would be a 1.2 GB checkpoint per stage. A rank-16 adapter on every linear layer trains
1.4% of the weights and saves as a few megabytes, small enough to commit with the figures it
produced. Two things LoRA alone cannot reach are trained beside it:

* the embedding and output rows of the tool-call tokens. ``<tool_call>`` and ``</tool_call>``
  are special tokens of the Qwen2.5 vocabulary that the instruct model hardly ever wrote; with
  their rows frozen the student wrote ``<|im_start|>`` in their place. ``peft``'s
  ``trainable_token_indices`` trains just those rows (of the input embedding and, when the head
  is untied, of the output head);
* nothing else: the base stays frozen, so the adapter can be merged for export
  (``merge_and_unload``) or switched (several domain teachers on one base in memory).

    model = add_lora(model, tokenizer, LoraSettings(rank=16))
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Special tokens of the student's wire format whose rows train with the adapter.
DEFAULT_TRAIN_TOKENS = ("<tool_call>", "</tool_call>")


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    train_tokens: tuple[str, ...] = field(default=DEFAULT_TRAIN_TOKENS)


def trainable_token_ids(tokenizer, tokens: tuple[str, ...]) -> list[int]:
    """Ids of ``tokens``, each of which must be a single token of ``tokenizer`` (else a clear error)."""
    ids = []
    for token in tokens:
        encoded = tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(encoded) != 1:
            raise ValueError(f"{token!r} is not a single token of this tokenizer ({encoded}); "
                             "only single-token rows can be trained beside the adapter")
        ids.extend(encoded)
    return ids


def add_lora(model, tokenizer, settings: LoraSettings):
    """Wrap ``model`` in a trainable ``peft`` LoRA model (every linear layer but the head)."""
    from peft import LoraConfig, get_peft_model

    ids = trainable_token_ids(tokenizer, settings.train_tokens) if settings.train_tokens else None
    token_rows = None
    if ids:
        token_rows = {"embed_tokens": ids}
        if not model.config.tie_word_embeddings:
            token_rows["lm_head"] = ids
    config = LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules="all-linear", trainable_token_indices=token_rows, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def is_peft(model) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def bare_causal_lm(model):
    """The ``*ForCausalLM`` under a ``peft`` wrapper (LoRA layers stay injected), or ``model`` itself."""
    return model.get_base_model() if is_peft(model) else model


def trainable_parameters(model) -> list:
    return [p for p in model.parameters() if p.requires_grad]


def load_for_training(init: str, rank: int = 0, alpha: int = 32, dtype: str = "float32"):
    """(checkpoint, trainable model, adapter meta) for a stage that starts from ``init``.

    * ``rank`` 0: every weight trains (the tiny model); an adapter folder is merged first.
    * ``rank`` > 0 and ``init`` an adapter folder (the SFT student): the *same* adapter keeps
      training on its own base, so every later stage (teachers, MOPD, RL) is again one adapter
      on the pulled base, built into a release the same way as the SFT stage. Its rank and
      scaling are the folder's own.
    * ``rank`` > 0 otherwise (a base name, a GGUF or a full checkpoint): a fresh adapter on it.

    The adapter meta (``{"base": ..., "adapter": "lora"}``, empty without an adapter) goes into
    the stage's ``meta.json``, so loading the stage finds its base.
    """
    from botpsy.model.checkpoint import is_adapter_folder, load_checkpoint

    if rank and is_adapter_folder(init):
        ckpt = load_checkpoint(init, dtype=dtype, merge=False)
        return ckpt, ckpt.model, {"base": ckpt.meta.get("base"), "adapter": "lora"}
    ckpt = load_checkpoint(init, dtype=dtype)
    if not rank:
        return ckpt, ckpt.model, {}
    return ckpt, add_lora(ckpt.model, ckpt.tokenizer, LoraSettings(rank=rank, alpha=alpha)), {"base": init, "adapter": "lora"}
