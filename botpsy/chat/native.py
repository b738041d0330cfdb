"""A model's own chat format: its Jinja template from the GGUF, and a lenient reading of its calls.

botpsy's models speak the Qwen3.5 wire format (``botpsy.chat.template``). A pretrained base does
not: Qwen2.5-Coder's template renders tools as Hermes JSON and expects
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, and in practice the model often
answers with a code-fenced JSON object instead. Comparing a base model in botpsy's format would
measure formatting, not ability, so baselines run in their **native** format:

* the prompt is the model's own ``tokenizer.chat_template`` rendered with the conversation and
  tools (a sandboxed Jinja environment, as transformers and llama.cpp render it);
* the output is read as its authors intended, leniently: ``<tool_call>`` blocks (Hermes JSON or
  botpsy's XML), else code-fenced JSON, else a bare JSON object or list, where each object with a
  ``name`` (and ``arguments`` or ``parameters``) is a call.

    fmt = ChatFormat.native(template_text)
    prompt, prefix = fmt.prompt(messages, tools, enable_thinking=False)
    parsed = fmt.parse(generated_text, tools)

``ChatFormat.botpsy()`` is the Qwen3.5 format with botpsy's strict parser, the default everywhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from botpsy.chat.parse import cut_at_end_marker, parse_json_call, parse_output, parse_with_schemas, tool_schemas
from botpsy.chat.types import ParsedOutput

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


@dataclass(frozen=True)
class ChatFormat:
    """How prompts are rendered and outputs parsed for one model."""

    name: str  # "botpsy" | "native"
    template: str = ""  # the model's Jinja chat template (native only)

    @classmethod
    def botpsy(cls) -> "ChatFormat":
        return cls("botpsy")

    @classmethod
    def native(cls, template: str) -> "ChatFormat":
        if not template or not template.strip():
            raise ValueError("this model has no chat template of its own; evaluate it in botpsy's format")
        return cls("native", template)

    @classmethod
    def own(cls, template: str) -> "ChatFormat":
        """The format a model's own template asks for: native, unless it has none or it is botpsy's."""
        from botpsy.model.tokenizer import CHAT_TEMPLATE

        return cls.native(template) if template and template.strip() != CHAT_TEMPLATE.strip() else cls.botpsy()

    @property
    def constrainable(self) -> bool:
        """Constrained decoding writes botpsy's call syntax, so only botpsy's format can use it."""
        return self.name == "botpsy"

    def prompt(self, messages: list[dict], tools: list[dict] | None, enable_thinking: bool) -> tuple[str, str]:
        """(prompt, cache_prefix): in the model's own template the prefix is its system turn with the
        tools block (``native_prefix``), as in botpsy's format, so every turn of an episode restores it."""
        if self.name == "botpsy":
            from botpsy.runtime.generate import chat_prompt

            return chat_prompt(messages, tools, enable_thinking=enable_thinking)
        prompt = render_native(self.template, messages, tools)
        return prompt, native_prefix(self.template, messages, tools, prompt)

    def parse(self, text: str, tools: list[dict] | None, thinking: bool = False) -> ParsedOutput:
        if self.name == "botpsy":
            return parse_output(text, tools, thinking=thinking)
        return parse_lenient(text, tools)

    def describe(self) -> dict[str, Any]:
        return {"chat_format": self.name,
                "template": "botpsy Qwen3.5 wire format" if self.name == "botpsy" else "the model's own (GGUF tokenizer.chat_template)",
                "template_chars": len(self.template)}


# ---- rendering -------------------------------------------------------------------------------


def render_native(template: str, messages: list[dict], tools: list[dict] | None) -> str:
    """The model's own template over OpenAI-style messages, with the generation prompt."""
    from jinja2.exceptions import TemplateError

    try:
        return compiled(template).render(messages=[template_message(m) for m in messages], tools=tools or None,
                                         add_generation_prompt=True, bos_token="", eos_token="")
    except TemplateError as exc:
        raise ValueError(f"the model's chat template failed to render: {exc}") from None


