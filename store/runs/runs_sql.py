"""SQL text for runs, nodes, attempts and handoffs. Executed by :mod:`store.runs.run_store`; kept
here so all run SQL sits beside the schema (events, calls and memory blocks have their own modules).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from store.db.paging import counted
from store.model.token_lanes import each_lane
from store.runs.calls_sql import RUN_TOKEN_ADDS
from store.runs.events_sql import INSERT_EVENT_HEAD, named_event_rows

_SUBTRACT_LANES = each_lane("{c} = usage_rollups.{c} - r.{c}", ",\n    ")

# -- runs -----------------------------------------------------------------------------------

INSERT_RUN = """
INSERT INTO runs (run_id, workflow, workflow_path, status, input_json, parent_run_id, generation,
                  owner_id, created_at_ms, started_at_ms, heartbeat_at_ms, updated_at_ms,
                  nodes_total, forked_from, fork_node, fork_json)
VALUES (:run_id, :workflow, :workflow_path, :status, :input_json, :parent_run_id, :generation,
        :owner_id, :now, :started_at_ms, :heartbeat_at_ms, :now, :nodes_total, :forked_from,
        :fork_node, :fork_json)
"""

SELECT_RUN = "SELECT * FROM runs WHERE run_id = ?"


SELECT_RUN_REQUESTS = """
SELECT cancel_requested_at_ms, clear_requested_at_ms, clear_reason FROM runs WHERE run_id = ?
"""

# Finished runs keep their finish time; a run that goes back to running (resume) clears it.
UPDATE_RUN_STATUS = """
UPDATE runs SET status = :status,
    error = CASE WHEN :set_error THEN CAST(:error AS TEXT) ELSE error END,
    output_json = CASE WHEN :set_output THEN CAST(:output_json AS TEXT) ELSE output_json END,
    finished_at_ms = CASE WHEN :status IN ('running', 'pending') THEN NULL
                          ELSE CAST(:now AS BIGINT) END,
    updated_at_ms = :now
WHERE run_id = :run_id
"""

# A run resumed in-process leaves the queue, and its fencing token moves on: a worker that
# still held it can write nothing more.
CLAIM_RUN = """
UPDATE runs SET status = 'running', owner_id = :owner_id, heartbeat_at_ms = :now,
    started_at_ms = coalesce(started_at_ms, :now), finished_at_ms = NULL, error = NULL,
    cancel_requested_at_ms = NULL, updated_at_ms = :now,
    queued_at_ms = NULL, lease_expires_at_ms = NULL, lease_token = lease_token + 1
WHERE run_id = :run_id AND (:check_owner = 0 OR owner_id IS :expected_owner)
"""

RELEASE_RUNS = """
UPDATE runs SET owner_id = NULL, updated_at_ms = :now
WHERE owner_id = :owner_id AND status IN ('running', 'pending')
"""

UPDATE_HEARTBEAT = "UPDATE runs SET heartbeat_at_ms = :now WHERE run_id = :run_id"

UPDATE_HEARTBEAT_FENCED = """
UPDATE runs SET heartbeat_at_ms = :now WHERE run_id = :run_id AND owner_id IS :owner_id
"""

REQUEST_CANCEL = """
UPDATE runs SET cancel_requested_at_ms = coalesce(cancel_requested_at_ms, :now),
    updated_at_ms = :now
WHERE run_id = :run_id
"""

# The first request wins, its reason with its time: a second `tether clear` (its default
# reason) must not replace the reason a person gave while the engine has not handed off yet.
REQUEST_CLEAR = """
UPDATE runs SET clear_requested_at_ms = coalesce(clear_requested_at_ms, :now),
    clear_reason = CASE WHEN clear_requested_at_ms IS NULL THEN :reason ELSE clear_reason END,
    updated_at_ms = :now
WHERE run_id = :run_id
"""

UPDATE_PROGRESS = """
UPDATE runs SET nodes_done = coalesce(CAST(:nodes_done AS BIGINT), nodes_done),
    nodes_total = coalesce(CAST(:nodes_total AS BIGINT), nodes_total), updated_at_ms = :now
