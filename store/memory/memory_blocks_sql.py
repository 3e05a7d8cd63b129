"""SQL text for memory blocks. Executed by :mod:`store.memory.memory_blocks`."""

from __future__ import annotations

UPSERT_MEMORY_BLOCK = """
INSERT INTO memory_blocks (run_id, node_id, iteration, attempt, query, banks_json, text,
                           items_json, bytes_used, budget_bytes, truncated, warning, degraded,
                           duration_ms, created_at_ms)
VALUES (:run_id, :node_id, :iteration, :attempt, :query, :banks_json, :text, :items_json,
        :bytes_used, :budget_bytes, :truncated, :warning, :degraded, :duration_ms, :now)
ON CONFLICT (run_id, node_id, iteration) DO UPDATE SET
    attempt = excluded.attempt, query = excluded.query, banks_json = excluded.banks_json,
    text = excluded.text, items_json = excluded.items_json, bytes_used = excluded.bytes_used,
    budget_bytes = excluded.budget_bytes, truncated = excluded.truncated,
    warning = excluded.warning, degraded = excluded.degraded,
    duration_ms = excluded.duration_ms, created_at_ms = excluded.created_at_ms
RETURNING block_id
"""

SELECT_MEMORY_BLOCK = """
SELECT * FROM memory_blocks WHERE run_id = ? AND node_id = ? AND iteration = ?
"""

SELECT_MEMORY_BLOCKS_RUN = "SELECT * FROM memory_blocks WHERE run_id = ? ORDER BY block_id"
