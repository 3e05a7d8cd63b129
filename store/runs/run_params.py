"""Parameters the run records' statements take, and the checks made before they are written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from store.db.seam import Connection
from store.errors import InvalidInputError
from store.model.ids import random_hex
from store.model.json_columns import dump_recorded_json, recorded_text
from store.model.run_records import NewEvent
from store.runs import runs_sql as sql
from store.runs.event_log import insert_events


def new_run_id() -> str:
    """A fresh run id: short, unique, sortable enough to read in a terminal."""
    return "r-" + random_hex(12)


MAX_CLEAR_REASON_CHARS = 2_000


def check_clear_reason(reason: str) -> str:
    """The reason a person gives for a durable /clear, checked: not empty, clean text (tabs and
    newlines only; no escape sequence or other control character reaches a row, a prompt or a
    screen) and at most :data:`MAX_CLEAR_REASON_CHARS` characters."""
    from store.memory.namespaces import ensure_clean_text, ensure_length

    if not reason.strip():
        raise InvalidInputError("A clear needs a reason; pass some text.")
    ensure_clean_text(reason, "the clear reason", allow="\t\n")
    ensure_length(reason, "the clear reason", MAX_CLEAR_REASON_CHARS)
    return reason


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> None:
    """Refuse ``value`` unless it is one of ``allowed`` (``what`` names it in the message)."""
    if value not in allowed:
        raise InvalidInputError(f"{value!r} is not a {what}; use one of: {', '.join(allowed)}.")


def status_params(
    run_id: str,
    status: str,
    now: int,
    *,
    error: str | None = None,
    output: Any = None,
    set_output: bool = False,
) -> dict[str, Any]:
    """Parameters of ``UPDATE_RUN_STATUS``: ``error`` is stored when given, ``output`` only when
    ``set_output`` is true (None is a valid output)."""
    return {
        "run_id": run_id,
        "status": status,
        "now": now,
        "set_error": error is not None,
        "error": recorded_text(error),
        "set_output": set_output,
        "output_json": dump_recorded_json(output) if set_output else None,
    }


def progress_params(
    run_id: str, now: int, *, nodes_done: int | None = None, nodes_total: int | None = None
) -> dict[str, Any]:
    """Parameters of ``UPDATE_PROGRESS``: a counter given as None keeps its stored value."""
    return {"run_id": run_id, "nodes_done": nodes_done, "nodes_total": nodes_total, "now": now}


def write_node(conn: Connection, params: Mapping[str, Any]) -> None:
    """Update a node row, inserting it when it does not exist yet (``UPDATE_NODE``, as
    :func:`~store.runs.runs_sql.node_update` spells it for what ``params`` changes).

    Where reading a statement's result costs a round trip (PostgreSQL, whose group commits are
    pipelined: ``waits_for_results``), the upsert alone makes the same change without waiting."""
    if getattr(conn, "waits_for_results", False):
        conn.execute(sql.UPSERT_NODE, params)
        return
    update = sql.node_update(sql.node_update_params(params))
    if conn.execute(update, params).rowcount == 0:
        conn.execute(sql.UPSERT_NODE, params)


def abandon_attempts(conn: Connection, run_id: str, now: int) -> int:
    """Mark the run's running attempts abandoned (their process is gone) and put their nodes
    back to pending, with an event each; returns how many there were."""
    running = conn.execute(sql.SELECT_RUNNING_ATTEMPTS, (run_id,)).fetchall()
    if not running:
        conn.execute(sql.RESET_RUNNING_NODES, {"run_id": run_id, "now": now})
        return 0
    conn.execute(sql.ABANDON_ATTEMPTS, {"run_id": run_id, "now": now})
    conn.execute(sql.RESET_RUNNING_NODES, {"run_id": run_id, "now": now})
    insert_events(
        conn,
        now,
        [NewEvent("attempt.abandoned", r[0], r[1], r[2], r[3]) for r in running],
    )
    return len(running)
