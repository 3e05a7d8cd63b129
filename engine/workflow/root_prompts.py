"""Root prompts rendered once before a run starts, so an empty or failing prompt is a
definition error before anything is written."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from engine.artifact_files import RunArtifacts
from engine.workflow.context import TaskContext
from engine.workflow.definition import Workflow
from engine.workflow.definition_error import WorkflowDefinitionError
from engine.workflow.task_spec import TaskSpec
from engine.workflow.user_code import USER_CODE_ERRORS, raised


def check_root_prompts(workflow: Workflow, parsed: Any) -> None:
    """Render every prompt that depends on nothing but the input, so an empty or failing one is
    a definition error before anything runs."""
    scratch = tempfile.TemporaryDirectory(prefix="tether-dry-render-")
    with scratch:
        for spec in workflow.tasks.values():
            if spec.depends_on or spec.is_fan_out or spec.loop is not None:
                continue
            # Artifact writes during this dry render land in a scratch folder and are discarded.
            ctx = TaskContext(
                workflow=workflow.name,
                run_id="",
                input=parsed,
                task_id=spec.id,
                node_id=spec.id,
                artifacts=RunArtifacts(Path(scratch.name), "dry-render"),
            )
            _dry_render(spec, ctx)


def _dry_render(spec: TaskSpec, ctx: TaskContext) -> None:
    try:
        text = spec.prompt(ctx)
    except USER_CODE_ERRORS as error:
        raise WorkflowDefinitionError(
            f"The prompt of task {spec.id!r} {raised(error)}"
        ) from error
    if not isinstance(text, str) or not text.strip():
        raise WorkflowDefinitionError(
            f"Task {spec.id!r} rendered an empty prompt; check what it interpolates."
        )
