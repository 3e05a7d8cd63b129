"""Building agents by name from the workflow's ``agents`` and ``.tether/config.toml``.

Lookup order for a task's agent name: the workflow's own ``agents`` (objects or config
dicts), then ``[agents.<name>]`` in the config file, then the built-in ``simulated``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.agents.agent import Agent
from store.errors import InvalidInputError

AGENT_TYPES = ("simulated", "command", "openai", "anthropic")


def build_agent(name: str, spec: Mapping[str, Any]) -> Agent:
    """An agent from a config table (``type`` plus that agent's options)."""
    options = {k: v for k, v in spec.items() if k != "type"}
    kind = spec.get("type")
    try:
        if kind == "simulated":
            from engine.agents.simulated import SimulatedAgent

            return SimulatedAgent(name=name, **options)
        if kind == "command":
            from engine.agents.cli.command import CommandAgent

            return CommandAgent(name=name, **options)
        if kind == "openai":
            from engine.agents.http.openai import OpenAIAgent

            return OpenAIAgent(name=name, **options)
        if kind == "anthropic":
            from engine.agents.http.anthropic import AnthropicAgent

            return AnthropicAgent(name=name, **options)
    except TypeError as error:
        raise InvalidInputError(
            f"Agent {name!r} has an unknown or missing setting: {error}."
        ) from error
    except ValueError as error:
        raise InvalidInputError(f"Agent {name!r} is misconfigured: {error}.") from error
    raise InvalidInputError(
        f"Agent {name!r} has type {kind!r}; use one of: {', '.join(AGENT_TYPES)}."
    )


class AgentRegistry:
    """Resolves and caches agents by name for one engine."""

    def __init__(
        self,
        workflow_agents: Mapping[str, Any] | None = None,
        config_agents: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self._workflow = dict(workflow_agents or {})
        self._config = dict(config_agents or {})
        self._built: dict[str, Agent] = {}

    def get(self, name: str) -> Agent:
        """The agent called ``name``. Raises InvalidInputError for an unknown name."""
        if name in self._built:
            return self._built[name]
        agent: Agent
        if name in self._workflow:
            value = self._workflow[name]
            agent = build_agent(name, value) if isinstance(value, Mapping) else value
        elif name in self._config:
            agent = build_agent(name, self._config[name])
        elif name == "simulated":
            agent = build_agent(name, {"type": "simulated"})
        else:
            raise InvalidInputError(
                f"No agent named {name!r}; define it in the workflow's agents or in "
                "[agents] of .tether/config.toml."
            )
        self._built[name] = agent
        return agent

    def names(self) -> list[str]:
        """Every agent name this registry can resolve."""
        return sorted({*self._workflow, *self._config, "simulated"})
