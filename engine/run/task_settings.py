"""What a declared task runs with once its workflow's defaults apply: its agent's name and its
memory config (pure)."""

from __future__ import annotations

from typing import Any

from engine.memory.memory_config import resolve_memory
from engine.workflow.definition import Workflow
from engine.workflow.task_spec import TaskSpec


def task_agent_name(spec: TaskSpec, workflow: Workflow) -> str:
    """The agent a task runs on: its own, else the workflow's default."""
    return spec.agent or workflow.default_agent


def task_memory(spec: TaskSpec, workflow: Workflow) -> Any:
    """The memory config a task runs with (its own replaces the workflow's), or None."""
    if spec.memory is None and workflow.memory is None:
        return None
    return resolve_memory(spec.memory, workflow.memory)


def memory_is_active(config: Any) -> bool:
    """True when a task reads or writes memory, so its output must bypass the cache."""
    return config is not None and config is not False and bool(getattr(config, "is_active", True))
