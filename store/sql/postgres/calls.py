"""PostgreSQL twins of :mod:`store.runs.calls_sql` (model calls and usage rollups)."""

from __future__ import annotations

INSERT_CALL = """
INSERT INTO calls (run_id, node_id, iteration, attempt, agent, model, simulated, input_tokens,
                   cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
                   context_tokens, bucket, started_at_ms, finished_at_ms, cost_usd, kind,
                   detail_json)
VALUES (%(run_id)s, %(node_id)s, %(iteration)s, %(attempt)s, %(agent)s, %(model)s,
        %(simulated)s, %(input_tokens)s, %(cache_read_tokens)s, %(cache_write_tokens)s,
        %(output_tokens)s, %(reasoning_tokens)s, %(context_tokens)s, %(bucket)s,
        %(started_at_ms)s, %(finished_at_ms)s, %(cost_usd)s, %(kind)s, %(detail_json)s)
"""

UPSERT_ROLLUP = """
INSERT INTO usage_rollups (run_id, bucket, calls, input_tokens, cache_read_tokens,
                           cache_write_tokens, output_tokens, reasoning_tokens, cost_usd,
                           unpriced_calls)
VALUES (%(rollup_run_id)s, %(bucket)s, %(counted)s, %(input_tokens)s, %(cache_read_tokens)s,
        %(cache_write_tokens)s, %(output_tokens)s, %(reasoning_tokens)s,
        coalesce(%(cost_usd)s::float8, 0), %(unpriced)s)
ON CONFLICT (run_id, bucket) DO UPDATE SET
    calls = usage_rollups.calls + excluded.calls,
    cost_usd = usage_rollups.cost_usd + excluded.cost_usd,
    unpriced_calls = usage_rollups.unpriced_calls + excluded.unpriced_calls,
    input_tokens = usage_rollups.input_tokens + excluded.input_tokens,
    cache_read_tokens = usage_rollups.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = usage_rollups.cache_write_tokens + excluded.cache_write_tokens,
    output_tokens = usage_rollups.output_tokens + excluded.output_tokens,
    reasoning_tokens = usage_rollups.reasoning_tokens + excluded.reasoning_tokens
"""

SELECT_CALLS_NODE = """
SELECT * FROM calls WHERE run_id = %s AND node_id = %s ORDER BY call_id
"""

SELECT_CALLS_OF_ATTEMPTS = """
SELECT * FROM calls
WHERE run_id = %s AND node_id = %s AND iteration = %s AND attempt BETWEEN %s AND %s
ORDER BY attempt, call_id
"""

SELECT_CALLS_RUN = "SELECT * FROM calls WHERE run_id = %s ORDER BY call_id"

SELECT_ROLLUPS = "SELECT * FROM usage_rollups WHERE run_id = %s"

ADD_RUN_TOKENS = """
UPDATE runs SET input_tokens = input_tokens + %(input_tokens)s,
    cache_read_tokens = cache_read_tokens + %(cache_read_tokens)s,
    cache_write_tokens = cache_write_tokens + %(cache_write_tokens)s,
    output_tokens = output_tokens + %(output_tokens)s,
    reasoning_tokens = reasoning_tokens + %(reasoning_tokens)s,
    cost_usd = cost_usd + coalesce(%(cost_usd)s::float8, 0),
    unpriced_calls = unpriced_calls + %(unpriced)s,
    updated_at_ms = %(now)s
WHERE run_id = %(run_id)s
"""
