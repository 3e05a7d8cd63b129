"""Schema text both backends' migrations share word for word (index lists, keys, backfills),
written once and placed into each migration as it shipped."""

from __future__ import annotations

from store.model.token_lanes import LANE_COLUMNS

# `tether runs --status S` and the dashboard's filtered list read runs_status_created_idx:
# newest first, no sort.
RUNS_INDEXES = """CREATE INDEX runs_created_idx ON runs (created_at_ms DESC);
CREATE INDEX runs_status_heartbeat_idx ON runs (status, heartbeat_at_ms);
CREATE INDEX runs_status_created_idx ON runs (status, created_at_ms DESC);
CREATE INDEX runs_parent_idx ON runs (parent_run_id);
CREATE INDEX runs_updated_idx ON runs (updated_at_ms);"""

ATTEMPTS_KEYS = """    PRIMARY KEY (run_id, node_id, iteration, attempt),
    FOREIGN KEY (run_id, node_id, iteration)
        REFERENCES nodes (run_id, node_id, iteration) ON DELETE CASCADE"""

# Calls recorded before costs existed have no known price.
COST_BACKFILL = """UPDATE usage_rollups SET unpriced_calls = calls;
UPDATE runs SET unpriced_calls = (SELECT count(*) FROM calls WHERE calls.run_id = runs.run_id);
UPDATE attempts SET unpriced_calls = (
    SELECT count(*) FROM calls
    WHERE calls.run_id = attempts.run_id AND calls.node_id = attempts.node_id
      AND calls.iteration = attempts.iteration AND calls.attempt = attempts.attempt
);"""


def queue_columns(integer: str) -> str:
    """The run queue's columns and index (``integer``: the backend's integer type)."""
    return f"""ALTER TABLE runs ADD COLUMN queued_at_ms {integer};
ALTER TABLE runs ADD COLUMN lease_token {integer} NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_expires_at_ms {integer};
CREATE INDEX runs_queue_idx ON runs (status, queued_at_ms) WHERE queued_at_ms IS NOT NULL;
ALTER TABLE attempts ADD COLUMN lease_token {integer};"""


def money_schema(text: str, integer: str, real: str, json_check: str) -> str:
    """Carried nodes, daily spend and budget alerts (both backends' migration of the same
    name): ``text``/``integer``/``real`` are the backend's types, ``json_check`` a format
    string checking its ``{}`` column holds JSON.

    - nodes.carried_from: the run whose attempt produced a carried node's output (a handoff's
      successor takes finished work over instead of running it again); nodes.input_key: what
      the node's output was made from (agent, task prompt, output schema) when it finished.
    - runs.budget_json: the budgets the run is held to (``tether budget``, the dashboards).
    - spend_days: tokens and cost per UTC day, rolled up as calls are recorded (the
      workspace's daily budgets read one row).
    - budget_alerts: each budget's 50/80/100 % alert, recorded once (across processes).
    """
    return f"""ALTER TABLE nodes ADD COLUMN carried_from {text};
ALTER TABLE nodes ADD COLUMN input_key {text};
ALTER TABLE runs ADD COLUMN budget_json {text} CHECK ({json_check.format("budget_json")});
CREATE TABLE spend_days (
    day                 {text} PRIMARY KEY,
    calls               {integer} NOT NULL DEFAULT 0,
    input_tokens        {integer} NOT NULL DEFAULT 0,
    cache_read_tokens   {integer} NOT NULL DEFAULT 0,
    cache_write_tokens  {integer} NOT NULL DEFAULT 0,
    output_tokens       {integer} NOT NULL DEFAULT 0,
    reasoning_tokens    {integer} NOT NULL DEFAULT 0,
    cost_usd            {real} NOT NULL DEFAULT 0,
    unpriced_calls      {integer} NOT NULL DEFAULT 0
);
CREATE TABLE budget_alerts (
    budget_key  {text} NOT NULL,
    threshold   {integer} NOT NULL,
    run_id      {text},
    at_ms       {integer} NOT NULL,
    PRIMARY KEY (budget_key, threshold)
);
"""


def executor_schema(text: str, integer: str, json_check: str) -> str:
    """Where attempts ran and the executor's nodes (``text``/``integer``: the backend's types;
    ``json_check``: its JSON check with ``{0}`` for the column).

    An attempt sent to a Ray cluster records the executor, the host and the Ray node that ran
    it; ``executor_nodes`` keeps the cluster's nodes as the orchestrators last saw them (alive
    or lost, resources in total and available) for the dashboard and a timeline."""
    return f"""ALTER TABLE attempts ADD COLUMN executor {text};
ALTER TABLE attempts ADD COLUMN host {text};
ALTER TABLE attempts ADD COLUMN executor_node {text};
CREATE TABLE executor_nodes (
    node_id         {text} PRIMARY KEY,
    executor        {text} NOT NULL,
    host            {text} NOT NULL,
    address         {text} NOT NULL,
    alive           {integer} NOT NULL,
    resources_json  {text} NOT NULL CHECK ({json_check.format("resources_json")}),
    available_json  {text} CHECK (available_json IS NULL OR {json_check.format("available_json")}),
    first_seen_ms   {integer} NOT NULL,
    updated_at_ms   {integer} NOT NULL,
    lost_at_ms      {integer}
);"""


