"""The agent category: the model works a simulated phone or airline (``platform``) in a tool loop.

* **multi_step**: the task is the first user message; the model calls functions turn by turn
  (each call runs in the platform, its result comes back as a tool message) until it says
  "finish conversation". A turn that answers in prose instead gets ACEBench's nudge: the user
  will not answer questions, so use what is known.
* **multi_turn**: a simulated user holds the task (``question`` is its instruction) and reveals
  it a step at a time; the model's prose goes to the user, the user's reply comes back, until
  either side says "finish conversation". The user is played by ``--user-model`` when given,
  else by the model under test; the record names which.

An episode ends at "finish conversation", after ACEBench's 40 messages (model turns, executed
turns, user replies and nudges together), at the token budget, or after three unreadable turns
in a row (their parse errors are fed back as botpsy's agent loop does).

Scoring, as ACEBench does:

* **end state** (the item's ``correct``): for each class in the gold ``ground_truth``, each
  saved attribute must equal the gold value; where the gold value is an object (the inbox, the
  user accounts) each of its gold keys must be present and equal (extra keys are not checked).
  A gold class the platform does not have (the data misspells two: ``Reminderpi``, ``BaseAPI``)
  is not checked, as in ACEBench. A model that never ran a function has no end state and fails.
* **process**: 1 for a correct end state; otherwise the share of the gold ``mile_stone`` turns
  found among the model's executed turns, searched in order (each after the previous match; one
  never found ends the search, as ACEBench's loop does; with several gold paths, the best). A
  turn matches when it made the same calls with the same arguments: ACEBench compares the turns'
  text, botpsy the parsed calls, so argument order, quoting and spacing do not count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from botpsy.eval import metrics
from botpsy.eval.acebench.calls import CallSyntaxError, calls_in_text, parse_calls, render_calls
from botpsy.eval.acebench.data import AceItem, tools_of
from botpsy.eval.acebench.platform import Platform
from botpsy.eval.suites import run_turn

MAX_MESSAGES = 40  # ACEBench's limit on one agent episode
MAX_FAILED_TURNS = 3
FINISH = "finish conversation"

STEP_PROMPT = """You are an assistant working a simulated phone through the functions you are given. Complete \
the user's task step by step: call a function, read its result, then decide the next step. Call one function at \
a time, unless you need the same function several times. Use only what the user and the function results tell \
you. When the task is complete, reply with "finish conversation"."""

TURN_PROMPT = """You are an assistant serving a user through the functions you are given. When the user has given \
everything a call needs, make the call; when something is missing, ask the user for it. Do not answer on the \
user's behalf. Call one function at a time, unless you need the same function several times, and do not write \
to the user in a turn where you call a function. When the user's task is complete, reply with \
"finish conversation".

The rules you must follow:
"""

PHONE_RULES = """The current time is June 11, 2024, 16:00 (Beijing time). You are the assistant of a simulated \
mobile phone: you can send and read text messages, add and look up reminders, and order food delivery.
- Give no information, knowledge or advice that neither the user nor the functions provided.
- When information is missing or a call fails, ask the user. Names the user mentions are full user names.
Text messages: before sending one, know its sender and receiver. When the inbox is full, ask the user: "Memory \
is full, which message would you like to delete?". Before viewing messages, log in to the device with \
login_device() and know the sender and receiver. After viewing messages, ask whether to add their content to a \
reminder and whether to reply; if a message is about food delivery, ask whether to order it.
Reminders: before adding one, know its title and content; its time defaults to now. To add a message's content as \
a reminder, view the message first. After viewing a reminder by its title, ask whether to carry out its tasks.
Food delivery: first get the user's platform account and password and log in with login_food_platform(). Ask for \
the merchant, products and quantities if they were not given. Order from different merchants one at a time. If \
the balance is too low, tell the user "Insufficient balance" and ask whether to change the order.
Tell the user how each task went, and do not repeat a call that already succeeded."""

TRAVEL_RULES = """The current time is July 15, 2024, 08:00 (Beijing time). You are an airline agent: you can book, \
change and cancel flight reservations.
- Before any change to the reservation database (booking, changing flights, adding bags, changing cabin, \
updating passenger details), list what you will do and get an explicit "yes" from the user; the same kind of \
detail need not be confirmed twice.
- Give no information, knowledge or advice that neither the user nor the functions provided, and refuse \
requests that break these rules. Transfer the user to a human agent only for requests you cannot carry out.
Users have a user id, payment methods, reservations and a membership level. Reservations hold the flight, \
payment method, bags and cabin. Flights have a number, origin, destination, departure and arrival times and \
free seats.
Booking: first get the user id and password, then the origin and destination; search flights before booking. A \
round trip is two bookings. If no direct flight fits, look for connecting flights through a transfer city and \
book both legs (both calls may go in one turn). Ask how the user pays: cash or bank. Free checked bags: regular \
members 1 in economy, 2 in business; silver 2 and 3; gold 3 in both. Each extra bag costs 50 yuan.
Changing: get the user id and password first; find the reservation from the user id. A flight change keeps the \
origin and destination. Any reservation can change cabin without changing flights; the user pays the \
difference, and all flights of a reservation share one cabin. Bags can be added, never removed. Ask how a \
changed flight is paid or refunded.
Cancelling: get the user id, the reservation id and the reason (change of plans, airline cancelled the flight, \
other). Cancellation is free within 24 hours of booking or when the airline cancelled the flight; otherwise \
economy pays a 20% fee and business cancels free, whatever the membership. Only whole trips not yet flown can \
be cancelled; otherwise transfer the user to a human agent. Refunds go to the user's account.
Compensation: silver or gold members, or business passengers, who complain about a cancelled flight may get a \
200 yuan voucher per passenger, and for a delay (after changing or cancelling) 100 yuan per passenger; never \
offer it unless they complain and ask."""

