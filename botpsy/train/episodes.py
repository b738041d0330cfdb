"""RL rollouts: what one GRPO group's trajectories are, and how they are played and rewarded.

* **Round 1** (first turns): ``FirstTurn`` items read from the data split; ``first_turn_rollouts``
  samples ``group_size`` completions of each in one batched call and rewards each parsed turn
  (``botpsy/train/rewards.py``) against the task's gold calls or its own checks.
* **Round 2** (episodes): ``Episode`` plays one task in its own device world. Calls run in the
  world, tool results and the scripted user's replies go back into the prompt, and the group's
  episodes advance together (``play_episodes``), one batched generation per round of turns.
  ``score_episode`` turns the world checker's verdict and the episode's costs into one reward.

Both return ``Rollout`` objects, which ``botpsy.train.rl`` turns into the GRPO update. ``generate``
is any ``(prompts, seed) -> list[Sample]`` function (``botpsy.train.rollout``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botpsy.train.rewards import RewardConfig, TurnInfo, TurnTarget, inspect_turn
from botpsy.train.rollout import Sample

if TYPE_CHECKING:
    from botpsy.train.rl import RLConfig


@dataclass
class Rollout:
    """One trajectory: a sample per assistant turn, its reward and what was measured."""

    samples: list[Sample]
    reward: float
    parts: dict[str, float]
    success: bool
    looped: bool
    reasoning_tokens: float  # per turn


@dataclass
class FirstTurn:
    """A round-1 prompt: the conversation up to the first assistant turn, and what that turn should be."""

    id: str
    kind: str
    prompt: str
    tools: list[dict]
    thinking: bool
    target: TurnTarget


TurnReward = Callable[[Sample, FirstTurn, TurnInfo], tuple[float, dict[str, float]]]


def first_turn_items(config: RLConfig, split: str) -> list[FirstTurn]:
    from botpsy.train.rollout import first_turn_prompt
    from botpsy.train.sft import read_jsonl
    from botpsy.world import Task

    examples = [e for e in read_jsonl(Path(config.data) / f"{split}.jsonl") if e.get("kind") in config.kinds]
    task_file = Path(config.tasks) / f"{split}.jsonl"
    tasks = {t["id"]: t for t in read_jsonl(task_file)} if task_file.is_file() else {}
    items = []
    for e in examples:
        task = tasks.get(e.get("task_id"))
        target = TurnTarget.from_task(Task.from_dict(task)) if task else TurnTarget.from_example(e)
        items.append(FirstTurn(e.get("id", ""), e["kind"], first_turn_prompt(e), e.get("tools") or [],
                               bool(e.get("thinking", True)), target))
    return items


def default_turn_reward(config: RLConfig) -> TurnReward:
    from botpsy.train.rewards import first_turn_reward

    rewards = config.rewards()
    return lambda sample, item, info: first_turn_reward(info.parsed, item.target, item.tools, rewards,
                                                        looped=info.looped, reasoning_tokens=info.reasoning_tokens)


def first_turn_rollouts(generate, tokenizer, items: list[FirstTurn], group_size: int, reward: TurnReward,
                        seed: int) -> list[Rollout]:
    """Round 1: ``group_size`` completions of each item's first turn, in one batched call, rewarded."""
    prompts = [item.prompt for item in items for _ in range(group_size)]
    samples = generate(prompts, seed)
    rollouts = []
    for i, sample in enumerate(samples):
        item = items[i // group_size]
        info = inspect_turn(sample.text, item.tools, item.thinking, tokenizer)
        total, parts = reward(sample, item, info)
        rollouts.append(Rollout([sample], total, parts, parts.get("task", total) >= 1.0, info.looped,
                                info.reasoning_tokens))
    return rollouts


@dataclass
class Episode:
    """One round-2 rollout in progress: its world, user, transcript and the samples of its turns."""

    task: Any  # botpsy.world.Task
    thinking: bool
    world: Any
    user: Any
    messages: list[dict]
    feedback: list[dict] = field(default_factory=list)  # failed turns + what was wrong: shown, not in the transcript
    samples: list[Sample] = field(default_factory=list)
    infos: list[TurnInfo] = field(default_factory=list)
    calls: int = 0
    failed_in_a_row: int = 0
    done: bool = False


def start_episode(task, thinking: bool) -> Episode:
    from botpsy.world import SimulatedUser, build_world

    return Episode(task, thinking, build_world(task), SimulatedUser(task), list(task.messages))


def episode_prompt(episode: Episode) -> str:
    """What the model sees: the conversation so far (tool results neutralised) and any feedback."""
    from botpsy.agent.loop import model_view
    from botpsy.chat.template import render
    from botpsy.train.encode import without_reasoning

    messages = model_view(episode.messages + episode.feedback)
    if not episode.thinking:
        messages = [without_reasoning(m) for m in messages]
    return render(messages, episode.task.tools, add_generation_prompt=True, enable_thinking=episode.thinking)


def advance(episode: Episode, sample: Sample, tokenizer, max_retries: int) -> None:
    """Act on one generated turn the way ``run_episode`` and the agent loop do."""
    from botpsy.agent.loop import EMPTY_TURN, feedback_messages
    from botpsy.world.episode import execute_tool_calls

    info = inspect_turn(sample.text, episode.task.tools, episode.thinking, tokenizer)
    episode.samples.append(sample)
    episode.infos.append(info)
    parsed = info.parsed
    problems = [{"kind": e.kind, "message": e.message} for e in parsed.errors]
    if not problems and not parsed.tool_calls and not parsed.content.strip():
        problems.append(dict(EMPTY_TURN))
    if problems:
        episode.failed_in_a_row += 1
        raw = raw_turn(sample.text, episode.thinking)
        if episode.failed_in_a_row > max_retries:
            episode.messages.append(raw)
            episode.done = True
        else:
            episode.feedback += [raw, *feedback_messages(problems)]
        return
    episode.failed_in_a_row, episode.feedback = 0, []
    message = parsed.to_message()
    calls = message.get("tool_calls") or []
    for i, call in enumerate(calls):
        call["id"] = f"call_{episode.calls + i + 1}"
    episode.messages.append(message)
    if calls:
        episode.messages.extend(execute_tool_calls(episode.world, message, episode.calls + 1))
        episode.calls += len(calls)
        return
    reply = episode.user.reply(message, episode.world)
    if reply is None:
        episode.done = True
    else:
        episode.messages.append({"role": "user", "content": reply})


def raw_turn(text: str, thinking: bool) -> dict:
    """A turn that could not be acted on, kept verbatim so the model sees its own mistake (as the agent loop does)."""
    from botpsy.chat.parse import cut_at_end_marker, split_reasoning

    reasoning, rest, _ = split_reasoning(cut_at_end_marker(text), thinking)
    message = {"role": "assistant", "content": rest.strip()}
    if reasoning.strip():
        message["reasoning_content"] = reasoning.strip()
    return message


def play_episodes(generate, tokenizer, episodes: list[Episode], max_turns: int, max_retries: int, seed: int) -> None:
    """Advance all episodes together: each round, one batched generation for the still-active ones."""
    for turn in range(max_turns):
        active = [e for e in episodes if not e.done]
        if not active:
            break
        samples = generate([episode_prompt(e) for e in active], seed * 64 + turn)
        for episode, sample in zip(active, samples):
            advance(episode, sample, tokenizer, max_retries)


@lru_cache(maxsize=4096)
def _gold_turns(task_json: str) -> int:
    from botpsy.world import Task, replay_gold

    return sum(1 for m in replay_gold(Task.from_json(task_json)).messages if m.get("role") == "assistant")


def gold_turn_count(task) -> int:
    """Assistant turns of the task's gold conversation (confirmation dialogue included)."""
    return _gold_turns(task.to_json())


def score_episode(episode: Episode, config: RewardConfig) -> Rollout:
    """The checker's verdict on the episode's transcript, the episode costs and the penalties."""
    from botpsy.train.rewards import episode_reward
    from botpsy.world import Transcript, evaluate

    check = evaluate(episode.task, Transcript.from_world(episode.messages, episode.world))
    looped = any(i.looped for i in episode.infos)
    tokens = sum(i.reasoning_tokens for i in episode.infos) / max(1, len(episode.infos))
    total, parts = episode_reward(check, gold_turn_count(episode.task), config, looped=looped,
                                  reasoning_tokens=round(tokens))
    episode.world.close()
    return Rollout(episode.samples, total, parts, check.success, looped, tokens)


def thinking_for(task_id: str, share: float) -> bool:
    return random.Random(f"thinking:{task_id}").random() < share


def episode_rollouts(generate, tokenizer, tasks: list, config: RLConfig, group_size: int, seed: int) -> list[Rollout]:
    """Round 2: ``group_size`` episodes of each task, played together, scored by the checker."""
    episodes = [start_episode(t, thinking_for(t.id, config.thinking_share)) for t in tasks for _ in range(group_size)]
    play_episodes(generate, tokenizer, episodes, config.max_turns, config.max_retries, seed)
    return [score_episode(e, config.rewards()) for e in episodes]