WHERE run_id = :run_id
"""

# A node's end moves the run's progress and reads its pending requests in one statement.
UPDATE_PROGRESS_READ_REQUESTS = UPDATE_PROGRESS + (
    "RETURNING cancel_requested_at_ms, clear_requested_at_ms, clear_reason\n"
)

# What calls and node ends change in their run's row, in one statement for a run of them in
# one SQLite group commit (store.runs.event_log.add_summed): the calls' tokens added (what
# their ADD_RUN_TOKENS would add), the progress and the time the last one gave, the run's
# requests read. A call alone gives no progress (None keeps it).
UPDATE_RUN_ROW = UPDATE_PROGRESS_READ_REQUESTS.replace(
    "updated_at_ms = :now", f"\n    {RUN_TOKEN_ADDS},\n    updated_at_ms = :now", 1)

RUN_ROW_LATEST = ("nodes_done", "nodes_total", "now")
"""The parameters of ``UPDATE_RUN_ROW`` a later write's value replaces (the others add up)."""

LIST_RUNS = "SELECT * FROM runs ORDER BY created_at_ms DESC, run_id DESC LIMIT ?"

LIST_RUNS_BY_STATUS = """
SELECT * FROM runs WHERE status = ? ORDER BY created_at_ms DESC, run_id DESC LIMIT ?
"""

LIST_STALE_RUNS = """
SELECT * FROM runs WHERE status = 'running' AND (heartbeat_at_ms IS NULL OR heartbeat_at_ms < ?)
ORDER BY created_at_ms DESC, run_id DESC LIMIT ?
"""

# Oldest first from a creation time on, one page after (created_at_ms, run_id) of the last.
LIST_RUNS_SINCE = """
SELECT * FROM runs WHERE created_at_ms >= ?
    AND (created_at_ms > ? OR (created_at_ms = ? AND run_id > ?))
ORDER BY created_at_ms, run_id LIMIT ?
"""

# What a cut listing left out, counted on the listing's own query (its LIMIT caps the count).
COUNT_RUNS = counted(LIST_RUNS)
COUNT_RUNS_BY_STATUS = counted(LIST_RUNS_BY_STATUS)
COUNT_STALE_RUNS = counted(LIST_STALE_RUNS)


DELETE_RUN_ROWS = (
    "DELETE FROM events WHERE run_id = ?",
    "DELETE FROM calls WHERE run_id = ?",
    "DELETE FROM attempts WHERE run_id = ?",
    "DELETE FROM nodes WHERE run_id = ?",
    "DELETE FROM memory_blocks WHERE run_id = ?",
    "DELETE FROM usage_rollups WHERE run_id = ?",
    "DELETE FROM usage_hours WHERE run_id = ?",
    "DELETE FROM task_cache WHERE scope = 'run' AND run_id = ?",
    "DELETE FROM handoffs WHERE from_run_id = ?",
    "DELETE FROM steers WHERE run_id = ?",
    "DELETE FROM runs WHERE run_id = ?",
)

# The workspace rollup ('' row) loses what the deleted run contributed.
SUBTRACT_WORKSPACE_ROLLUP = f"""
UPDATE usage_rollups SET
    calls = usage_rollups.calls - r.calls,
    {_SUBTRACT_LANES},
    cost_usd = usage_rollups.cost_usd - r.cost_usd,
    unpriced_calls = usage_rollups.unpriced_calls - r.unpriced_calls
FROM (SELECT * FROM usage_rollups WHERE run_id = :run_id) AS r
WHERE usage_rollups.run_id = '' AND usage_rollups.bucket = r.bucket
"""

# -- nodes ----------------------------------------------------------------------------------

