"""PostgreSQL twins of :mod:`store.read.dashboard_sql` (the dashboard's bounded reads), and the
reads of the event tail that keeps track of numbers not yet seen
(``store/read/pg_dashboard_tail.py``).
"""

from __future__ import annotations

from store.read.dashboard_sql import _CALL_COLUMNS, _EVENT_COLUMNS, _HANDOFF_COLUMNS, _RUN_COLUMNS

# Events whose numbers the tail saw skipped (their transaction had not committed yet).
EVENTS_BY_SEQ = f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq = ANY(%s) ORDER BY seq"

MAX_EVENT_SEQ = "SELECT coalesce(max(seq), 0) FROM events"

EVENTS_SINCE = f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq > %s ORDER BY seq LIMIT %s"

EVENTS_RECENT = f"SELECT {_EVENT_COLUMNS} FROM events ORDER BY seq DESC LIMIT %s"

RUNS_RECENT = f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at_ms DESC LIMIT %s"

RUN_BY_ID = f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = %s"

RUNS_ACTIVE = f"SELECT {_RUN_COLUMNS} FROM runs WHERE status = 'running' LIMIT %s"

RUNS_BY_ID_LIST = f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ANY(%s)"

NODES_OF_RUN = """
SELECT run_id, node_id, iteration, state, attempts, cached, depends_on_json, output_json, error,
       started_at_ms, finished_at_ms, updated_at_ms
FROM nodes WHERE run_id = %s
ORDER BY started_at_ms IS NULL, started_at_ms, node_id, iteration
LIMIT %s
"""

# Sums of BIGINT are NUMERIC in PostgreSQL: cast back so rows hold ints, as in SQLite.
NODE_USAGE_OF_RUN = """
SELECT node_id, iteration, count(*) FILTER (WHERE kind = 'model') AS calls,
       sum(cost_usd) AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL AND kind <> 'retry') AS unpriced_calls,
       coalesce(sum(input_tokens), 0)::bigint AS input_tokens,
       coalesce(sum(cache_read_tokens), 0)::bigint AS cache_read_tokens,
       coalesce(sum(cache_write_tokens), 0)::bigint AS cache_write_tokens,
       coalesce(sum(output_tokens), 0)::bigint AS output_tokens,
       coalesce(sum(reasoning_tokens), 0)::bigint AS reasoning_tokens,
       coalesce(max(context_tokens), 0)::bigint AS max_context_tokens
FROM calls WHERE run_id = %s
GROUP BY node_id, iteration
"""

ATTEMPTS_OF_NODE = """
SELECT run_id, node_id, iteration, attempt, state, agent, model, prompt, response_text, error,
       cached, started_at_ms, finished_at_ms, input_tokens, cache_read_tokens,
       cache_write_tokens, output_tokens, reasoning_tokens, cost_usd, unpriced_calls,
       details_json
FROM attempts WHERE run_id = %s AND node_id = %s AND iteration = %s
ORDER BY attempt DESC LIMIT %s
"""

CALLS_OF_NODE = f"""
SELECT {_CALL_COLUMNS} FROM calls
WHERE run_id = %s AND node_id = %s AND iteration = %s
ORDER BY attempt DESC, call_id DESC LIMIT %s
"""

CALLS_OF_RUN_RECENT = (
    f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = %s ORDER BY call_id DESC LIMIT %s"
)

TOP_CALLS_WORKSPACE = f"SELECT {_CALL_COLUMNS} FROM calls ORDER BY context_tokens DESC LIMIT %s"
TOP_CALLS_RUN = (
    f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = %s ORDER BY context_tokens DESC LIMIT %s"
)
TOP_CALLS_NODE = f"""
SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = %s AND node_id = %s
ORDER BY context_tokens DESC LIMIT %s
"""

USAGE_ROLLUP = """
SELECT bucket, calls, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
       reasoning_tokens, cost_usd, unpriced_calls
FROM usage_rollups WHERE run_id = %s
"""

USAGE_OF_NODE = """
SELECT bucket, count(*) FILTER (WHERE kind = 'model') AS calls,
       sum(cost_usd) AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL AND kind <> 'retry') AS unpriced_calls,
       coalesce(sum(input_tokens), 0)::bigint AS input_tokens,
       coalesce(sum(cache_read_tokens), 0)::bigint AS cache_read_tokens,
       coalesce(sum(cache_write_tokens), 0)::bigint AS cache_write_tokens,
       coalesce(sum(output_tokens), 0)::bigint AS output_tokens,
       coalesce(sum(reasoning_tokens), 0)::bigint AS reasoning_tokens
FROM calls WHERE run_id = %s AND node_id = %s
GROUP BY bucket
"""

MEMORY_BLOCK_OF_NODE = """
SELECT block_id, run_id, node_id, iteration, attempt, query, banks_json, text, items_json,
       bytes_used, budget_bytes, truncated, warning, degraded, duration_ms, created_at_ms
FROM memory_blocks WHERE run_id = %s AND node_id = %s AND iteration = %s
"""

HANDOFFS_RECENT = f"SELECT {_HANDOFF_COLUMNS} FROM handoffs ORDER BY handoff_id DESC LIMIT %s"
HANDOFF_INTO_RUN = f"SELECT {_HANDOFF_COLUMNS} FROM handoffs WHERE to_run_id = %s LIMIT 1"
HANDOFF_FROM_RUN = (
    f"SELECT {_HANDOFF_COLUMNS} FROM handoffs WHERE from_run_id = %s "
    "ORDER BY handoff_id DESC LIMIT 1"
)

MEMORY_BLOCKS_OF_RUN = """
SELECT node_id, iteration, bytes_used, budget_bytes, truncated, warning, degraded
FROM memory_blocks WHERE run_id = %s
"""

WORKERS_RECENT = """
SELECT worker_id, host, pid, started_at_ms, heartbeat_at_ms, runs_held FROM workers
WHERE stopped_at_ms IS NULL ORDER BY heartbeat_at_ms DESC LIMIT %s
"""

LATEST_MEMORY_BLOCK = """
SELECT run_id, node_id, iteration FROM memory_blocks
WHERE text IS NOT NULL ORDER BY block_id DESC LIMIT 1
"""
