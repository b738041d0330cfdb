"""The agent: the loop that turns a model backend and the device world into an assistant.

``loop``    run_agent(backend, world, messages) -> step records; Agent (a conversation);
            EpisodeAgent (the same turn as a ``world.run_episode`` agent); neutralise (tool results as data)
``steps``   ModelStep, ToolStep, ConfirmationStep, FinalStep; summarize(steps)
``show``    human-readable transcripts and step lines
``chat``    ``botpsy chat``: the interactive terminal assistant, and one-shot requests for scripts
``solve``   ``botpsy solve``: the agent on device-world tasks end to end, success rate by kind
"""

from botpsy.agent.loop import Agent, AgentConfig, EpisodeAgent, model_view, neutralise, run_agent
from botpsy.agent.steps import ConfirmationStep, FinalStep, ModelStep, Step, ToolStep, summarize

__all__ = ["Agent", "AgentConfig", "EpisodeAgent", "run_agent", "neutralise", "model_view", "ModelStep",
           "ToolStep", "ConfirmationStep", "FinalStep", "Step", "summarize"]