UPSERT_NODE = """
INSERT INTO nodes (run_id, node_id, iteration, state, attempts, cached, depends_on_json,
                   output_json, error, started_at_ms, finished_at_ms, updated_at_ms,
                   input_key, carried_from)
VALUES (:run_id, :node_id, :iteration, :state, coalesce(CAST(:attempts AS BIGINT), 0),
        coalesce(CAST(:cached AS INTEGER), 0), :depends_on_json, :output_json, :error,
        CASE WHEN :state = 'running' THEN CAST(:now AS BIGINT) END,
        CASE WHEN :state IN ('finished', 'failed', 'cancelled', 'skipped')
             THEN CAST(:now AS BIGINT) END,
        :now, :input_key, :carried_from)
ON CONFLICT (run_id, node_id, iteration) DO UPDATE SET
    state = excluded.state,
    input_key = coalesce(excluded.input_key, nodes.input_key),
    carried_from = coalesce(excluded.carried_from, nodes.carried_from),
    attempts = coalesce(CAST(:attempts AS BIGINT), nodes.attempts),
    cached = coalesce(CAST(:cached AS INTEGER), nodes.cached),
    depends_on_json = coalesce(excluded.depends_on_json, nodes.depends_on_json),
    output_json = CASE WHEN :set_output THEN excluded.output_json ELSE nodes.output_json END,
    error = CASE WHEN :set_error THEN excluded.error ELSE nodes.error END,
    started_at_ms = coalesce(nodes.started_at_ms, excluded.started_at_ms),
    finished_at_ms = excluded.finished_at_ms,
    updated_at_ms = excluded.updated_at_ms
"""

# The same change as UPSERT_NODE's update branch, for a node that exists (the engine's hot
# path: every node is inserted as pending before it runs); about half the cost of the upsert.
UPDATE_NODE = """
UPDATE nodes SET
    state = :state,
    attempts = coalesce(CAST(:attempts AS BIGINT), attempts),
    cached = coalesce(CAST(:cached AS INTEGER), cached),
    depends_on_json = coalesce(CAST(:depends_on_json AS TEXT), depends_on_json),
    output_json = CASE WHEN :set_output THEN CAST(:output_json AS TEXT) ELSE output_json END,
    error = CASE WHEN :set_error THEN CAST(:error AS TEXT) ELSE error END,
    started_at_ms = coalesce(started_at_ms,
                             CASE WHEN :state = 'running' THEN CAST(:now AS BIGINT) END),
    finished_at_ms = CASE WHEN :state IN ('finished', 'failed', 'cancelled', 'skipped')
                          THEN CAST(:now AS BIGINT) END,
    input_key = coalesce(CAST(:input_key AS TEXT), input_key),
    carried_from = coalesce(CAST(:carried_from AS TEXT), carried_from),
    updated_at_ms = :now
WHERE run_id = :run_id AND node_id = :node_id AND iteration = :iteration
"""

_NODE_ENDED = ("finished", "failed", "cancelled", "skipped")


def node_update_params(params: Mapping[str, Any]) -> tuple[bool, ...]:
    """What of ``params`` (a node's write, ``NodeLog._node_params``) :func:`node_update` sets."""
    return (
        params["attempts"] is not None, params["cached"] is not None,
        params["depends_on_json"] is not None, bool(params["set_output"]),
        bool(params["set_error"]), params["input_key"] is not None,
        params["carried_from"] is not None, params["state"] == "running",
        params["state"] in _NODE_ENDED,
    )


@functools.lru_cache(maxsize=64)
def node_update(sets: tuple[bool, ...]) -> str:
    """:data:`UPDATE_NODE` setting only what a write changes (``sets``, from
    :func:`node_update_params`): the same row afterwards, but a column kept as it was is not
    assigned at all, which costs SQLite about half (a node's start and end, twice a task)."""
    attempts, cached, depends, output, error, key, carried, running, ended = sets
    assigned = [
        "state = :state",
        *(["attempts = CAST(:attempts AS BIGINT)"] if attempts else []),
        *(["cached = CAST(:cached AS INTEGER)"] if cached else []),
        *(["depends_on_json = CAST(:depends_on_json AS TEXT)"] if depends else []),
        *(["output_json = CAST(:output_json AS TEXT)"] if output else []),
        *(["error = CAST(:error AS TEXT)"] if error else []),
        *(["started_at_ms = coalesce(started_at_ms, CAST(:now AS BIGINT))"] if running else []),
        "finished_at_ms = CAST(:now AS BIGINT)" if ended else "finished_at_ms = NULL",
        *(["input_key = CAST(:input_key AS TEXT)"] if key else []),
        *(["carried_from = CAST(:carried_from AS TEXT)"] if carried else []),
        "updated_at_ms = :now",
    ]
    return (f"UPDATE nodes SET {', '.join(assigned)}\n"
            "WHERE run_id = :run_id AND node_id = :node_id AND iteration = :iteration")


