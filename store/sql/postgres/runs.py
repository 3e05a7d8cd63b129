"""PostgreSQL twins of :mod:`store.runs.runs_sql` (runs, nodes, attempts, handoffs)."""

from __future__ import annotations

from store.db.paging import counted

# -- runs -----------------------------------------------------------------------------------

INSERT_RUN = """
INSERT INTO runs (run_id, workflow, workflow_path, status, input_json, parent_run_id, generation,
                  owner_id, created_at_ms, started_at_ms, heartbeat_at_ms, updated_at_ms,
                  nodes_total)
VALUES (%(run_id)s, %(workflow)s, %(workflow_path)s, %(status)s, %(input_json)s,
        %(parent_run_id)s, %(generation)s, %(owner_id)s, %(now)s, %(started_at_ms)s,
        %(heartbeat_at_ms)s, %(now)s, %(nodes_total)s)
"""

SELECT_RUN = "SELECT * FROM runs WHERE run_id = %s"

SELECT_RUN_STATUS = "SELECT status FROM runs WHERE run_id = %s"

SELECT_RUN_REQUESTS = """
SELECT cancel_requested_at_ms, clear_requested_at_ms, clear_reason FROM runs WHERE run_id = %s
"""

UPDATE_RUN_STATUS = """
UPDATE runs SET status = %(status)s,
    error = CASE WHEN %(set_error)s THEN %(error)s::text ELSE error END,
    output_json = CASE WHEN %(set_output)s THEN %(output_json)s::text ELSE output_json END,
    finished_at_ms = CASE WHEN %(status)s IN ('running', 'pending') THEN NULL
                          ELSE %(now)s::bigint END,
    updated_at_ms = %(now)s
WHERE run_id = %(run_id)s
"""

CLAIM_RUN = """
UPDATE runs SET status = 'running', owner_id = %(owner_id)s, heartbeat_at_ms = %(now)s,
    started_at_ms = coalesce(started_at_ms, %(now)s), finished_at_ms = NULL, error = NULL,
    cancel_requested_at_ms = NULL, updated_at_ms = %(now)s,
    queued_at_ms = NULL, lease_expires_at_ms = NULL, lease_token = lease_token + 1
WHERE run_id = %(run_id)s
    AND (%(check_owner)s = 0 OR owner_id IS NOT DISTINCT FROM %(expected_owner)s)
"""

RELEASE_RUNS = """
UPDATE runs SET owner_id = NULL, updated_at_ms = %(now)s
WHERE owner_id = %(owner_id)s AND status IN ('running', 'pending')
"""

UPDATE_HEARTBEAT = "UPDATE runs SET heartbeat_at_ms = %(now)s WHERE run_id = %(run_id)s"

UPDATE_HEARTBEAT_FENCED = """
UPDATE runs SET heartbeat_at_ms = %(now)s
WHERE run_id = %(run_id)s AND owner_id IS NOT DISTINCT FROM %(owner_id)s::text
"""

REQUEST_CANCEL = """
UPDATE runs SET cancel_requested_at_ms = coalesce(cancel_requested_at_ms, %(now)s),
    updated_at_ms = %(now)s
WHERE run_id = %(run_id)s
"""

REQUEST_CLEAR = """
UPDATE runs SET clear_requested_at_ms = coalesce(clear_requested_at_ms, %(now)s),
    clear_reason = %(reason)s, updated_at_ms = %(now)s
WHERE run_id = %(run_id)s
"""

UPDATE_PROGRESS = """
UPDATE runs SET nodes_done = coalesce(%(nodes_done)s::bigint, nodes_done),
    nodes_total = coalesce(%(nodes_total)s::bigint, nodes_total), updated_at_ms = %(now)s
WHERE run_id = %(run_id)s
"""

LIST_RUNS = "SELECT * FROM runs ORDER BY created_at_ms DESC, run_id DESC LIMIT %s"

LIST_RUNS_BY_STATUS = """
SELECT * FROM runs WHERE status = %s ORDER BY created_at_ms DESC, run_id DESC LIMIT %s
"""

LIST_STALE_RUNS = """
SELECT * FROM runs
WHERE status = 'running' AND (heartbeat_at_ms IS NULL OR heartbeat_at_ms < %s)
ORDER BY created_at_ms DESC, run_id DESC LIMIT %s
"""

COUNT_RUNS = counted(LIST_RUNS)
COUNT_RUNS_BY_STATUS = counted(LIST_RUNS_BY_STATUS)
COUNT_STALE_RUNS = counted(LIST_STALE_RUNS)

LIST_CHILD_RUNS = "SELECT * FROM runs WHERE parent_run_id = %s ORDER BY created_at_ms"

