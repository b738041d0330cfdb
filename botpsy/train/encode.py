"""Turn chat examples into token ids with a loss mask on the assistant's own tokens.

An example is ``{"messages": [...], "tools": [...], "thinking": bool}``. The model learns
only what it would generate: reasoning, visible text, tool calls and the closing
``<|im_end|>`` of each assistant turn. System, user and tool-result tokens are context.

Qwen3.5 drops the reasoning of assistant turns that come before the last user query, so a
conversation with several user queries becomes one sequence per query: each renders the
conversation up to the assistant turns that answer that query, exactly as the model sees it
at inference time, and trains only on those turns.

Tokens are masked by character offsets, so BPE merges across the prompt/answer boundary
cannot shift the mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from botpsy.chat.template import IM_END, render

IGNORE = -100


@dataclass
class Encoded:
    input_ids: list[int]
    labels: list[int]  # IGNORE where no loss

    @property
    def n_loss_tokens(self) -> int:
        return sum(1 for t in self.labels if t != IGNORE)


def query_segments(messages: list[dict]) -> list[tuple[int, int]]:
    """(start, end) message ranges: each starts at a real user query and ends before the next."""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user" and not _is_tool_only(m)]
    bounds = starts[1:] + [len(messages)]
    return list(zip(starts, bounds))


def _is_tool_only(message: dict) -> bool:
    text = (message.get("content") or "").strip() if isinstance(message.get("content"), str) else ""
    return text.startswith("<tool_response>") and text.endswith("</tool_response>")


def assistant_spans(messages: list[dict], tools: list[dict], thinking: bool, after: int = 0) -> tuple[str, list[tuple[int, int]]]:
    """The rendered text of ``messages`` and the character spans of assistant turns after ``after``.

    ``after`` should be the index of the last user query: turns before it render without
    their reasoning, so they are context, not targets.
    """
    full = render(messages, tools, add_generation_prompt=False, enable_thinking=thinking)
    spans = []
    for i, message in enumerate(messages):
        if i <= after or message.get("role") != "assistant":
            continue
        prompt = render(messages[:i], tools, add_generation_prompt=True, enable_thinking=thinking)
        turn = render(messages[: i + 1], tools, add_generation_prompt=False, enable_thinking=thinking)
        if not full.startswith(turn):
            raise ValueError(f"assistant turn {i} does not render as a prefix of the conversation")
        # With thinking off the prompt ends with an empty think block; the turn renders the
        # same empty block, so the prompt stays a prefix in both modes.
        if not turn.startswith(prompt):
            raise ValueError(f"assistant turn {i}: the generation prompt is not a prefix of the rendered turn")
        end = turn.rindex(IM_END) + len(IM_END)
        spans.append((len(prompt), end))
    return full, spans


def encode_example(example: dict, tokenizer, max_length: int) -> list[Encoded]:
    """One ``Encoded`` sequence per user query; sequences longer than ``max_length`` are dropped."""
    tools = example.get("tools") or []
    thinking = bool(example.get("thinking", True))
    messages = example["messages"] if thinking else [without_reasoning(m) for m in example["messages"]]
    out = []
    for start, end in query_segments(messages):
        # Only the turns answering this query carry loss; earlier turns are context (and
        # appear without their reasoning, as at inference time).
        text, spans = assistant_spans(messages[:end], tools, thinking, after=start)
        if not spans:
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        if len(ids) > max_length:
            continue
        labels = [tok if _inside(start, spans) else IGNORE for tok, (start, _e) in zip(ids, offsets)]
        out.append(Encoded(input_ids=ids, labels=labels))
    return out


def without_reasoning(message: dict) -> dict:
    """With thinking off the model answers straight after an empty think block."""
    if message.get("role") != "assistant":
        return message
    message = {k: v for k, v in message.items() if k != "reasoning_content"}
    content = message.get("content") or ""
    if isinstance(content, str) and "</think>" in content:
        message["content"] = content.split("</think>")[-1].lstrip("\n")
    return message


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)
