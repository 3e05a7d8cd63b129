"""The states a run, a node iteration, an attempt and a note can be in (BRIEF section 2); both
schemas check their columns against these."""

from __future__ import annotations

RUN_STATUSES = ("pending", "running", "finished", "failed", "cancelled", "handed-off")
NODE_STATES = ("pending", "running", "retrying", "finished", "failed", "cancelled", "skipped")
ENDED_NODE_STATES = ("finished", "failed", "cancelled", "skipped")
"""The node states a node iteration does not leave on its own."""
ATTEMPT_STATES = ("running", "finished", "failed", "cancelled", "abandoned")
NOTE_STATUSES = ("pending", "accepted", "rejected")


def sql_list(values: tuple[str, ...]) -> str:
    """``values`` as a parenthesised SQL list of string literals (for the schemas' checks)."""
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"
