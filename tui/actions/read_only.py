"""A dashboard connected with a role that may only read (a PostgreSQL workspace shared with
viewers) hides every key that writes, instead of offering it and failing."""

from __future__ import annotations

from typing import Any

WRITE_ACTIONS = frozenset(
    {
        "launch_run",
        "clear_run",
        "cancel_run",
        "resume_run",
        "delete_run",
        "fork_node",
        "steer_node",
        "edit_fact",
        "new_fact",
        "delete_fact",
        "accept_note",
        "reject_note",
        "accept",
        "reject",
    }
)
"""Actions that write the workspace, on any screen."""


def read_only(app: Any) -> bool:
    """True when the app's reading connection says the workspace may only be read."""
    return bool(getattr(getattr(app, "reader", None), "read_only", False))


def write_refused(app: Any, action: str) -> bool:
    """True when ``action`` writes and the workspace may only be read (hide the key)."""
    return action in WRITE_ACTIONS and read_only(app)
