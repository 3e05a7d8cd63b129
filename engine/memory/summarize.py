"""Running the store's Summarizer processor with an engine agent.

The :class:`store.memory.processors.Summarizer` takes any async callable that turns a prompt into a
summary; :func:`agent_summarize_fn` adapts an engine agent to that shape, and
:func:`summarizer_agent_name` picks the agent: ``--agent`` on the command line, else
``[memory] summarizer_agent`` in ``.tether/config.toml``, else the simulated agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from engine.agents.agent import Agent, AgentError, AgentRequest
from store.errors import InvalidInputError
from store.workspace.config_file import read_config

DEFAULT_SUMMARIZER_AGENT = "simulated"


def summarizer_agent_name(config_path: Path, explicit: str | None = None) -> str:
    """The agent to summarise with (see the module docstring)."""
    if explicit:
        return explicit
    data = read_config(config_path)
    section = data.get("memory", {})
    name = section.get("summarizer_agent") if isinstance(section, dict) else None
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InvalidInputError(f"{config_path}: memory.summarizer_agent must be an agent name.")
    return name or DEFAULT_SUMMARIZER_AGENT


def agent_summarize_fn(agent: Agent) -> Callable[[str], Awaitable[str]]:
    """An async ``prompt -> summary`` callable backed by ``agent`` (its final text)."""

    async def summarize(prompt: str) -> str:
        try:
            result = await agent.run(AgentRequest(prompt=prompt, node_id="memory-summarize"))
        except AgentError as error:
            raise InvalidInputError(f"The summarizer agent {agent.name} failed: {error}") from error
        text = result.text.strip()
        if not text:
            raise InvalidInputError(f"The summarizer agent {agent.name} returned no text.")
        return text

    return summarize
