"""SQL text for the event log (``events``). Executed by :mod:`store.runs.event_log`."""

from __future__ import annotations

import functools

INSERT_EVENT_HEAD = """
INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json)
VALUES """
"""How every statement that only appends events starts."""

_EVENT_ROW = "(?, ?, ?, ?, ?, ?, ?)"

EVENTS_PER_INSERT = 500
"""The most events one statement appends (7 parameters each, well under either backend's
limit on parameters per statement)."""


@functools.lru_cache(maxsize=1024)
def appends_events(sql: str) -> bool:
    """Whether ``sql`` appends events (PostgreSQL notifies the workspace's channel at the
    commit of a transaction that ran one): on its own or as part of a larger statement."""
    return "INSERT INTO events" in sql


@functools.lru_cache(maxsize=EVENTS_PER_INSERT)
def insert_events_text(rows: int) -> str:
    """One statement appending ``rows`` events (a write's events cost one statement, not one
    per event: on PostgreSQL each statement is a message of its own)."""
    return INSERT_EVENT_HEAD + ",\n       ".join([_EVENT_ROW] * rows) + "\n"


def named_event_rows(rows: int) -> str:
    """The ``VALUES`` rows of ``rows`` events at ``:now`` with named markers (``:e0_type``...,
    bound by :func:`store.runs.event_log.event_params`), for a larger statement that also
    appends events."""
    return ",\n       ".join(
        f"(:now, :e{n}_type, :e{n}_run_id, :e{n}_node_id, :e{n}_iteration, :e{n}_attempt, "
        f":e{n}_payload_json)"
        for n in range(rows)
    )


EVENT_COLUMNS = "seq, at_ms, type, run_id, node_id, iteration, attempt, payload_json"

EVENTS_SINCE = f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?"

EVENTS_SINCE_RUN = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)

RECENT_EVENTS = f"SELECT {EVENT_COLUMNS} FROM events ORDER BY seq DESC LIMIT ?"

RECENT_EVENTS_RUN = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT ?"
)

LAST_EVENT_SEQ = "SELECT coalesce(max(seq), 0) FROM events"

# The newest event written before a time, found walking back from the newest one (the events'
# times grow with their sequence numbers, so the walk stops as soon as it reaches that time).
LAST_EVENT_BEFORE = "SELECT seq FROM events WHERE at_ms < ? ORDER BY seq DESC LIMIT 1"
