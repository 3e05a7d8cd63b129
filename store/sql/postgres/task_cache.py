"""PostgreSQL twins of :mod:`store.runs.task_cache_sql`."""

from __future__ import annotations

SELECT_ENTRY = "SELECT * FROM task_cache WHERE cache_key = %s"

UPSERT_ENTRY = """
INSERT INTO task_cache (cache_key, scope, workflow, node_id, run_id, payload_json,
                        created_at_ms, ttl_ms)
VALUES (%(cache_key)s, %(scope)s, %(workflow)s, %(node_id)s, %(run_id)s, %(payload_json)s,
        %(now)s, %(ttl_ms)s)
ON CONFLICT (cache_key) DO UPDATE SET
    payload_json = excluded.payload_json, created_at_ms = excluded.created_at_ms,
    ttl_ms = excluded.ttl_ms, run_id = excluded.run_id
"""

DELETE_ENTRY = "DELETE FROM task_cache WHERE cache_key = %s"
