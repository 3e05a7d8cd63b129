"""PostgreSQL twins of :mod:`store.runs.events_sql`.

Reads by ``seq`` see what is committed; a transaction still running may commit a smaller
``seq`` later. The dashboard's tail keeps track of such gaps (``store/read/pg_dashboard_tail.py``);
these reads serve listings and tests, like SQLite's.
"""

from __future__ import annotations

INSERT_EVENT = """
INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json)
VALUES (%s, %s, %s, %s, %s, %s, %s)
"""

_COLUMNS = "seq, at_ms, type, run_id, node_id, iteration, attempt, payload_json"

EVENTS_SINCE = f"SELECT {_COLUMNS} FROM events WHERE seq > %s ORDER BY seq LIMIT %s"

EVENTS_SINCE_RUN = (
    f"SELECT {_COLUMNS} FROM events WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)

RECENT_EVENTS = f"SELECT {_COLUMNS} FROM events ORDER BY seq DESC LIMIT %s"

RECENT_EVENTS_RUN = f"SELECT {_COLUMNS} FROM events WHERE run_id = %s ORDER BY seq DESC LIMIT %s"

LAST_EVENT_SEQ = "SELECT coalesce(max(seq), 0) FROM events"
