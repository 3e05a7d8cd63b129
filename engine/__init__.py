"""Workflows, scheduler, agents, memory runtime, caching, ceilings, handoff and metering.

Depends on ``store``; knows nothing of ``tui``. This module is the public API: what a workflow
author writes and runs with, importable as ``from engine import Workflow, Ceiling, ...``:

* defining a workflow: :class:`Workflow`, :class:`TaskSpec` and :class:`LoopSpec` (what the
  decorators return), :class:`TaskContext` (what a prompt function receives, with its
  :class:`RunArtifacts`), :class:`Backoff`, :class:`CachePolicy`, :class:`MemoryConfig`,
  :class:`Ceiling`, :class:`Budget`, a distiller's :class:`DistillInput` and
  :class:`FinishedNode` (and :func:`default_distill`), :class:`WorkflowDefinitionError`,
  :func:`load_workflow`;
* agents: :class:`SimulatedAgent`, :class:`CommandAgent`, :class:`OpenAIAgent`,
  :class:`AnthropicAgent` (with :class:`RetryPolicy`), and for an agent of your own the
  :class:`Agent` protocol with :class:`AgentRequest`, :class:`AgentResult`,
  :class:`ModelCall`, :class:`AgentTool` and :class:`AgentError`;
* running: :func:`open_engine` (the engine ``tether run`` uses), :class:`Engine`,
  :class:`EngineConfig` and :func:`load_config`, :class:`RunOutcome`;
* hooks: :class:`EngineHooks` with :class:`Progress` updates, :class:`DispatchGuard`
  (:class:`DispatchContext` in, :class:`DispatchDecision` out), :class:`HandoffHandler`
  (:class:`HandoffRequest`), :class:`MemoryHook`, and the standard :class:`CeilingGuard` and
  :class:`MemoryRuntime`.

Names load when first used (PEP 562), so ``import engine.x`` stays as cheap as ``engine.x``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.agents.agent import Agent, AgentError, AgentRequest, AgentResult, ModelCall
    from engine.agents.agent_tool import AgentTool
    from engine.agents.cli.command import CommandAgent
    from engine.agents.http.anthropic import AnthropicAgent
    from engine.agents.http.http_retry import RetryPolicy
    from engine.agents.http.openai import OpenAIAgent
    from engine.agents.simulated import SimulatedAgent
    from engine.artifact_files import RunArtifacts
    from engine.budget import Budget
    from engine.ceiling import Ceiling, CeilingGuard
    from engine.handoff import DistillInput, FinishedNode, default_distill
    from engine.hooks import (
        DispatchContext,
        DispatchDecision,
        DispatchGuard,
        EngineHooks,
        HandoffHandler,
        HandoffRequest,
        MemoryHook,
        Progress,
    )
    from engine.memory.memory_config import MemoryConfig
    from engine.memory.runtime import MemoryRuntime
    from engine.run.engine import Engine
    from engine.run.engine_config import EngineConfig, load_config
    from engine.run.run_end import RunOutcome
    from engine.run.wiring import open_engine
    from engine.workflow.context import TaskContext
    from engine.workflow.definition import LoopSpec, Workflow
    from engine.workflow.definition_error import WorkflowDefinitionError
    from engine.workflow.loader import load_workflow
    from engine.workflow.policies import Backoff, CachePolicy
    from engine.workflow.task_spec import TaskSpec

# Where each public name lives (the same as the imports above, which are for type checkers;
# tests/structure/test_public_api.py holds the two equal).
_PUBLIC: dict[str, str] = {
    "Agent": "engine.agents.agent",
    "AgentError": "engine.agents.agent",
    "AgentRequest": "engine.agents.agent",
    "AgentResult": "engine.agents.agent",
    "ModelCall": "engine.agents.agent",
    "AgentTool": "engine.agents.agent_tool",
    "CommandAgent": "engine.agents.cli.command",
    "AnthropicAgent": "engine.agents.http.anthropic",
    "RetryPolicy": "engine.agents.http.http_retry",
    "OpenAIAgent": "engine.agents.http.openai",
    "SimulatedAgent": "engine.agents.simulated",
    "RunArtifacts": "engine.artifact_files",
    "Budget": "engine.budget",
    "Ceiling": "engine.ceiling",
    "CeilingGuard": "engine.ceiling",
    "DistillInput": "engine.handoff",
    "FinishedNode": "engine.handoff",
    "default_distill": "engine.handoff",
    "DispatchContext": "engine.hooks",
    "DispatchDecision": "engine.hooks",
    "DispatchGuard": "engine.hooks",
    "EngineHooks": "engine.hooks",
    "HandoffHandler": "engine.hooks",
    "HandoffRequest": "engine.hooks",
    "MemoryHook": "engine.hooks",
    "Progress": "engine.hooks",
    "MemoryConfig": "engine.memory.memory_config",
    "MemoryRuntime": "engine.memory.runtime",
    "Engine": "engine.run.engine",
    "EngineConfig": "engine.run.engine_config",
    "load_config": "engine.run.engine_config",
    "RunOutcome": "engine.run.run_end",
    "open_engine": "engine.run.wiring",
    "TaskContext": "engine.workflow.context",
    "LoopSpec": "engine.workflow.definition",
    "Workflow": "engine.workflow.definition",
    "WorkflowDefinitionError": "engine.workflow.definition_error",
    "load_workflow": "engine.workflow.loader",
    "Backoff": "engine.workflow.policies",
    "CachePolicy": "engine.workflow.policies",
    "TaskSpec": "engine.workflow.task_spec",
}

__all__ = [
    "Agent",
    "AgentError",
    "AgentRequest",
    "AgentResult",
    "AgentTool",
    "AnthropicAgent",
    "Backoff",
    "Budget",
    "CachePolicy",
    "Ceiling",
    "CeilingGuard",
    "CommandAgent",
    "DispatchContext",
    "DispatchDecision",
    "DispatchGuard",
    "DistillInput",
    "Engine",
    "EngineConfig",
    "EngineHooks",
    "FinishedNode",
    "HandoffHandler",
    "HandoffRequest",
    "LoopSpec",
    "MemoryConfig",
    "MemoryHook",
    "MemoryRuntime",
    "ModelCall",
    "OpenAIAgent",
    "Progress",
    "RetryPolicy",
    "RunArtifacts",
    "RunOutcome",
    "SimulatedAgent",
    "TaskContext",
    "TaskSpec",
    "Workflow",
    "WorkflowDefinitionError",
    "default_distill",
    "load_config",
    "load_workflow",
    "open_engine",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (then it is a plain attribute)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
