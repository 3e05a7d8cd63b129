"""Wiring an :class:`~engine.run.engine.Engine` for a workspace: its config file and the hooks
(memory runtime, dispatch guards) every front end (CLI, dashboard, demo) should share.
"""

from __future__ import annotations

import os
from typing import Any

from engine.agents.registry import AgentRegistry
from engine.hooks import EngineHooks, ProgressCallback
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig, load_config
from engine.run.task_settings import task_agent_name, task_memory
from engine.telemetry.otel_settings import resolve_target
from engine.workflow.definition import Workflow
from engine.workflow.root_prompts import check_root_prompts
from store.db.seam import Database
from store.runs.owners import new_owner_id


def build_hooks(db: Database, on_progress: ProgressCallback | None = None) -> EngineHooks:
    """The hooks installed for every engine on ``db``.

    INTEGRATION POINT: the memory runtime (``hooks.memory``) and the ceiling/handoff feature
    (``hooks.guards`` and ``hooks.handoff``) are added here.
    """
    from engine.ceiling import CeilingGuard
    from engine.handoff import HandoffManager
    from engine.memory.runtime import MemoryRuntime

    return EngineHooks(
        memory=MemoryRuntime(db),
        guards=[CeilingGuard(db)],
        handoff=HandoffManager(db),
        on_progress=on_progress,
    )


def open_engine(
    db: Database,
    *,
    on_progress: ProgressCallback | None = None,
    config: EngineConfig | None = None,
    owner_id: str | None = None,
) -> Engine:
    """An engine on ``db`` with the workspace's ``config.toml`` and the standard hooks; with
    telemetry configured, its runs are exported as they record (:mod:`engine.telemetry`)."""
    config = config or load_config(db.workspace.config_path)
    owner_id = owner_id or new_owner_id()
    engine = Engine(db, config=config, hooks=build_hooks(db, on_progress), owner_id=owner_id)
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
    for spec in workflow.tasks.values():
        task_memory(spec, workflow)
        registry.get(task_agent_name(spec, workflow))
    if check_input:
        check_root_prompts(workflow, workflow.parse_input(raw_input))
