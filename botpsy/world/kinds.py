"""Task kinds built from intents: each generator turns drafts into a ``Blueprint``.

A blueprint is a task before the tools are offered and the gold is replayed: the request,
the gold turns (``{"calls": [...]}`` or ``{"say": text}``), what the checker must verify
(``checks``) and the scripted user's part (``script``). ``tasks.py`` finishes it.

Checks understood by ``checker.evaluate``: ``answer_facts`` (groups of alternatives the final
answer must contain), ``required_calls`` (tools that must succeed at least once),
``forbidden_calls`` (tools never to be attempted), ``no_calls``, ``ask_first`` (a question
before the first successful write), ``final_question`` + ``ask_keywords``, ``refusal``,
``flags_problem`` (the answer says what is wrong, not just the value) and ``confirmation``
("approve": the sensitive call ran with the user's approval; "decline": it was proposed, by a
held call or a question, and never ran).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from botpsy.world import intents_commerce, intents_device, intents_personal, phrasing
from botpsy.world.intent import Ctx, Draft, Intent
from botpsy.world.registry import REGISTRY

INTENTS: list[Intent] = intents_device.INTENTS + intents_personal.INTENTS + intents_commerce.INTENTS
DOMAINS = ("device", "personal", "commerce")
SPECIAL_KINDS = ("irrelevant", "incomplete", "wrong_value", "unavailable")


@dataclass
class Blueprint:
    kind: str
    domain: str
    intent: str
    template: str  # "<intent>/<list>/<index>", for the split-disjointness audit
    request: str
    turns: list[dict]
    checks: dict[str, Any] = field(default_factory=dict)
    script: dict[str, Any] = field(default_factory=dict)
    patch: dict[str, list[dict]] = field(default_factory=dict)
    needed_tools: list[str] = field(default_factory=list)
    forced_tools: list[str] = field(default_factory=list)  # offered even if not needed (injection targets)
    excluded_tools: list[str] = field(default_factory=list)  # never offered (unavailable)


def tidy(text: str) -> str:
    """Collapse the gaps an empty optional slot leaves and capitalise the first letter."""
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" ([.,?!:])", r"\1", text).strip()
    return text[:1].upper() + text[1:]


def fill(template: str, slots: dict[str, Any]) -> str:
    return tidy(template.format(**slots))


def _gold_turns(draft: Draft) -> list[dict]:
    return [{"calls": batch} for batch in draft.steps] + [{"say": draft.answer}]


def _reads(draft: Draft) -> list[str]:
    return [name for name in draft.tools if not REGISTRY[name].writes]


def _sensitive_script(draft: Draft, confirm: bool) -> dict[str, Any]:
    if not any(REGISTRY[c["name"]].sensitive for c in draft.calls):
        return {}
    return {"confirm": confirm, "confirm_prompt": draft.confirm_prompt, "decline_answer": draft.decline_answer}


def draw_intent(ctx: Ctx, domain: str, accept: Callable[[Intent], bool], tries: int = 12):
    """An (intent, draft) of ``domain`` that ``accept`` allows and the world can host, or None."""
    pool = [i for i in INTENTS if i.domain == domain and accept(i)]
    for _ in range(tries if pool else 0):
        intent = ctx.rng.choice(pool)
        draft = intent.draw(ctx)
        if draft is not None:
            return intent, draft
    return None


def _request(ctx: Ctx, intent: Intent, templates: list[str], slots: dict, list_name: str) -> tuple[str, str]:
    template, index = phrasing.pick(ctx.rng, templates, ctx.split)
    return fill(template, slots), f"{intent.name}/{list_name}/{index}"


def gen_single(ctx: Ctx, domain: str, style: str = "single", kind: str = "single") -> Blueprint | None:
    found = draw_intent(ctx, domain, lambda i: i.style == style)
    if found is None:
        return None
    intent, draft = found
    request, template = _request(ctx, intent, intent.templates, draft.slots, "request")
    checks = {"answer_facts": draft.facts, "required_calls": _reads(draft)}
    script = _sensitive_script(draft, confirm=True)
    if script:
        checks["confirmation"] = "approve"
    return Blueprint(kind, domain, intent.name, template, request, _gold_turns(draft), checks, script, draft.patch,
                     draft.tools)


def gen_multi_step(ctx: Ctx, domain: str) -> Blueprint | None:
    return gen_single(ctx, domain, style="chain", kind="multi_step")


def gen_sensitive(ctx: Ctx, domain: str) -> Blueprint | None:
    blueprint = gen_single(ctx, domain, style="sensitive", kind="sensitive")
    if blueprint is not None and ctx.rng.random() < 0.3:
        blueprint.script["confirm"] = False
        blueprint.checks["confirmation"] = "decline"
        blueprint.checks["answer_facts"] = []
    return blueprint


# A parallel request joins whole single requests; each joiner is a phrasing and is split too.
JOINERS: list[Callable[[list[str]], str]] = [
    lambda parts: " ".join(parts),
    lambda parts: "Two things. " + " ".join(parts) if len(parts) == 2 else "A few things. " + " ".join(parts),
    lambda parts: " Also: ".join(parts),
    lambda parts: "Please do these: " + " ".join(f"({i + 1}) {p}" for i, p in enumerate(parts)),
    lambda parts: "\n".join(parts),
    lambda parts: "\n".join(f"- {p}" for p in parts),
    lambda parts: " And one more: ".join(parts),
    lambda parts: "Quick list. " + " Next: ".join(parts),
    lambda parts: " ".join(parts) + " Thanks!",
    lambda parts: "Can you handle this? " + " Plus: ".join(parts),
]


def gen_parallel(ctx: Ctx, domain: str) -> Blueprint | None:
    count = 3 if ctx.rng.random() < 0.25 else 2
    drafts, used_tools, names, templates = [], set(), [], []
    for _ in range(count * 4):
        found = draw_intent(ctx, domain, lambda i: i.style == "single" and i.name not in names)
        if found is None:
            break
        intent, draft = found
        if used_tools & set(draft.tools) or draft.patch:
            continue
        request, template = _request(ctx, intent, intent.templates, draft.slots, "request")
        drafts.append((request, draft))
        used_tools |= set(draft.tools)
        names.append(intent.name)
        templates.append(template)
        if len(drafts) == count:
            break
    if len(drafts) < 2:
        return None
    joiner, index = phrasing.pick(ctx.rng, JOINERS, ctx.split)
    request = joiner([r for r, _ in drafts])
    calls = [c for _, d in drafts for c in d.calls]
    answer = " ".join(d.answer for _, d in drafts)
    facts = [f for _, d in drafts for f in d.facts]
    reads = [n for _, d in drafts for n in _reads(d)]
    return Blueprint("parallel", domain, "+".join(names), f"joiner/{index}|" + "|".join(templates), request,
                     [{"calls": calls}, {"say": answer}], {"answer_facts": facts, "required_calls": reads},
                     needed_tools=[n for _, d in drafts for n in d.tools])


def gen_multi_turn(ctx: Ctx, domain: str) -> Blueprint | None:
    found = draw_intent(ctx, domain, lambda i: i.ask is not None)
    if found is None:
        return None
    intent, draft = found
    ask = intent.ask
    request, template = _request(ctx, intent, ask.templates, draft.slots, "ask")
    reply, _ = phrasing.pick(ctx.rng, ask.replies, ctx.split)
    question = fill(ctx.rng.choice(ask.questions), draft.slots)
    script = {"detail": fill(reply, draft.slots), **_sensitive_script(draft, confirm=True)}
    checks = {"answer_facts": draft.facts, "required_calls": _reads(draft), "ask_first": True,
              "ask_keywords": ask.keywords}
    if "confirm" in script:
        checks["confirmation"] = "approve"
    return Blueprint("multi_turn", domain, intent.name, template, request, [{"say": question}] + _gold_turns(draft),
                     checks, script, draft.patch, draft.tools)


def gen_incomplete(ctx: Ctx, domain: str) -> Blueprint | None:
    found = draw_intent(ctx, domain, lambda i: i.ask is not None)
    if found is None:
        return None
    intent, draft = found
    request, template = _request(ctx, intent, intent.ask.templates, draft.slots, "ask")
    question = fill(ctx.rng.choice(intent.ask.questions), draft.slots)
    checks = {"final_question": True, "ask_keywords": intent.ask.keywords}
    return Blueprint("incomplete", domain, intent.name, template, request, [{"say": question}], checks,
                     patch=draft.patch, needed_tools=draft.tools)


def gen_wrong_value(ctx: Ctx, domain: str) -> Blueprint | None:
    found = draw_intent(ctx, domain, lambda i: i.invalid is not None)
    if found is None:
        return None
    intent, draft = found
    text, value, explanation = intent.invalid.draw(ctx.rng, draft.slots)
    slots = {**draft.slots, intent.invalid.slot: text}
    request, template = _request(ctx, intent, intent.templates, slots, "request")
    return Blueprint("wrong_value", domain, intent.name, template, request, [{"say": explanation}],
                     {"answer_facts": [[value]], "flags_problem": True}, patch=draft.patch, needed_tools=draft.tools)


UNAVAILABLE_ANSWERS = [
    "Sorry, I can't {action} here: none of the tools I have right now can do that.",
    "I'm not able to {action} at the moment; that isn't something my available tools can do.",
    "Unfortunately I can't {action} right now, because I don't have a tool for it.",
]


def gen_unavailable(ctx: Ctx, domain: str) -> Blueprint | None:
    found = draw_intent(ctx, domain, lambda i: i.style in ("single", "chain", "sensitive"))
    if found is None:
        return None
    intent, draft = found
    request, template = _request(ctx, intent, intent.templates, draft.slots, "request")
    action_tool = draft.calls[-1]["name"]
    # Also hide the domain's other writes, so no offered tool can stand in for the missing one.
    excluded = [action_tool] + [t.name for t in REGISTRY.values() if t.domain == domain and t.writes]
    answer = ctx.rng.choice(UNAVAILABLE_ANSWERS).format(action=draft.action)
    return Blueprint("unavailable", domain, intent.name, template, request, [{"say": answer}], {"refusal": True},
                     patch=draft.patch, excluded_tools=sorted(set(excluded)))