USER_PROMPT = """You are a user talking to an assistant. Your instruction:
{instruction}

Rules:
- Write one line per message, as the user.
- Do not give away the whole instruction at once; give only what the current step needs{complete}.
- Never make up information the instruction does not give; if asked for something you do not know, say so.
{extra}- Say things in your own words, naturally.
- When everything in the instruction has been done, reply with the single line 'finish conversation'."""

PHONE_USER = """- When asked whether you need more help, check that every task in the instruction is done; if not, \
ask for the next one.
- Names in the instruction are full user names. When asked which message to delete, follow the instruction.
- Do not offer help to the assistant; answer its questions as the instruction says.
"""

TRAVEL_USER = """- When asked to confirm something, decide from the instruction.
- If the instruction asks for a round trip, say at the start that you want to book a round-trip flight.
"""

OPENING = "Is there anything you need help with today?"
NUDGE = "Please do not ask me any questions; use what you already know to finish the task."


# ---- the simulated user -----------------------------------------------------------------------


class SimulatedUser:
    """A model playing the user of a multi_turn item (roles swapped: the assistant speaks as "user")."""

    def __init__(self, backend, settings, instruction: str, travel: bool) -> None:
        self.backend, self.settings = backend, settings
        complete = "" if travel else ", completely (a reminder needs its title, description and time)"
        system = USER_PROMPT.format(instruction=instruction, complete=complete,
                                    extra=TRAVEL_USER if travel else PHONE_USER)
        self.messages: list[dict] = [{"role": "system", "content": system}]
        self.generations: list[dict] = []

    def reply(self, assistant_text: str) -> str:
        """The user's next message after the assistant said ``assistant_text``."""
        self.messages.append({"role": "user", "content": assistant_text})
        result = run_turn(self.backend, self.messages, None, self.settings)
        self.generations.append(metrics.generation_record(result))
        text = result.content.strip()
        self.messages.append({"role": "assistant", "content": text})
        return text


# ---- one episode --------------------------------------------------------------------------------


@dataclass
class Episode:
    messages: list[dict]
    turns: list[list[tuple[str, dict]]] = field(default_factory=list)  # the calls of each executed turn
    generations: list[dict] = field(default_factory=list)
    stop_reason: str = "message_limit"
    executed: bool = False


def agent_messages(item: AceItem) -> list[dict]:
    entry = item.entries[0]
    if item.category == "agent_multi_step":
        return [{"role": "system", "content": STEP_PROMPT}, {"role": "user", "content": entry["question"]}]
    rules = TRAVEL_RULES if "Travel" in entry["involved_classes"] else PHONE_RULES
    return [{"role": "system", "content": TURN_PROMPT + rules}]


def run_episode(backend, item: AceItem, settings, platform: Platform, user: SimulatedUser | None) -> Episode:
    """Play one agent item to its end (see the module docstring)."""
    from botpsy.agent.loop import feedback_messages, raw_message, turn_problems

    tools = tools_of(item.entries[0])
    known = {t["function"]["name"] for t in tools}
    episode = Episode(agent_messages(item))
    count, failed, spent = 0, 0, 0
    budget = settings.token_budget or 4 * settings.max_tokens
    if user is not None:
        opening = user.reply(OPENING)
        episode.messages.append({"role": "user", "content": opening})
        count += 1
        if FINISH in opening.lower():
            episode.stop_reason = "user_finished"
            return episode
    while count < MAX_MESSAGES:
        if spent >= budget:
            episode.stop_reason = "token_budget"
            break
        result = run_turn(backend, episode.messages, tools, settings)
        episode.generations.append(metrics.generation_record(result))
        spent += result.completion_tokens
        count += 1
        calls = [(c.name, dict(c.arguments)) for c in result.parsed.tool_calls] or calls_in_text(result.content, known)
        if calls:
            failed = 0
            execute(episode, platform, calls, result)
            count += 1
            continue
        problems = turn_problems(result)
        if problems:
            failed += 1
            episode.messages += [raw_message(result, settings.enable_thinking)] + feedback_messages(problems)
            if failed >= MAX_FAILED_TURNS:
                episode.stop_reason = "too_many_errors"
                break
            continue
        failed = 0
        text = result.content.strip()
        episode.messages.append({"role": "assistant", "content": text})
        if FINISH in text.lower():
            episode.stop_reason = "finished"
            break
        reply = NUDGE if user is None else user.reply(text)
        episode.messages.append({"role": "user", "content": reply})
        count += 1
        if user is not None and FINISH in reply.lower():
            episode.stop_reason = "user_finished"
            break
    return episode


