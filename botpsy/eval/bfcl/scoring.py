"""Score a model's raw output on a BFCL item with BFCL's official checkers.

The model's text is read with botpsy's own parser (``botpsy.chat.parse_output``) against the item's
tools (a base model in its own chat format: ``botpsy.chat.native.parse_lenient``), then handed to the official checker in the form it expects:

* AST categories: ``[{name: {arg: value}}, ...]`` to ``ast_checker`` (BFCL's published function
  docs, the category's checker: simple / multiple / parallel, Java and JavaScript converters).
  An output with any parse error counts as BFCL's "failed to decode" and is wrong.
* irrelevance / live_irrelevance: correct when no call decodes (as BFCL: an output that fails
  to decode is "no call"); live_relevance: correct when at least one call decodes.
* multi-turn: ``run_item`` drives the conversation turn by turn: each step's calls run on BFCL's
  own backends and their results go back to the model as tool messages, until a step has no
  call (end of turn) or 20 call steps pass (BFCL's limit; the item then fails as force-terminated).
  ``score_item`` then re-runs the decoded calls through ``multi_turn_checker`` (state and
  execution results compared with the ground truth after every turn).

Example::

    >>> item = bfcl_items(["irrelevance"], limit=1)[0]
    >>> score_item(item, "No tool fits.\\n</think>\\n\\nI cannot compute that.").valid
    True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from botpsy.chat.parse import parse_with_schemas
from botpsy.chat.types import ParsedOutput, ToolCall
from botpsy.eval.bfcl import official
from botpsy.eval.bfcl.items import Item, bfcl_items  # noqa: F401  (bfcl_items: doctest)

MAX_CALL_STEPS = 20  # BFCL's MAXIMUM_STEP_LIMIT: a turn with more call steps is force-terminated

Generate = Callable[[list[dict], list[dict]], str]


@dataclass
class Verdict:
    """The outcome of one item: ``valid`` is BFCL's verdict; ``error_type`` uses BFCL's tags
    (``simple_function_checker:wrong_func_name``, ``multi_turn:instance_state_mismatch``...) or
    botpsy's (``botpsy:parse_error``); ``calls`` are the decoded calls (multi-turn: per turn and step);
    ``raw`` what the model wrote (multi-turn: per turn and step)."""

    id: str
    category: str
    valid: bool
    error_type: str = ""
    error: str = ""
    calls: Any = field(default_factory=list)
    raw: Any = None

    def to_dict(self) -> dict:
        return asdict(self)


def read(raw: str, schemas: dict[str, dict], thinking: bool, native: bool) -> ParsedOutput:
    """One output read as botpsy's wire format, or leniently for a model in its own format."""
    if native:
        from botpsy.chat.native import parse_lenient_schemas

        return parse_lenient_schemas(raw, schemas)
    return parse_with_schemas(raw, schemas, thinking=thinking)


def score_item(item: Item, outputs: str | list, *, thinking: bool = True, native: bool = False) -> Verdict:
    """Score recorded model output. Single-turn: the raw text (or a one-element list).
    Multi-turn: raw texts per turn and step, ``outputs[turn][step]`` (what ``run_item`` records)."""
    if item.multi_turn:
        return score_multi_turn(item, outputs, thinking, native)
    if isinstance(outputs, list):
        if len(outputs) != 1:
            return Verdict(item.id, item.category, False, "botpsy:wrong_output_count",
                           f"a single-turn item takes one output, got {len(outputs)}", raw=outputs)
        outputs = outputs[0]
    parsed = read(outputs, item.scoring_schemas(), thinking, native)
    if "relevance" in item.category:
        return score_relevance(item, parsed, outputs)
    return score_ast(item, parsed, outputs)


def run_item(item: Item, generate: Generate, *, thinking: bool = True, native: bool = False) -> Verdict:
    """Ask the model (``generate(messages, tools) -> raw text after the generation prompt``) and
    score the answer; multi-turn items are driven turn by turn on BFCL's backends."""
    if not item.multi_turn:
        return score_item(item, generate(list(item.messages), item.tools), thinking=thinking, native=native)
    return score_item(item, converse(item, generate, thinking, native), thinking=thinking, native=native)


def call_dicts(calls: list[ToolCall]) -> list[dict]:
    return [{call.name: dict(call.arguments)} for call in calls]


def score_relevance(item: Item, parsed: ParsedOutput, raw: str) -> Verdict:
    has_call = parsed.ok and bool(parsed.tool_calls)
    calls = call_dicts(parsed.tool_calls)
    if "irrelevance" in item.category:
        if has_call:
            return Verdict(item.id, item.category, False, "irrelevance_error:decoder_success",
                           "made a function call when none fits", calls, raw)
        return Verdict(item.id, item.category, True, calls=calls, raw=raw)
    if not has_call:
        return Verdict(item.id, item.category, False, "relevance_error:decoder_failed",
                       first_error(parsed) or "no function call", calls, raw)
    return Verdict(item.id, item.category, True, calls=calls, raw=raw)