SELECT_NODES = """
SELECT * FROM nodes WHERE run_id = ?
ORDER BY started_at_ms IS NULL, started_at_ms, node_id, iteration
"""

SELECT_NODE_ITERATIONS = "SELECT * FROM nodes WHERE run_id = ? AND node_id = ? ORDER BY iteration"

SELECT_NODE = "SELECT * FROM nodes WHERE run_id = ? AND node_id = ? AND iteration = ?"

# The copies of a fan-out (node ids "<id>[<key>]"): a range of the primary key, so the cost is
# that of the page, whatever the size of the run.
SELECT_FAN_OUT_NODES = """
SELECT * FROM nodes WHERE run_id = ? AND node_id > ? AND node_id < ?
ORDER BY node_id, iteration LIMIT ?
"""

# -- attempts -------------------------------------------------------------------------------

INSERT_ATTEMPT = """
INSERT INTO attempts (run_id, node_id, iteration, attempt, state, agent, model, prompt,
                      cached, owner_id, lease_token, started_at_ms)
VALUES (:run_id, :node_id, :iteration, :attempt, 'running', :agent, :model, :prompt,
        :cached, :owner_id, :lease_token, :now)
ON CONFLICT (run_id, node_id, iteration, attempt) DO UPDATE SET
    state = 'running', agent = excluded.agent, model = excluded.model, prompt = excluded.prompt,
    owner_id = excluded.owner_id, lease_token = excluded.lease_token,
    started_at_ms = excluded.started_at_ms, finished_at_ms = NULL
"""

# How many steers wait for the node's next attempt, as a column of a statement a task runs
# anyway (an attempt's start, a retrying attempt's end): knowing costs no statement of its own.
NEXT_ATTEMPT_WAITING = """(SELECT count(*) FROM steers WHERE run_id = :run_id
    AND node_id = :node_id AND iteration = :iteration AND state = 'queued'
    AND deliver = 'next-attempt')"""
START_ATTEMPT = INSERT_ATTEMPT + "RETURNING " + NEXT_ATTEMPT_WAITING + "\n"

# An attempt's start in one statement, for a connection where each statement is a message of
# its own (PostgreSQL's pipelined group commit): the node's upsert, the attempt (its
# ``cached`` bound as ``:attempt_cached``, the node's being ``:cached``) and its two events
# (the node's state, ``attempt.started``), returning what START_ATTEMPT returns. Written in
# SQLite's spelling like every statement, but only PostgreSQL runs it (SQLite has no writes
# inside WITH; it runs the three statements one by one, store/runs/attempt_log.py). The
# attempt's reference to its node is checked at the end of the statement, after the upsert.
START_ATTEMPT_WITH_NODE = f"""
WITH node_row AS ({UPSERT_NODE.strip()}
), started AS ({INSERT_ATTEMPT.strip().replace(":cached", ":attempt_cached")}
RETURNING {NEXT_ATTEMPT_WAITING} AS waiting
){INSERT_EVENT_HEAD}{named_event_rows(2)}
RETURNING (SELECT waiting FROM started)
"""
RETRY_READ_REQUESTS = f"""
SELECT cancel_requested_at_ms, clear_requested_at_ms, clear_reason, {NEXT_ATTEMPT_WAITING}
FROM runs WHERE run_id = :run_id
"""

