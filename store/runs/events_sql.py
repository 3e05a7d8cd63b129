"""SQL text for the event log (``events``). Executed by :mod:`store.runs.event_log`."""

from __future__ import annotations

INSERT_EVENT = """
INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

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