def call_key(integer: str) -> str:
    """Each call of an attempt gets its number (``call_seq``, from 1), unique per attempt
    (calls_seq_idx): a call recorded twice (a write retried after a dropped connection) keeps
    one row. Calls recorded before have their id as number. calls_node_idx stays as it is, so
    reads still walk an attempt's calls in id order."""
    return f"""ALTER TABLE calls ADD COLUMN call_seq {integer};
UPDATE calls SET call_seq = call_id;
CREATE UNIQUE INDEX calls_seq_idx ON calls (run_id, node_id, iteration, attempt, call_seq);"""


def fork_columns(text: str, json_check: str, integer: str = "INTEGER") -> str:
    """Acting on a run (both backends' migration of the same name). A run forked from another
    one's node (``tether fork``, ``b`` in the run detail): ``runs.forked_from`` is the run it
    was forked from;
    ``runs.fork_node`` the task it was forked from (both read by every listing);
    ``runs.fork_json`` the edit it runs with and what it carries over (``engine/fork.py``)."""
    return f"""ALTER TABLE runs ADD COLUMN forked_from {text};
ALTER TABLE runs ADD COLUMN fork_node {text};
ALTER TABLE runs ADD COLUMN fork_json {text} CHECK ({json_check.format("fork_json")});
CREATE INDEX runs_forked_from_idx ON runs (forked_from) WHERE forked_from IS NOT NULL;
CREATE TABLE steers (
    steer_id          {text} PRIMARY KEY,
    run_id            {text} NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    node_id           {text} NOT NULL,
    iteration         {integer} NOT NULL,
    position          {integer} NOT NULL,
    message           {text} NOT NULL,
    sent_by           {text} NOT NULL,
    state             {text} NOT NULL CHECK (state IN ('queued', 'delivered', 'refused')),
    created_at_ms     {integer} NOT NULL,
    decided_at_ms     {integer},
    attempt           {integer},
    refusal           {text}
);
CREATE INDEX steers_node_idx ON steers (run_id, node_id, iteration, state);"""


def steer_delivery(text: str) -> str:
    """When a steer is delivered (both backends' migration of the same name): ``now``, at the
    next point where the running attempt's agent can take it, or ``next-attempt``, prepended
    to the prompt of the node's next attempt (a retry or a resume: ``tether steer
    --next-attempt``, for an agent that runs one shot)."""
    return (f"ALTER TABLE steers ADD COLUMN deliver {text} NOT NULL DEFAULT 'now' "
            "CHECK (deliver IN ('now', 'next-attempt'));")


def observe_tables(integer: str, real: str, text: str, without_rowid: str) -> str:
    """What the observation views read (``tether usage``, ``runs --where``, saved filters):
    usage per run, hour, agent and model, kept as calls are recorded and back-filled from the
    calls already there; saved run filters; runs by workflow, attempts by agent and model and
    what failed (run search). ``integer``, ``real`` and ``text`` are the backend's types;
    ``without_rowid`` its clause for a keyed table."""
    lanes = "\n".join(
        f"    {column} {integer} NOT NULL DEFAULT 0," for column in LANE_COLUMNS
    )
    sums = ", ".join(f"sum({column})" for column in LANE_COLUMNS)
    return f"""
CREATE TABLE usage_hours (
    run_id          {text} NOT NULL,
    hour_ms         {integer} NOT NULL,
    agent           {text} NOT NULL,
    model           {text} NOT NULL,
    calls           {integer} NOT NULL DEFAULT 0,
{lanes}
    cost_usd        {real} NOT NULL DEFAULT 0,
    unpriced_calls  {integer} NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, hour_ms, agent, model)
){without_rowid};
CREATE INDEX usage_hours_hour_idx ON usage_hours (hour_ms);
CREATE INDEX usage_hours_model_idx ON usage_hours (model, run_id);
CREATE INDEX usage_hours_agent_idx ON usage_hours (agent, run_id);
INSERT INTO usage_hours (run_id, hour_ms, agent, model, calls, {", ".join(LANE_COLUMNS)},
                         cost_usd, unpriced_calls)
SELECT run_id, (started_at_ms / 3600000) * 3600000, agent, coalesce(model, ''),
       count(*) FILTER (WHERE kind = 'model'), {sums}, coalesce(sum(cost_usd), 0),
       count(*) FILTER (WHERE cost_usd IS NULL AND kind != 'retry')
FROM calls GROUP BY run_id, (started_at_ms / 3600000) * 3600000, agent, coalesce(model, '');

CREATE TABLE saved_filters (
    name           {text} PRIMARY KEY,
    query          {text} NOT NULL,
    created_at_ms  {integer} NOT NULL,
    updated_at_ms  {integer} NOT NULL
);

CREATE INDEX runs_workflow_created_idx ON runs (workflow, created_at_ms DESC);
CREATE INDEX attempts_agent_idx ON attempts (agent, run_id);
CREATE INDEX attempts_model_idx ON attempts (model, run_id);
CREATE INDEX attempts_failed_idx ON attempts (run_id) WHERE error IS NOT NULL;
CREATE INDEX nodes_failed_idx ON nodes (run_id) WHERE error IS NOT NULL;"""
