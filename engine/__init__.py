"""Workflows, scheduler, agents, memory runtime, caching, ceilings, handoff and metering.

Depends on ``store``; knows nothing of ``tui``.
"""

from engine.workflow import Backoff, CachePolicy, Workflow, WorkflowDefinitionError

__all__ = ["Backoff", "CachePolicy", "Workflow", "WorkflowDefinitionError"]
