"""SQL text for the event log (``events``). Executed by :mod:`store.runs.event_log`."""

from __future__ import annotations

INSERT_EVENT = """
INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

EVENTS_SINCE = "SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?"

EVENTS_SINCE_RUN = "SELECT * FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"

RECENT_EVENTS = "SELECT * FROM events ORDER BY seq DESC LIMIT ?"

RECENT_EVENTS_RUN = "SELECT * FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT ?"

LAST_EVENT_SEQ = "SELECT coalesce(max(seq), 0) FROM events"
