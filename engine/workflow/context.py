"""What a prompt function sees: the run input, upstream typed outputs, its place in a fan-out or
loop, and the run's artifacts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.artifact_files import RunArtifacts
from engine.workflow.definition_error import WorkflowDefinitionError

_MISSING: Any = object()


@dataclass
class TaskContext:
    """Handed to prompt functions, ``until`` conditions, fan-out ``items`` and cache keys.

    ``outputs`` maps upstream task ids to their typed outputs: a pydantic model instance, a list
    of them for a fan-out (fan-in), and the latest iteration's output for a loop body task.
    """

    workflow: str
    run_id: str
    input: Any
    task_id: str
    node_id: str
    iteration: int = 0
    attempt: int = 1
    item: Any = None
    index: int | None = None
    outputs: Mapping[str, Any] = field(default_factory=dict)
    previous_outputs: Mapping[str, Any] = field(default_factory=dict)
    artifacts: RunArtifacts | None = None
    continuation: Any = None

    def output(self, task_id: str, default: Any = _MISSING) -> Any:
        """The typed output of an upstream task (``default`` when given and absent)."""
        if task_id in self.outputs:
            return self.outputs[task_id]
        if default is not _MISSING:
            return default
        raise WorkflowDefinitionError(
            f"Task {self.task_id!r} read the output of {task_id!r}, which is not one of its "
            "finished dependencies; add it to depends_on."
        )

    def previous(self, task_id: str | None = None) -> Any:
        """In a loop: the output ``task_id`` (default: this task) had in the previous
        iteration, or None in the first iteration."""
        return self.previous_outputs.get(task_id or self.task_id)