# Token totals are written exactly once, here, when the attempt ends.
FINISH_ATTEMPT = """
UPDATE attempts SET state = :state, response_text = :response_text, error = :error,
    model = coalesce(CAST(:model AS TEXT), model), cached = :cached, finished_at_ms = :now,
    input_tokens = :input_tokens, cache_read_tokens = :cache_read_tokens,
    cache_write_tokens = :cache_write_tokens, output_tokens = :output_tokens,
    reasoning_tokens = :reasoning_tokens,
    details_json = coalesce(CAST(:details_json AS TEXT), details_json),
    -- The attempt's cost is written once, from its calls (calls_node_idx): priced sum and the
    -- number of calls whose price is unknown (retry rows cost nothing).
    cost_usd = (SELECT sum(c.cost_usd) FROM calls AS c
                WHERE c.run_id = :run_id AND c.node_id = :node_id
                  AND c.iteration = :iteration AND c.attempt = :attempt),
    unpriced_calls = (SELECT count(*) FROM calls AS c
                      WHERE c.run_id = :run_id AND c.node_id = :node_id
                        AND c.iteration = :iteration AND c.attempt = :attempt
                        AND c.cost_usd IS NULL AND c.kind != 'retry')
WHERE run_id = :run_id AND node_id = :node_id AND iteration = :iteration AND attempt = :attempt
"""


@functools.lru_cache(maxsize=16)
def finish_attempt_with_node(events: int) -> str:
    """An attempt's end with its node's and its run's in one statement, for a connection where
    each statement is a message of its own (PostgreSQL's pipelined group commit): the attempt
    (its ``state``, ``error`` and ``cached`` bound as ``:attempt_state``, ``:attempt_error``,
    ``:attempt_cached``), the node's upsert, ``events`` events and the run's progress,
    returning the run's requests as UPDATE_PROGRESS_READ_REQUESTS does. Only PostgreSQL runs
    it (SQLite runs the four statements one by one, store/runs/attempt_log.py)."""
    ended = re.sub(r":(state|error|cached)\b", r":attempt_\1", FINISH_ATTEMPT.strip())
    return f"""
WITH ended AS ({ended}
), node_row AS ({UPSERT_NODE.strip()}
), appended AS ({INSERT_EVENT_HEAD}{named_event_rows(events)}
){UPDATE_PROGRESS_READ_REQUESTS}"""


SELECT_RUNNING_ATTEMPTS = """
SELECT run_id, node_id, iteration, attempt FROM attempts WHERE run_id = ? AND state = 'running'
"""

ABANDON_ATTEMPTS = """
UPDATE attempts SET state = 'abandoned', finished_at_ms = :now,
    error = coalesce(error, 'The process running this attempt stopped before it finished.')
WHERE run_id = :run_id AND state = 'running'
"""

# Nodes whose attempt was abandoned go back to pending so a resume retries them.
RESET_RUNNING_NODES = """
UPDATE nodes SET state = 'pending', updated_at_ms = :now
WHERE run_id = :run_id AND state IN ('running', 'retrying')
"""

SELECT_ATTEMPTS = """
SELECT * FROM attempts WHERE run_id = ? AND node_id = ? ORDER BY iteration, attempt
"""

SELECT_ATTEMPTS_ITERATION = """
SELECT * FROM attempts WHERE run_id = ? AND node_id = ? AND iteration = ? ORDER BY attempt
"""

# One page of a node iteration's attempts, newest first (the primary key's order, so a page
# costs the same at 10 attempts or 10 000).
SELECT_ATTEMPTS_PAGE = """
SELECT * FROM attempts WHERE run_id = ? AND node_id = ? AND iteration = ?
ORDER BY attempt DESC LIMIT ? OFFSET ?
"""

COUNT_ATTEMPTS_BY_STATE = """
SELECT state, count(*) FROM attempts WHERE run_id = ? AND node_id = ? AND iteration = ?
GROUP BY state ORDER BY state
"""

# -- handoffs -------------------------------------------------------------------------------

INSERT_HANDOFF = """
INSERT INTO handoffs (from_run_id, to_run_id, trigger, reason, generation, tokens_at_handoff,
                      carried_state_json, carried_bytes, created_at_ms)
VALUES (:from_run_id, :to_run_id, :trigger, :reason, :generation, :tokens_at_handoff,
        :carried_state_json, :carried_bytes, :now)
RETURNING handoff_id
"""

SELECT_HANDOFFS_FROM = "SELECT * FROM handoffs WHERE from_run_id = ? ORDER BY handoff_id"

SELECT_HANDOFFS_TO = "SELECT * FROM handoffs WHERE to_run_id = ? ORDER BY handoff_id"

SELECT_HANDOFFS_ALL = "SELECT * FROM handoffs ORDER BY handoff_id DESC LIMIT ?"