def native_prefix(template: str, messages: list[dict], tools: list[dict] | None, prompt: str) -> str:
    """The part of ``prompt`` worth caching: the leading system turn(s) with the tools block, rendered
    alone, when the full prompt begins with exactly that text (else ""). Every turn of an episode shares
    it, so llama.cpp restores it instead of evaluating the tools block again, as it does for botpsy's
    own format."""
    leading = 0
    while leading < len(messages) and messages[leading].get("role") == "system":
        leading += 1
    if not leading or leading == len(messages):
        return ""
    try:
        head = compiled(template).render(messages=[template_message(m) for m in messages[:leading]],
                                         tools=tools or None, add_generation_prompt=False, bos_token="", eos_token="")
    except Exception:  # a template that insists on a user turn: no cacheable prefix
        return ""
    return head if head and prompt.startswith(head) and len(head) < len(prompt) else ""


@lru_cache(maxsize=8)
def compiled(template: str):
    """The template compiled once in a sandboxed environment (the agent renders it every turn)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise
    return env.from_string(template)


def _raise(message: str):
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


def template_message(message: dict) -> dict:
    """A message as chat templates expect it: string content, call arguments as objects, no reasoning."""
    out = {"role": message.get("role"), "content": message.get("content") or ""}
    if isinstance(out["content"], list):  # OpenAI content parts
        out["content"] = "".join(p.get("text", "") for p in out["content"] if isinstance(p, dict))
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [{"type": "function", "function": {"name": c["function"]["name"],
                                                               "arguments": _as_object(c["function"].get("arguments"))}}
                             for c in calls]
    for key in ("name", "tool_call_id"):
        if key in message:
            out[key] = message[key]
    return out


def _as_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments
    return arguments or {}


# ---- lenient parsing ---------------------------------------------------------------------------


def parse_lenient(text: str, tools: list[dict] | None) -> ParsedOutput:
    """Calls written any of the ways a pretrained model writes them (see the module docstring).

    >>> parse_lenient('```json\\n{"name": "set_alarm", "arguments": {"time": "07:00"}}\\n```', None).tool_calls
    [ToolCall(name='set_alarm', arguments={'time': '07:00'})]
    >>> parse_lenient("It is sunny today.", None).content
    'It is sunny today.'
    >>> [c.name for c in parse_lenient('{"name": "a", "arguments": {}}\\n{"name": "b", "arguments": {}}', None).tool_calls]
    ['a', 'b']
    """
    return parse_lenient_schemas(text, tool_schemas(tools))


def parse_lenient_schemas(text: str, schemas: dict[str, dict]) -> ParsedOutput:
    """``parse_lenient`` with the tools already indexed by ``tool_schemas``."""
    text = cut_at_end_marker(text)
    reasoning = ""
    think = _THINK.match(text)
    if think:
        reasoning, text = think.group(1).strip(), text[think.end():]
    tagged = parse_with_schemas(text, schemas, thinking=False)
    if tagged.tool_calls or "<tool_call>" in text:
        tagged.reasoning = reasoning
        return tagged
    out = ParsedOutput(reasoning=reasoning, content=text.strip())
    for span, objects in json_candidates(text):
        calls = [o for o in objects if isinstance(o, dict) and isinstance(o.get("name") or _function(o).get("name"), str)]
        if not calls:
            continue
        for obj in calls:
            call, errors = parse_json_call(json.dumps(_function(obj) or obj), schemas)
            if call is not None:
                out.tool_calls.append(call)
            out.errors.extend(errors)
        out.content = out.content.replace(span, "").strip()
    return out


def _function(obj: dict) -> dict:
    """``{"type": "function", "function": {...}}`` wrappers (OpenAI's shape) -> the inner call."""
    inner = obj.get("function")
    return inner if isinstance(inner, dict) else {}


def json_candidates(text: str) -> list[tuple[str, list]]:
    """(source span, JSON objects) for each fenced block that is JSON, else the whole text if it is,
    else each line that is a JSON object or list (models also write one call per line)."""
    found = []
    for match in _FENCE.finditer(text):
        value = _loads(match.group(1))
        if value is not None:
            found.append((match.group(0), value if isinstance(value, list) else [value]))
    if found:
        return found
    stripped = text.strip()
    value = _loads(stripped) if stripped[:1] in "[{" else None
    if value is not None:
        return [(stripped, value if isinstance(value, list) else [value])]
    for line in stripped.splitlines():
        line = line.strip()
        value = _loads(line) if line[:1] in "[{" else None
        if value is not None:
            found.append((line, value if isinstance(value, list) else [value]))
    return found


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
