"""PostgreSQL twins of :mod:`store.memory.memory_blocks_sql`."""

from __future__ import annotations

UPSERT_MEMORY_BLOCK = """
INSERT INTO memory_blocks (run_id, node_id, iteration, attempt, query, banks_json, text,
                           items_json, bytes_used, budget_bytes, truncated, warning, degraded,
                           duration_ms, created_at_ms)
VALUES (%(run_id)s, %(node_id)s, %(iteration)s, %(attempt)s, %(query)s, %(banks_json)s,
        %(text)s, %(items_json)s, %(bytes_used)s, %(budget_bytes)s, %(truncated)s, %(warning)s,
        %(degraded)s, %(duration_ms)s, %(now)s)
ON CONFLICT (run_id, node_id, iteration) DO UPDATE SET
    attempt = excluded.attempt, query = excluded.query, banks_json = excluded.banks_json,
    text = excluded.text, items_json = excluded.items_json, bytes_used = excluded.bytes_used,
    budget_bytes = excluded.budget_bytes, truncated = excluded.truncated,
    warning = excluded.warning, degraded = excluded.degraded,
    duration_ms = excluded.duration_ms, created_at_ms = excluded.created_at_ms
RETURNING block_id
"""

SELECT_MEMORY_BLOCK = """
SELECT * FROM memory_blocks WHERE run_id = %s AND node_id = %s AND iteration = %s
"""

SELECT_MEMORY_BLOCKS_RUN = "SELECT * FROM memory_blocks WHERE run_id = %s ORDER BY block_id"
