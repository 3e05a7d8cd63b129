"""SQL text for model calls and usage rollups. Executed by :mod:`store.runs.call_usage`."""

from __future__ import annotations

from store.model.token_lanes import each_lane
from store.runs import spend_sql

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

_INSERT_ROLLUP = """
INSERT INTO usage_rollups (run_id, bucket, calls, input_tokens, cache_read_tokens,
                           cache_write_tokens, output_tokens, reasoning_tokens, cost_usd,
                           unpriced_calls)"""

_ROLLUP_CONFLICT = f"""
ON CONFLICT (run_id, bucket) DO UPDATE SET
    calls = usage_rollups.calls + excluded.calls,
    cost_usd = usage_rollups.cost_usd + excluded.cost_usd,
    unpriced_calls = usage_rollups.unpriced_calls + excluded.unpriced_calls,
    {each_lane("{c} = usage_rollups.{c} + excluded.{c}", _NEXT)}
"""

# One statement adds a call to both rollups: its run's (``run_id``) and the workspace's ('').
UPSERT_ROLLUPS = f"""{_INSERT_ROLLUP}
VALUES (:run_id, {_ROLLUP_VALUES}),
       ('', {_ROLLUP_VALUES}){_ROLLUP_CONFLICT}"""

# Usage per run, hour, agent and model (what ``tether usage`` and run search by agent or model
# read): the hour is the start of the UTC hour the call started in; a call naming no model is
# kept under ''.
_INSERT_USAGE_HOUR = """
INSERT INTO usage_hours (run_id, hour_ms, agent, model, calls, input_tokens, cache_read_tokens,
                         cache_write_tokens, output_tokens, reasoning_tokens, cost_usd,
                         unpriced_calls)"""

_USAGE_HOUR_VALUES = """:run_id, :hour_ms, :agent, :hour_model, :counted, :input_tokens,
        :cache_read_tokens, :cache_write_tokens, :output_tokens, :reasoning_tokens,
        coalesce(CAST(:cost_usd AS DOUBLE PRECISION), 0), :unpriced"""

_USAGE_HOUR_CONFLICT = f"""
ON CONFLICT (run_id, hour_ms, agent, model) DO UPDATE SET
    calls = usage_hours.calls + excluded.calls,
    cost_usd = usage_hours.cost_usd + excluded.cost_usd,
    unpriced_calls = usage_hours.unpriced_calls + excluded.unpriced_calls,
    {each_lane("{c} = usage_hours.{c} + excluded.{c}", _NEXT)}
"""

UPSERT_USAGE_HOUR = f"""{_INSERT_USAGE_HOUR}
VALUES ({_USAGE_HOUR_VALUES}){_USAGE_HOUR_CONFLICT}"""

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

RUN_TOKEN_ADDS = f"""{each_lane("{c} = {c} + :{c}", _NEXT)},
    cost_usd = cost_usd + coalesce(CAST(:cost_usd AS DOUBLE PRECISION), 0),
    unpriced_calls = unpriced_calls + :unpriced"""
"""What a call adds to its run's row (its tokens, cost, unpriced count)."""

ADD_RUN_TOKENS = f"""
UPDATE runs SET {RUN_TOKEN_ADDS},
    updated_at_ms = :now
WHERE run_id = :run_id
"""


# A call in one statement, for a connection where reading a result waits for the server
# (PostgreSQL's pipelined group commit): the call row, and only when it is new, both rollups,
# its usage hour, its run's tokens, its UTC day's spend and its event, with nothing read back.
# Written in SQLite's spelling like every statement, but only PostgreSQL runs it (SQLite has
# no writes inside WITH; it runs the same statements one by one, store/runs/call_usage.py).
RECORD_CALL = f"""
WITH new_call AS ({INSERT_CALL.rstrip()}
RETURNING 1 AS one
), rollups AS ({_INSERT_ROLLUP}
SELECT scope.run_id, {_ROLLUP_VALUES}
FROM new_call, (VALUES (:run_id), ('')) AS scope (run_id){_ROLLUP_CONFLICT}
), hours AS ({_INSERT_USAGE_HOUR}
SELECT {_USAGE_HOUR_VALUES} FROM new_call{_USAGE_HOUR_CONFLICT}
), run_tokens AS ({ADD_RUN_TOKENS.rstrip()} AND EXISTS (SELECT 1 FROM new_call)
), spend AS ({spend_sql.INSERT_SPEND_DAY}
SELECT {spend_sql.SPEND_DAY_VALUES} FROM new_call{spend_sql.SPEND_DAY_CONFLICT}
)
INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json)
SELECT :now, 'call', :run_id, :node_id, :iteration, :attempt, :payload_json FROM new_call
"""