DELETE_RUN_ROWS = (
    "DELETE FROM events WHERE run_id = %s",
    "DELETE FROM calls WHERE run_id = %s",
    "DELETE FROM attempts WHERE run_id = %s",
    "DELETE FROM nodes WHERE run_id = %s",
    "DELETE FROM memory_blocks WHERE run_id = %s",
    "DELETE FROM usage_rollups WHERE run_id = %s",
    "DELETE FROM task_cache WHERE scope = 'run' AND run_id = %s",
    "DELETE FROM handoffs WHERE from_run_id = %s",
    "DELETE FROM runs WHERE run_id = %s",
)

SUBTRACT_WORKSPACE_ROLLUP = """
UPDATE usage_rollups SET
    calls = usage_rollups.calls - r.calls,
    input_tokens = usage_rollups.input_tokens - r.input_tokens,
    cache_read_tokens = usage_rollups.cache_read_tokens - r.cache_read_tokens,
    cache_write_tokens = usage_rollups.cache_write_tokens - r.cache_write_tokens,
    output_tokens = usage_rollups.output_tokens - r.output_tokens,
    reasoning_tokens = usage_rollups.reasoning_tokens - r.reasoning_tokens,
    cost_usd = usage_rollups.cost_usd - r.cost_usd,
    unpriced_calls = usage_rollups.unpriced_calls - r.unpriced_calls
FROM (SELECT * FROM usage_rollups WHERE run_id = %(run_id)s) AS r
WHERE usage_rollups.run_id = '' AND usage_rollups.bucket = r.bucket
"""

# -- nodes ----------------------------------------------------------------------------------

UPSERT_NODE = """
INSERT INTO nodes (run_id, node_id, iteration, state, attempts, cached, depends_on_json,
                   output_json, error, started_at_ms, finished_at_ms, updated_at_ms)
VALUES (%(run_id)s, %(node_id)s, %(iteration)s, %(state)s, coalesce(%(attempts)s::bigint, 0),
        coalesce(%(cached)s::integer, 0), %(depends_on_json)s, %(output_json)s, %(error)s,
        CASE WHEN %(state)s = 'running' THEN %(now)s::bigint END,
        CASE WHEN %(state)s IN ('finished', 'failed', 'cancelled', 'skipped')
             THEN %(now)s::bigint END,
        %(now)s)
ON CONFLICT (run_id, node_id, iteration) DO UPDATE SET
    state = excluded.state,
    attempts = coalesce(%(attempts)s::bigint, nodes.attempts),
    cached = coalesce(%(cached)s::integer, nodes.cached),
    depends_on_json = coalesce(excluded.depends_on_json, nodes.depends_on_json),
    output_json = CASE WHEN %(set_output)s THEN excluded.output_json ELSE nodes.output_json END,
    error = CASE WHEN %(set_error)s THEN excluded.error ELSE nodes.error END,
    started_at_ms = coalesce(nodes.started_at_ms, excluded.started_at_ms),
    finished_at_ms = excluded.finished_at_ms,
    updated_at_ms = excluded.updated_at_ms
"""

UPDATE_NODE = """
UPDATE nodes SET
    state = %(state)s,
    attempts = coalesce(%(attempts)s::bigint, attempts),
    cached = coalesce(%(cached)s::integer, cached),
    depends_on_json = coalesce(%(depends_on_json)s::text, depends_on_json),
    output_json = CASE WHEN %(set_output)s THEN %(output_json)s::text ELSE output_json END,
    error = CASE WHEN %(set_error)s THEN %(error)s::text ELSE error END,
    started_at_ms = coalesce(started_at_ms,
                             CASE WHEN %(state)s = 'running' THEN %(now)s::bigint END),
    finished_at_ms = CASE WHEN %(state)s IN ('finished', 'failed', 'cancelled', 'skipped')
                          THEN %(now)s::bigint END,
    updated_at_ms = %(now)s
WHERE run_id = %(run_id)s AND node_id = %(node_id)s AND iteration = %(iteration)s
"""

SELECT_NODES = """
SELECT * FROM nodes WHERE run_id = %s
ORDER BY started_at_ms IS NULL, started_at_ms, node_id, iteration
"""

SELECT_NODE_ITERATIONS = (
    "SELECT * FROM nodes WHERE run_id = %s AND node_id = %s ORDER BY iteration"
)

SELECT_NODE = "SELECT * FROM nodes WHERE run_id = %s AND node_id = %s AND iteration = %s"

SELECT_FAN_OUT_NODES = """
SELECT * FROM nodes WHERE run_id = %s AND node_id > %s AND node_id < %s
ORDER BY node_id, iteration LIMIT %s
"""

