"""The engine's executors: each task's placement (in-process by default), the Ray cluster this
process connects to when a task is placed there, and the checks made before anything runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from engine.agents.agent import Agent
from engine.executors.ray_agent import OnPlaced, RayAgent
from engine.executors.ray_cluster import RayCluster, import_ray
from engine.executors.settings import (
    Execution,
    ExecutionConfig,
    cluster_address,
    execution_from,
    ray_options,
    resolve,
)
from engine.workflow.definition import Workflow
from engine.workflow.task_spec import TaskSpec
from store.errors import InvalidInputError


def task_execution(config: ExecutionConfig, workflow: Workflow, spec: TaskSpec) -> Execution:
    """The settings ``spec``'s attempts run with (see :func:`engine.executors.settings.resolve`)."""
    return resolve(
        config,
        execution_from(getattr(workflow, "execution", None), f"Workflow {workflow.name!r}"),
        execution_from(getattr(spec, "execution", None), f"Task {spec.id!r}"),
    )


def tasks_on_ray(config: ExecutionConfig, workflow: Workflow) -> list[TaskSpec]:
    """The tasks of ``workflow`` whose attempts go to a Ray cluster."""
    return [s for s in workflow.tasks.values() if task_execution(config, workflow, s).on_ray]


def check_placement(
    config: ExecutionConfig, workflow: Workflow, agents: Mapping[str, Agent], backend: str = ""
) -> None:
    """Refuse, before anything is written, what cannot run where it is placed: Ray missing
    on this host, an agent that cannot be sent to a node, memory tools served by ``tether
    mcp`` from a SQLite workspace that a node on another host cannot open. ``agents`` maps
    each Ray task's id to its agent; ``backend`` is the workspace's (empty: not known yet)."""
    on_ray = tasks_on_ray(config, workflow)
    if not on_ray:
        return
    ray = import_ray()
    for spec in on_ray:
        agent = agents[spec.id]
        try:
            ray.cloudpickle.dumps(agent)
        except Exception as error:
            raise InvalidInputError(
                f"Task {spec.id!r} runs on Ray but its agent {agent.name!r} cannot be sent to a "
                f"Ray node ({type(error).__name__}: {error}); define it in [agents] of "
                "config.toml instead."
            ) from None
        tools = bool(getattr(spec.memory or workflow.memory, "tools", False))
        if tools and backend == "sqlite" and _serves_mcp(agent):
            raise InvalidInputError(
                f"Task {spec.id!r} offers memory tools to an agent CLI on Ray: its `tether mcp` "
                "server would run on the Ray node, which cannot open this SQLite workspace; use "
                "a team workspace (PostgreSQL) or run the task in-process."
            )


def _serves_mcp(agent: Agent) -> bool:
    from engine.agents.cli.command import CommandAgent

    return isinstance(agent, CommandAgent) and agent.supports_tools


class Executors:
    """Where one engine's attempts run."""

    def __init__(self, config: ExecutionConfig, environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.address = cluster_address(config.address, os.environ if environ is None else environ)
        self._cluster: RayCluster | None = None

    @property
    def cluster(self) -> RayCluster:
        """The Ray cluster (connected on first use by :meth:`RayCluster.connect`)."""
        if self._cluster is None:
            self._cluster = RayCluster(self.address)
        return self._cluster

    def uses_ray(self, workflow: Workflow) -> bool:
        """True when some task of ``workflow`` runs on Ray."""
        return bool(tasks_on_ray(self.config, workflow))

    def place(
        self,
        agent: Agent,
        workflow: Workflow,
        spec: TaskSpec,
        on_placed: OnPlaced,
        on_lost: Callable[[], None],
    ) -> Agent:
        """The agent an attempt of ``spec`` calls: ``agent`` itself in-process, a
        :class:`RayAgent` around it on Ray."""
        settings = task_execution(self.config, workflow, spec)
        if not settings.on_ray:
            return agent
        proxy: Any = RayAgent(agent, self.cluster, ray_options(settings), on_placed, on_lost)
        return proxy