def score_ast(item: Item, parsed: ParsedOutput, raw: str) -> Verdict:
    calls = call_dicts(parsed.tool_calls)
    if not parsed.ok:
        return Verdict(item.id, item.category, False, "botpsy:parse_error", first_error(parsed), calls, raw)
    language = {"java": official.Language.JAVA, "javascript": official.Language.JAVASCRIPT}.get(
        item.language, official.Language.PYTHON)
    try:
        result = official.ast_checker(item.entry["function"], calls, item.ground_truth, language,
                                      item.category, official.MODEL_NAME)
    except Exception as exc:  # the checker trips on some malformed values (e.g. a list where it indexes a dict)
        return Verdict(item.id, item.category, False, "botpsy:checker_raised", f"{type(exc).__name__}: {exc}", calls, raw)
    if result["valid"]:
        return Verdict(item.id, item.category, True, calls=calls, raw=raw)
    return Verdict(item.id, item.category, False, result.get("error_type", ""), short(result.get("error")), calls, raw)


def first_error(parsed: ParsedOutput) -> str:
    return f"{parsed.errors[0].kind}: {parsed.errors[0].message}" if parsed.errors else ""


def short(error: Any, limit: int = 500) -> str:
    text = error if isinstance(error, str) else "; ".join(map(str, error)) if isinstance(error, list) else str(error)
    return text if len(text) <= limit else text[:limit] + "..."


# --------------------------------------------------------------------------- multi-turn


def step_calls(parsed: ParsedOutput, methods: dict) -> list[str]:
    """A step's calls as BFCL call strings; none when the step does not decode (as BFCL, whose
    decoder fails on the whole step)."""
    if not parsed.ok:
        return []
    return [official.safe_call_string(c.name, c.arguments, methods) for c in parsed.tool_calls]


def converse(item: Item, generate: Generate, thinking: bool, native: bool = False) -> list[list[str]]:
    """Run the conversation; returns the raw outputs per turn and step. Stops early (fewer
    turns than the item has) when a turn is force-terminated, as BFCL does."""
    methods = official.backend_methods(item.entry["involved_classes"])
    messages: list[dict] = []
    outputs: list[list[str]] = []
    with official.BackendSession() as session:
        for turn_index, turn in enumerate(item.turns):
            tools = item.tools_at(turn_index)
            schemas = item.scoring_schemas(turn_index)  # as score_multi_turn reads them
            messages.extend(turn)
            steps: list[str] = []
            outputs.append(steps)
            call_steps = 0
            while True:
                raw = generate(list(messages), tools)
                steps.append(raw)
                parsed = read(raw, schemas, thinking, native)
                messages.append(parsed.to_message())
                calls = step_calls(parsed, methods)
                if not calls:
                    break
                results = session.execute(item.entry, calls)
                messages.extend({"role": "tool", "content": result} for result in results)
                call_steps += 1
                if call_steps > MAX_CALL_STEPS:
                    return outputs
    return outputs


def score_multi_turn(item: Item, outputs: Any, thinking: bool, native: bool = False) -> Verdict:
    if not isinstance(outputs, list) or not all(isinstance(t, list) for t in outputs):
        return Verdict(item.id, item.category, False, "multi_turn:inference_error",
                       "multi-turn output must be a list of turns, each a list of step texts", raw=outputs)
    if len(outputs) != len(item.ground_truth):
        return Verdict(item.id, item.category, False, "multi_turn:force_terminated",
                       f"{len(outputs)} turns answered of {len(item.ground_truth)}", raw=outputs)
    methods = official.backend_methods(item.entry["involved_classes"])
    decoded: list[list[list[str]]] = []
    for turn_index, steps in enumerate(outputs):
        schemas = item.scoring_schemas(turn_index)
        turn_calls = [step_calls(read(raw, schemas, thinking, native), methods) for raw in steps]
        decoded.append([calls for calls in turn_calls if calls])
    try:
        with official.BackendSession() as session:
            result = session.check(decoded, item.ground_truth, item.entry)
    except Exception as exc:  # the checker asserts on states it does not expect; keep the record
        return Verdict(item.id, item.category, False, "botpsy:checker_raised", f"{type(exc).__name__}: {exc}",
                       decoded, outputs)
    if result["valid"]:
        return Verdict(item.id, item.category, True, calls=decoded, raw=outputs)
    return Verdict(item.id, item.category, False, result.get("error_type", ""),
                   short(result.get("error_message", "")), decoded, outputs)
