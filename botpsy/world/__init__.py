"""The device world: a personal-assistant device in SQLite, tools over it, tasks drawn from it, a checker.

Data flow (each name's module beside it)::

    World(path | ":memory:", seed)        world.py      seeded device state, 60 tools, audit, confirmations
      .tool_specs(names) -> OpenAI tools                  (declared once in tools_*.py via registry.tool)
      .call(name, arguments) -> dict                      result, or {"error": ..., "message": ...}; never raises
      .user.confirm / .decline / .approve                 the user side of the confirmation protocol
      .snapshot() / .audit_log()
    generate_tasks(split, n, seed) -> [Task] tasks.py     kinds.py + special.py draw from intents_*.py
    Task, build_world(task) -> World          task.py       the JSONL record; its world as the episode starts
    run_episode(task, agent) -> Transcript  episode.py    agent(messages, tools) -> assistant message
    replay_gold(task) -> Transcript                       the gold conversation, executed (SFT data)
    SimulatedUser(task).reply(message, world) user.py     supplies details, confirms or declines
    evaluate(task, transcript) -> CheckResult checker.py  success, score in [0, 1], milestones, wasted calls
    reward(task, transcript) -> float                     evaluate(...).score: the RL reward

Command: ``botpsy tasks --split train --n 1000 --seed 0 --out tasks.jsonl`` (command.py).
"""

from botpsy.world.checker import CheckResult, evaluate, reward
from botpsy.world.episode import GoldAgent, Transcript, replay_gold, run_episode
from botpsy.world.task import Task, build_world
from botpsy.world.tasks import KINDS, generate_task, generate_tasks
from botpsy.world.user import SimulatedUser
from botpsy.world.world import World, is_error

__all__ = ["World", "is_error", "Task", "KINDS", "generate_tasks", "generate_task", "build_world", "Transcript",
           "run_episode", "replay_gold", "GoldAgent", "SimulatedUser", "CheckResult", "evaluate", "reward"]
