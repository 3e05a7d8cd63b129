"""SQL text for the dashboard's read side (executed by :mod:`store.read.dashboard_reader`).

Every query here is bounded: it reads through an index and a ``LIMIT``, or a small rollup table,
so its cost does not grow with the history kept in the workspace.
"""

from __future__ import annotations

from store.model.token_lanes import each_lane

# Sums of the five lanes over calls (PostgreSQL sums BIGINT as NUMERIC: cast back to ints).
_LANE_SUMS = each_lane("CAST(coalesce(sum({c}), 0) AS BIGINT) AS {c}", ",\n       ")

DATA_VERSION = "PRAGMA data_version"
JOURNAL_MODE = "PRAGMA journal_mode"

MAX_EVENT_SEQ = "SELECT coalesce(max(seq), 0) FROM events"

_EVENT_COLUMNS = "seq, at_ms, type, run_id, node_id, iteration, attempt, payload_json"

# Incremental tail: everything after the last sequence number the dashboard has seen.
EVENTS_SINCE = f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?"

# The most recent K events (reads the primary key backwards).
EVENTS_RECENT = f"SELECT {_EVENT_COLUMNS} FROM events ORDER BY seq DESC LIMIT ?"

# Every column a RunRecord reads: the dashboard, `tether runs` and its --where search, the
# timeline and fork chain all list runs with these, so a listing never drops a field.
RUN_COLUMNS = (
    "run_id, workflow, status, error, parent_run_id, generation, created_at_ms, started_at_ms, "
    "finished_at_ms, heartbeat_at_ms, updated_at_ms, nodes_total, nodes_done, input_tokens, "
    "cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, input_json, "
    "clear_reason, cost_usd, unpriced_calls, queued_at_ms, budget_json, forked_from, "
    "fork_node"
)

# Newest N runs through runs_created_idx.
RUNS_RECENT = f"SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at_ms DESC LIMIT ?"

RUN_BY_ID = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"

# Running runs (runs_status_heartbeat_idx); used for the active count and the stale check.
# INDEXED BY: with statistics saying almost every run is finished, the planner would rather scan.
RUNS_ACTIVE = (
    f"SELECT {RUN_COLUMNS} FROM runs INDEXED BY runs_status_heartbeat_idx "
    "WHERE status = 'running' LIMIT ?"
)


# PostgreSQL's event tail: events whose numbers it saw skipped (their transaction had not
# committed yet), and the runs of a list of ids (one array parameter).
EVENTS_BY_SEQ = f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq = ANY(?) ORDER BY seq"
RUNS_BY_ID_LIST = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ANY(?)"


def runs_by_ids(count: int) -> str:
    """Runs with the given ids (``count`` placeholders), by primary key."""
    marks = ", ".join("?" for _ in range(count))
    return f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id IN ({marks})"


def calls_of_runs(count: int) -> str:
    """Model calls per run for ``count`` run ids, from the per-bucket rollups (what the
    histogram counts), a few primary-key rows per run however many calls it made."""
    marks = ", ".join("?" for _ in range(count))
    return (
        f"SELECT run_id, sum(calls) FROM usage_rollups WHERE run_id IN ({marks}) GROUP BY run_id"
    )


NODES_OF_RUN = """
SELECT run_id, node_id, iteration, state, attempts, cached, depends_on_json, output_json, error,
       started_at_ms, finished_at_ms, updated_at_ms, carried_from
FROM nodes WHERE run_id = ?
ORDER BY started_at_ms IS NULL, started_at_ms, node_id, iteration
LIMIT ?
"""

NODE_OF_RUN = """
SELECT run_id, node_id, iteration, state, attempts, cached, depends_on_json, output_json, error,
       started_at_ms, finished_at_ms, updated_at_ms
FROM nodes WHERE run_id = ? AND node_id = ? AND iteration = ?
"""

# Per-node token usage of one run, from calls through calls_node_idx. (PostgreSQL sums BIGINT
# as NUMERIC: cast back so rows hold ints on both.)
NODE_USAGE_OF_RUN = f"""
SELECT node_id, iteration, count(*) FILTER (WHERE kind = 'model') AS calls,
       sum(cost_usd) AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL AND kind != 'retry') AS unpriced_calls,
       {_LANE_SUMS}
FROM calls WHERE run_id = ?
GROUP BY node_id, iteration
"""

# The newest page of a node iteration's attempts (walked backwards on the primary key, so a
# node with 10 000 attempts costs what one with 10 does).
ATTEMPTS_OF_NODE = """
SELECT run_id, node_id, iteration, attempt, state, agent, model, prompt, response_text, error,
       cached, started_at_ms, finished_at_ms, input_tokens, cache_read_tokens,
       cache_write_tokens, output_tokens, reasoning_tokens, cost_usd, unpriced_calls,
       details_json, owner_id, executor, host, executor_node
FROM attempts WHERE run_id = ? AND node_id = ? AND iteration = ?
ORDER BY attempt DESC LIMIT ?
"""

