"""SQL text for the task-output cache (executed by :mod:`store.runs.task_cache`)."""

from __future__ import annotations

SELECT_ENTRY = "SELECT * FROM task_cache WHERE cache_key = ?"

UPSERT_ENTRY = """
INSERT INTO task_cache (cache_key, scope, workflow, node_id, run_id, payload_json,
                        created_at_ms, ttl_ms)
VALUES (:cache_key, :scope, :workflow, :node_id, :run_id, :payload_json, :now, :ttl_ms)
ON CONFLICT (cache_key) DO UPDATE SET
    payload_json = excluded.payload_json, created_at_ms = excluded.created_at_ms,
    ttl_ms = excluded.ttl_ms, run_id = excluded.run_id
"""

DELETE_ENTRY = "DELETE FROM task_cache WHERE cache_key = ?"
