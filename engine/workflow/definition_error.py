"""The error a workflow definition raises: one sentence, before anything runs."""

from __future__ import annotations

from store.errors import InvalidInputError


class WorkflowDefinitionError(InvalidInputError):
    """The workflow definition is invalid; nothing has run."""