_CALL_COLUMNS = (
    "call_id, run_id, node_id, iteration, attempt, agent, model, simulated, input_tokens, "
    "cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, context_tokens, "
    "bucket, started_at_ms, finished_at_ms, cost_usd, kind, detail_json"
)

# The newest calls of a node iteration (calls_node_idx, walked backwards).
CALLS_OF_NODE = f"""
SELECT {_CALL_COLUMNS} FROM calls
WHERE run_id = ? AND node_id = ? AND iteration = ?
ORDER BY attempt DESC, call_id DESC LIMIT ?
"""

# Largest calls: workspace through calls_context_idx; run and node through calls_node_idx.
# Only model calls: a reconciliation row (session or turn totals) is no call, and its size is
# no context window.
TOP_CALLS_WORKSPACE = (
    f"SELECT {_CALL_COLUMNS} FROM calls WHERE kind = 'model' ORDER BY context_tokens DESC LIMIT ?"
)
TOP_CALLS_RUN = f"""
SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? AND kind = 'model'
ORDER BY context_tokens DESC LIMIT ?
"""
TOP_CALLS_NODE = f"""
SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? AND node_id = ? AND kind = 'model'
ORDER BY context_tokens DESC LIMIT ?
"""

# The newest calls of one run (calls_node_idx by run_id, then the newest call ids): the Runs
# view's tokens-per-minute and context-per-call chart.
CALLS_OF_RUN_RECENT = (
    f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? ORDER BY call_id DESC LIMIT ?"
)

# Histogram rows: usage_rollups for the workspace (run_id '') or a run; calls for one node.
USAGE_ROLLUP = """
SELECT bucket, calls, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
       reasoning_tokens, cost_usd, unpriced_calls
FROM usage_rollups WHERE run_id = ?
"""

USAGE_OF_NODE = f"""
SELECT bucket, count(*) FILTER (WHERE kind = 'model') AS calls,
       sum(cost_usd) AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL AND kind != 'retry') AS unpriced_calls,
       {_LANE_SUMS}
FROM calls WHERE run_id = ? AND node_id = ?
GROUP BY bucket
"""

MEMORY_BLOCK_OF_NODE = """
SELECT block_id, run_id, node_id, iteration, attempt, query, banks_json, text, items_json,
       bytes_used, budget_bytes, truncated, warning, degraded, duration_ms, created_at_ms
FROM memory_blocks WHERE run_id = ? AND node_id = ? AND iteration = ?
"""

_HANDOFF_COLUMNS = (
    "handoff_id, from_run_id, to_run_id, trigger, reason, generation, tokens_at_handoff, "
    "carried_state_json, carried_bytes, created_at_ms"
)

HANDOFFS_RECENT = f"SELECT {_HANDOFF_COLUMNS} FROM handoffs ORDER BY handoff_id DESC LIMIT ?"
HANDOFF_INTO_RUN = f"SELECT {_HANDOFF_COLUMNS} FROM handoffs WHERE to_run_id = ? LIMIT 1"
HANDOFF_FROM_RUN = (
    f"SELECT {_HANDOFF_COLUMNS} FROM handoffs WHERE from_run_id = ? "
    "ORDER BY handoff_id DESC LIMIT 1"
)

# Node iterations of a run with an attempt whose details hold warnings (a memory tool call the
# agent CLI cancelled, a server that sent no usage): the attempts primary key by run_id.
WARNED_NODES_OF_RUN = """
SELECT DISTINCT node_id, iteration FROM attempts WHERE run_id = ? AND details_json LIKE ?
"""
WARNINGS_PATTERN = '%"warnings"%'

# Memory block summary per node of one run (the UNIQUE (run_id, node_id, iteration) index).
MEMORY_BLOCKS_OF_RUN = """
SELECT node_id, iteration, bytes_used, budget_bytes, truncated, warning, degraded
FROM memory_blocks WHERE run_id = ?
"""

# Workers (tether worker) that have not said they stopped, most recent heartbeat first.
WORKERS_RECENT = """
SELECT worker_id, host, pid, started_at_ms, heartbeat_at_ms, runs_held FROM workers
WHERE stopped_at_ms IS NULL ORDER BY heartbeat_at_ms DESC LIMIT ?
"""

# The node whose memory block was built most recently (for screenshots and the palette).
LATEST_MEMORY_BLOCK = """
SELECT run_id, node_id, iteration FROM memory_blocks
WHERE text IS NOT NULL ORDER BY block_id DESC LIMIT 1
"""
