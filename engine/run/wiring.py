"""Wiring an :class:`~engine.run.engine.Engine` for a workspace: its config file and the hooks
(memory runtime, dispatch guards) every front end (CLI, dashboard, demo) should share.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from engine.agents.registry import AgentRegistry
from engine.executors.executors import check_placement
from engine.hooks import EngineHooks, ProgressCallback
from engine.memory.recall_mode import MemorySettings
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig, load_config
from engine.run.task_settings import task_agent_name, task_memory
from engine.telemetry.otel_settings import resolve_target
from engine.workflow.definition import Workflow
from engine.workflow.root_prompts import check_root_prompts
from store.db.seam import Database
from store.runs.owners import new_owner_id


def build_hooks(
    db: Database,
    on_progress: ProgressCallback | None = None,
    config: EngineConfig | None = None,
    shared_encoder: bool = False,
) -> EngineHooks:
    """The hooks installed for every engine on ``db``.

    INTEGRATION POINT: the memory runtime (``hooks.memory``) and the ceiling/handoff feature
    (``hooks.guards`` and ``hooks.handoff``) are added here. With ``shared_encoder`` the
    runtime's encoder is the workspace's encoder service (the dashboard: the model stays out
    of its process), else it loads in this process when a task first needs it.
    """
    from engine.ceiling import CeilingGuard
    from engine.handoff import HandoffManager

    return EngineHooks(
        memory=memory_runtime(db, (config or EngineConfig()).memory, shared_encoder),
        guards=[CeilingGuard(db)],
        handoff=HandoffManager(db),
        on_progress=on_progress,
    )


def memory_runtime(db: Database, settings: MemorySettings, shared_encoder: bool) -> Any:
    """The memory runtime of an engine (see :func:`build_hooks`)."""
    from engine.memory.runtime import MemoryRuntime

    if not shared_encoder:
        return MemoryRuntime(db, settings=settings)

    async def remote() -> Any:
        from engine.memory.encoder_service import RemoteEncoder

        try:
            return await asyncio.to_thread(RemoteEncoder, db.workspace, settings.encoder)
        except Exception:  # no service could start: keyword recall answers, and says why
            return None

    return MemoryRuntime(db, settings=settings, encoder_source=remote)


def open_engine(
    db: Database,
    *,
    on_progress: ProgressCallback | None = None,
    config: EngineConfig | None = None,
    owner_id: str | None = None,
    shared_encoder: bool = False,
) -> Engine:
    """An engine on ``db`` with the workspace's ``config.toml`` and the standard hooks; with
    telemetry configured, its runs are exported as they record (:mod:`engine.telemetry`)."""
    config = config or load_config(db.workspace.config_path)
    owner_id = owner_id or new_owner_id()
    hooks = build_hooks(db, on_progress, config, shared_encoder)
    engine = Engine(db, config=config, hooks=hooks, owner_id=owner_id)
    if resolve_target(config.telemetry, os.environ) is not None:
        from engine.telemetry.otel_process import attach

        attach(db.workspace, config.telemetry, owner_id, config.agents)
    return engine


def preflight(workflow: Workflow, config: EngineConfig, raw_input: Any = None, *,
              check_input: bool = True) -> None:
    """Every check :meth:`Engine.start` makes before it writes, without a database: so a
    refused ``tether run`` creates nothing, not even the workspace folder.

    The definition (graph, ceiling, memory configs, agents) and, with ``check_input``, the
    input and the prompts that depend on it alone. InvalidInputError names the problem.
    """
    from engine.ceiling import ceiling_of

    workflow.validate()
    ceiling_of(workflow.ceiling)
    resolve_target(config.telemetry, os.environ)  # a bad OTEL_* variable is one sentence
    registry = AgentRegistry(workflow.agents, config.agents)
    agents = {}
    for spec in workflow.tasks.values():
        task_memory(spec, workflow)
        agents[spec.id] = registry.get(task_agent_name(spec, workflow))
    check_placement(config.execution, workflow, agents)
    if check_input:
        check_root_prompts(workflow, workflow.parse_input(raw_input))
