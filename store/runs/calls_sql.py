"""SQL text for model calls and usage rollups. Executed by :mod:`store.runs.call_usage`."""

from __future__ import annotations

from store.model.token_lanes import each_lane

_NEXT = ",\n    "

INSERT_CALL = """
INSERT INTO calls (run_id, node_id, iteration, attempt, agent, model, simulated, input_tokens,
                   cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
                   context_tokens, bucket, started_at_ms, finished_at_ms, cost_usd, kind,
                   detail_json, call_seq)
VALUES (:run_id, :node_id, :iteration, :attempt, :agent, :model, :simulated, :input_tokens,
        :cache_read_tokens, :cache_write_tokens, :output_tokens, :reasoning_tokens,
        :context_tokens, :bucket, :started_at_ms, :finished_at_ms, :cost_usd, :kind,
        :detail_json, :call_seq)
ON CONFLICT (run_id, node_id, iteration, attempt, call_seq) DO NOTHING
"""

_ROLLUP_VALUES = """:bucket, :counted, :input_tokens, :cache_read_tokens,
        :cache_write_tokens, :output_tokens, :reasoning_tokens,
        coalesce(CAST(:cost_usd AS DOUBLE PRECISION), 0), :unpriced"""

# One statement adds a call to both rollups: its run's (``run_id``) and the workspace's ('').
UPSERT_ROLLUPS = f"""
INSERT INTO usage_rollups (run_id, bucket, calls, input_tokens, cache_read_tokens,
                           cache_write_tokens, output_tokens, reasoning_tokens, cost_usd,
                           unpriced_calls)
VALUES (:run_id, {_ROLLUP_VALUES}),
       ('', {_ROLLUP_VALUES})
ON CONFLICT (run_id, bucket) DO UPDATE SET
    calls = usage_rollups.calls + excluded.calls,
    cost_usd = usage_rollups.cost_usd + excluded.cost_usd,
    unpriced_calls = usage_rollups.unpriced_calls + excluded.unpriced_calls,
    {each_lane("{c} = usage_rollups.{c} + excluded.{c}", _NEXT)}
"""

# Usage per run, hour, agent and model (what ``tether usage`` and run search by agent or model
# read): the hour is the start of the UTC hour the call started in; a call naming no model is
# kept under ''.
UPSERT_USAGE_HOUR = f"""
INSERT INTO usage_hours (run_id, hour_ms, agent, model, calls, input_tokens, cache_read_tokens,
                         cache_write_tokens, output_tokens, reasoning_tokens, cost_usd,
                         unpriced_calls)
VALUES (:run_id, :hour_ms, :agent, :model, :counted, :input_tokens, :cache_read_tokens,
        :cache_write_tokens, :output_tokens, :reasoning_tokens,
        coalesce(CAST(:cost_usd AS DOUBLE PRECISION), 0), :unpriced)
ON CONFLICT (run_id, hour_ms, agent, model) DO UPDATE SET
    calls = usage_hours.calls + excluded.calls,
    cost_usd = usage_hours.cost_usd + excluded.cost_usd,
    unpriced_calls = usage_hours.unpriced_calls + excluded.unpriced_calls,
    {each_lane("{c} = usage_hours.{c} + excluded.{c}", _NEXT)}
"""

HOUR_MS = 3_600_000

SELECT_CALLS_NODE = """
SELECT * FROM calls WHERE run_id = ? AND node_id = ? ORDER BY call_id
"""

# The calls of a range of attempts of one node iteration (through calls_node_idx).
SELECT_CALLS_OF_ATTEMPTS = """
SELECT * FROM calls
WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt BETWEEN ? AND ?
ORDER BY attempt, call_id
"""

SELECT_CALLS_RUN = "SELECT * FROM calls WHERE run_id = ? ORDER BY call_id"

SELECT_ROLLUPS = "SELECT * FROM usage_rollups WHERE run_id = ?"

ADD_RUN_TOKENS = f"""
UPDATE runs SET {each_lane("{c} = {c} + :{c}", _NEXT)},
    cost_usd = cost_usd + coalesce(CAST(:cost_usd AS DOUBLE PRECISION), 0),
    unpriced_calls = unpriced_calls + :unpriced,
    updated_at_ms = :now
WHERE run_id = :run_id
"""