# -- attempts -------------------------------------------------------------------------------

INSERT_ATTEMPT = """
INSERT INTO attempts (run_id, node_id, iteration, attempt, state, agent, model, prompt,
                      cached, owner_id, lease_token, started_at_ms)
VALUES (%(run_id)s, %(node_id)s, %(iteration)s, %(attempt)s, 'running', %(agent)s, %(model)s,
        %(prompt)s, %(cached)s, %(owner_id)s, %(lease_token)s, %(now)s)
ON CONFLICT (run_id, node_id, iteration, attempt) DO UPDATE SET
    state = 'running', agent = excluded.agent, model = excluded.model, prompt = excluded.prompt,
    owner_id = excluded.owner_id, lease_token = excluded.lease_token,
    started_at_ms = excluded.started_at_ms, finished_at_ms = NULL
"""

FINISH_ATTEMPT = """
UPDATE attempts SET state = %(state)s, response_text = %(response_text)s, error = %(error)s,
    model = coalesce(%(model)s::text, model), cached = %(cached)s, finished_at_ms = %(now)s,
    input_tokens = %(input_tokens)s, cache_read_tokens = %(cache_read_tokens)s,
    cache_write_tokens = %(cache_write_tokens)s, output_tokens = %(output_tokens)s,
    reasoning_tokens = %(reasoning_tokens)s,
    details_json = coalesce(%(details_json)s::text, details_json),
    cost_usd = (SELECT sum(c.cost_usd) FROM calls AS c
                WHERE c.run_id = %(run_id)s AND c.node_id = %(node_id)s
                  AND c.iteration = %(iteration)s AND c.attempt = %(attempt)s),
    unpriced_calls = (SELECT count(*) FROM calls AS c
                      WHERE c.run_id = %(run_id)s AND c.node_id = %(node_id)s
                        AND c.iteration = %(iteration)s AND c.attempt = %(attempt)s
                        AND c.cost_usd IS NULL AND c.kind <> 'retry')
WHERE run_id = %(run_id)s AND node_id = %(node_id)s AND iteration = %(iteration)s
  AND attempt = %(attempt)s
"""

SELECT_RUNNING_ATTEMPTS = """
SELECT run_id, node_id, iteration, attempt FROM attempts
WHERE run_id = %s AND state = 'running'
"""

ABANDON_ATTEMPTS = """
UPDATE attempts SET state = 'abandoned', finished_at_ms = %(now)s,
    error = coalesce(error, 'The process running this attempt stopped before it finished.')
WHERE run_id = %(run_id)s AND state = 'running'
"""

RESET_RUNNING_NODES = """
UPDATE nodes SET state = 'pending', updated_at_ms = %(now)s
WHERE run_id = %(run_id)s AND state IN ('running', 'retrying')
"""

SELECT_ATTEMPTS = """
SELECT * FROM attempts WHERE run_id = %s AND node_id = %s ORDER BY iteration, attempt
"""

SELECT_ATTEMPTS_ITERATION = """
SELECT * FROM attempts WHERE run_id = %s AND node_id = %s AND iteration = %s ORDER BY attempt
"""

SELECT_ATTEMPTS_PAGE = """
SELECT * FROM attempts WHERE run_id = %s AND node_id = %s AND iteration = %s
ORDER BY attempt DESC LIMIT %s OFFSET %s
"""

COUNT_ATTEMPTS_BY_STATE = """
SELECT state, count(*) FROM attempts WHERE run_id = %s AND node_id = %s AND iteration = %s
GROUP BY state ORDER BY state
"""

# -- handoffs -------------------------------------------------------------------------------

# RETURNING: the connection reads the new id as the cursor's lastrowid.
INSERT_HANDOFF = """
INSERT INTO handoffs (from_run_id, to_run_id, trigger, reason, generation, tokens_at_handoff,
                      carried_state_json, carried_bytes, created_at_ms)
VALUES (%(from_run_id)s, %(to_run_id)s, %(trigger)s, %(reason)s, %(generation)s,
        %(tokens_at_handoff)s, %(carried_state_json)s, %(carried_bytes)s, %(now)s)
RETURNING handoff_id
"""

SELECT_HANDOFFS_FROM = "SELECT * FROM handoffs WHERE from_run_id = %s ORDER BY handoff_id"

SELECT_HANDOFFS_TO = "SELECT * FROM handoffs WHERE to_run_id = %s ORDER BY handoff_id"

SELECT_HANDOFFS_ALL = "SELECT * FROM handoffs ORDER BY handoff_id DESC LIMIT %s"