def execute(episode: Episode, platform: Platform, calls: list[tuple[str, dict]], result) -> None:
    """Run one turn's calls in the platform and add the turn and its results to the conversation."""
    first = 1 + sum(len(m.get("tool_calls") or []) for m in episode.messages)
    ids = [f"call_{first + i}" for i in range(len(calls))]
    message: dict[str, Any] = {"role": "assistant", "content": result.content if result.parsed.tool_calls else "",
                               "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                              for i, (n, a) in zip(ids, calls)]}
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    episode.messages.append(message)
    for call_id, (name, arguments) in zip(ids, calls):
        output = platform.call(name, arguments)
        episode.messages.append({"role": "tool", "tool_call_id": call_id, "name": name,
                                 "content": json.dumps(output, ensure_ascii=False)})
    episode.turns.append(calls)
    episode.executed = True


# ---- scoring ----------------------------------------------------------------------------------


def check_state(gold: list[dict], state: list[dict]) -> list[str]:
    """What differs between the end ``state`` and the gold (empty when it passes; see the docstring)."""
    if not state:
        return ["no function was run, so there is no end state"]
    if len(state) != len(gold):
        return [f"{len(state)} classes in the end state, {len(gold)} in the gold state"]
    mine = {name: attrs for entry in state for name, attrs in entry.items()}
    errors = []
    for entry in gold:
        for name, gold_attrs in entry.items():
            if name not in mine:
                continue  # ACEBench leaves a class it cannot match unchecked (misspelt class names in its data)
            for attr, value in mine[name].items():
                if attr not in gold_attrs:
                    errors.append(f"{name}.{attr}: not in the gold state")
                    continue
                expected = gold_attrs[attr]
                if isinstance(expected, dict):
                    errors += [f"{name}.{attr}[{key}]: {value.get(key) if isinstance(value, dict) else None!r}, "
                               f"expected {want!r}" for key, want in expected.items()
                               if not isinstance(value, dict) or value.get(key) != want]
                elif value != expected:
                    errors.append(f"{name}.{attr}: {value!r}, expected {expected!r}")
    return errors


def process_score(milestones: list, turns: list[list[tuple[str, dict]]]) -> float:
    """The share of gold milestone turns found in order among the model's turns (best gold path).

    >>> process_score(["[a(x=1)]", "[b()]"], [[("a", {"x": 1})], [("c", {})]])
    0.5
    """
    paths = milestones if milestones and isinstance(milestones[0], list) else [milestones]
    best = 0.0
    for path in paths:
        if not path:
            return 1.0
        found, position = 0, 0
        for stone in path:
            while position < len(turns):
                position += 1
                if same_turn(stone, turns[position - 1]):
                    found += 1
                    break
        best = max(best, found / len(path))
    return round(best, 4)


def same_turn(stone: str, calls: list[tuple[str, dict]]) -> bool:
    try:
        wanted = parse_calls(stone)
    except CallSyntaxError:
        return "".join(stone.split()) == "".join(render_calls(calls).split())
    key = lambda call: (call[0], json.dumps(normal_value(call[1]), sort_keys=True))  # noqa: E731
    return sorted(map(key, wanted)) == sorted(map(key, calls))


def normal_value(value: Any) -> Any:
    """Numbers as floats and texts stripped, so ``1`` and ``1.0`` (or ``' x'`` and ``'x'``) compare equal."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        return {str(k): normal_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normal_value(v) for v in value]
    return str(value)


def run_agent_item(backend, item: AceItem, settings, user_backend=None, user_settings=None,
                   user_label: str = "") -> dict[str, Any]:
    """One agent item's record fields: verdict, process score, end-state errors and the conversation."""
    entry = item.entries[0]
    platform = Platform(entry["involved_classes"], entry.get("initial_config"))
    user = None
    if item.category == "agent_multi_turn":
        travel = "Travel" in entry["involved_classes"]
        user_settings = user_settings or replace(settings, enable_thinking=False)
        user = SimulatedUser(user_backend or backend, user_settings, entry["question"], travel)
    episode = run_episode(backend, item, settings, platform, user)
    state = platform.state() if episode.executed else []
    errors = check_state(item.golds[0], state)
    process = 1.0 if not errors else process_score(item.milestones, episode.turns)
    record = {"correct": not errors, "process": process, "state_errors": errors[:20],
              "stop_reason": episode.stop_reason, "process_calls": [render_calls(t) for t in episode.turns],
              "milestones": item.milestones, "messages": episode.messages, "end_state": state,
              "generations": episode.generations}
    if user is not None:
        record["user_model"] = user_label or "the model under test"
        record["user_generations"] = user.generations
    return record
