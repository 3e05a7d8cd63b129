"""The units a run execution is made of: :class:`Unit` (one node to execute) and the
exceptions that end a unit's dispatch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.workflow.task_spec import TaskSpec

Key = tuple[str, int]


class UnitFailed(Exception):
    """A node failed for good (retries exhausted or a non-retryable error)."""


class StopDispatch(Exception):
    """The run stopped dispatching (handoff requested); the node stays pending."""


class NodeSkipped(Exception):
    """A guard skipped the node."""


@dataclass
class Unit:
    """One node to execute: a task at an iteration (and, for a fan-out copy, its item)."""

    spec: TaskSpec
    node_id: str
    iteration: int = 0
    item: Any = None
    index: int | None = None

    @property
    def key(self) -> Key:
        return (self.node_id, self.iteration)
