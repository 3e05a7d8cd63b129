"""SQL text for replaying a run (:mod:`store.read.replay_reads`), written once in SQLite's
spelling (PostgreSQL's connection renders it, :mod:`store.db.dialect`)."""

from __future__ import annotations

from store.runs.events_sql import EVENT_COLUMNS

# One page of a run's events in sequence order, through events_run_idx (run_id, seq).
RUN_EVENTS_PAGE = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)

# The newest event of one run (0: none), through events_run_idx: what a view of the run has
# caught up with.
RUN_LAST_EVENT_SEQ = "SELECT coalesce(max(seq), 0) FROM events WHERE run_id = ?"

# The run's node iterations, for their dependencies (the replayed states come from events).
RUN_NODE_SHAPES = """
SELECT run_id, node_id, iteration, state, attempts, cached, depends_on_json,
       NULL AS output_json, NULL AS error, started_at_ms, finished_at_ms, updated_at_ms
FROM nodes WHERE run_id = ? ORDER BY node_id, iteration LIMIT ?
"""

# Notes the run wrote, by id (the ids come from its memory.retained and memory.tool events).
NOTE_COLUMNS = "id, namespace, body, status, created_at_ms, node_id, iteration"


def notes_by_ids(count: int) -> str:
    """The notes with ``count`` given ids (primary-key lookups), oldest first."""
    marks = ", ".join("?" for _ in range(count))
    return f"SELECT {NOTE_COLUMNS} FROM notes WHERE id IN ({marks}) ORDER BY created_at_ms, id"
