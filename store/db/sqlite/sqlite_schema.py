"""The workspace database schema as an ordered, append-only list of migrations.

Rules for editing this file:
- never change or reorder an entry that has shipped; add a new one at the end;
- ``PRAGMA user_version`` records how many migrations a database has applied;
- ``PRAGMA application_id`` marks the file as a Tether workspace database.

Naming follows BRIEF section 2: run, node, iteration, attempt, call, fact, note, bank, block,
handoff, event. Times are integer milliseconds since the epoch (``*_ms``).
"""

from __future__ import annotations

from store.db.schema_parts import (
    ATTEMPTS_KEYS,
    COST_BACKFILL,
    RUNS_INDEXES,
    call_key,
    executor_schema,
    fork_columns,
    money_schema,
    observe_tables,
    queue_columns,
    steer_delivery,
)
from store.model.states import (
    ATTEMPT_STATES,
    NODE_STATES,
    NOTE_STATUSES,
    RUN_STATUSES,
    sql_list,
)

# "TeTH" as a big-endian 32-bit integer; lets us tell a Tether database from any other SQLite file.
APPLICATION_ID = 0x54655448


_NOTE_STATUSES = sql_list(NOTE_STATUSES)

_MIGRATION_1 = f"""
-- Memory: facts (mutable key/value, last write wins, optional TTL from the last write).
CREATE TABLE facts (
    namespace      TEXT    NOT NULL,
    key            TEXT    NOT NULL,
    value_json     TEXT    NOT NULL CHECK (json_valid(value_json)),
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    ttl_ms         INTEGER CHECK (ttl_ms IS NULL OR ttl_ms >= 0),
    run_id         TEXT,
    node_id        TEXT,
    iteration      INTEGER,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX facts_expiry_idx ON facts (updated_at_ms, ttl_ms) WHERE ttl_ms IS NOT NULL;

-- Full-text index over facts for recall (key and value text); kept in step by triggers.
CREATE VIRTUAL TABLE facts_fts USING fts5 (
    namespace UNINDEXED,
    key,
    value,
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts (rowid, namespace, key, value)
    VALUES (new.rowid, new.namespace, new.key, new.value_json);
END;
CREATE TRIGGER facts_fts_update AFTER UPDATE ON facts BEGIN
    DELETE FROM facts_fts WHERE rowid = old.rowid;
    INSERT INTO facts_fts (rowid, namespace, key, value)
    VALUES (new.rowid, new.namespace, new.key, new.value_json);
END;
CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
    DELETE FROM facts_fts WHERE rowid = old.rowid;
END;

-- Memory: threads and their ordered messages (idempotent on message id).
CREATE TABLE threads (
    thread_id      TEXT PRIMARY KEY,
    namespace      TEXT    NOT NULL,
    title          TEXT,
    metadata_json  TEXT CHECK (metadata_json IS NULL OR json_valid(metadata_json)),
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL
);
CREATE INDEX threads_namespace_idx ON threads (namespace, created_at_ms);

CREATE TABLE messages (
    id             TEXT PRIMARY KEY,
    thread_id      TEXT    NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    role           TEXT    NOT NULL,
    content_json   TEXT    NOT NULL CHECK (json_valid(content_json)),
    run_id         TEXT,
    node_id        TEXT,
    iteration      INTEGER,
    created_at_ms  INTEGER NOT NULL
);
CREATE INDEX messages_thread_idx ON messages (thread_id, created_at_ms, id);

-- Memory: notes (append-only; status is the one column a person may change later).
CREATE TABLE notes (
    id                   TEXT PRIMARY KEY,
    namespace            TEXT    NOT NULL,
    body                 TEXT    NOT NULL,
    kind                 TEXT,
    tags_json            TEXT CHECK (tags_json IS NULL OR json_valid(tags_json)),
    author               TEXT,
    status               TEXT    NOT NULL DEFAULT 'accepted' CHECK (status IN {_NOTE_STATUSES}),
    status_changed_at_ms INTEGER,
    status_reason        TEXT,
    created_at_ms        INTEGER NOT NULL,
    run_id               TEXT,
    node_id              TEXT,
    iteration            INTEGER
);
CREATE INDEX notes_namespace_idx ON notes (namespace, status, created_at_ms);
CREATE INDEX notes_status_idx ON notes (status, created_at_ms);
-- Listings of every status walk these in time order and stop at the limit (no sort of history).
CREATE INDEX notes_namespace_created_idx ON notes (namespace, created_at_ms);
CREATE INDEX notes_created_idx ON notes (created_at_ms);

-- note_id supersedes supersedes_id; both in the same namespace, never the same note.
CREATE TABLE note_supersessions (
    note_id        TEXT    NOT NULL REFERENCES notes (id),
    supersedes_id  TEXT    NOT NULL REFERENCES notes (id),
    created_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (note_id, supersedes_id),
    CHECK (note_id <> supersedes_id)
);
CREATE INDEX note_supersessions_target_idx ON note_supersessions (supersedes_id);

-- Full-text index over note bodies (external content: the notes table holds the text).
CREATE VIRTUAL TABLE notes_fts USING fts5 (
    body,
    content = 'notes',
    content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
    INSERT INTO notes_fts (rowid, body) VALUES (new.rowid, new.body);
END;
CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, body) VALUES ('delete', old.rowid, old.body);
END;
-- Document frequency per term, used to keep very common words from making a search slow.
CREATE VIRTUAL TABLE notes_fts_vocab USING fts5vocab ('notes_fts', 'row');

-- Runs: one execution of a workflow with an input.
CREATE TABLE runs (
    run_id                  TEXT PRIMARY KEY,
    workflow                TEXT    NOT NULL,
    workflow_path           TEXT,
    status                  TEXT    NOT NULL CHECK (status IN {sql_list(RUN_STATUSES)}),
    input_json              TEXT CHECK (input_json IS NULL OR json_valid(input_json)),
    output_json             TEXT CHECK (output_json IS NULL OR json_valid(output_json)),
    error                   TEXT,
    parent_run_id           TEXT REFERENCES runs (run_id) ON DELETE SET NULL,
    generation              INTEGER NOT NULL DEFAULT 0,
    owner_id                TEXT,
    created_at_ms           INTEGER NOT NULL,
    started_at_ms           INTEGER,
    finished_at_ms          INTEGER,
    heartbeat_at_ms         INTEGER,
    updated_at_ms           INTEGER NOT NULL,
    cancel_requested_at_ms  INTEGER,
    clear_requested_at_ms   INTEGER,
    clear_reason            TEXT,
    nodes_total             INTEGER NOT NULL DEFAULT 0,
    nodes_done              INTEGER NOT NULL DEFAULT 0,
    input_tokens            INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens       INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens           INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens        INTEGER NOT NULL DEFAULT 0
);
{RUNS_INDEXES}

-- Nodes: a task inside a run, one row per loop iteration.
CREATE TABLE nodes (
    run_id          TEXT    NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    node_id         TEXT    NOT NULL,
    iteration       INTEGER NOT NULL DEFAULT 0,
    state           TEXT    NOT NULL CHECK (state IN {sql_list(NODE_STATES)}),
    attempts        INTEGER NOT NULL DEFAULT 0,
    cached          INTEGER NOT NULL DEFAULT 0,
    depends_on_json TEXT,
    output_json     TEXT CHECK (output_json IS NULL OR json_valid(output_json)),
    error           TEXT,
    started_at_ms   INTEGER,
    finished_at_ms  INTEGER,
    updated_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (run_id, node_id, iteration)
);
CREATE INDEX nodes_updated_idx ON nodes (updated_at_ms);

-- Attempts: one try of a node iteration. Token columns are the authoritative per-attempt
-- totals, written once when the attempt ends (never running totals).
CREATE TABLE attempts (
    run_id              TEXT    NOT NULL,
    node_id             TEXT    NOT NULL,
    iteration           INTEGER NOT NULL DEFAULT 0,
    attempt             INTEGER NOT NULL,
    state               TEXT    NOT NULL CHECK (state IN {sql_list(ATTEMPT_STATES)}),
    agent               TEXT,
    model               TEXT,
    prompt              TEXT,
    response_text       TEXT,
    error               TEXT,
    cached              INTEGER NOT NULL DEFAULT 0,
    owner_id            TEXT,
    started_at_ms       INTEGER NOT NULL,
    finished_at_ms      INTEGER,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens    INTEGER NOT NULL DEFAULT 0,
{ATTEMPTS_KEYS}
);

-- Calls: one row per model call. context_tokens = input + cache read + cache write.
CREATE TABLE calls (
    call_id             INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id              TEXT    NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    node_id             TEXT    NOT NULL,
    iteration           INTEGER NOT NULL DEFAULT 0,
    attempt             INTEGER NOT NULL,
    agent               TEXT    NOT NULL,
    model               TEXT,
    simulated           INTEGER NOT NULL DEFAULT 0,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens    INTEGER NOT NULL DEFAULT 0,
    context_tokens      INTEGER NOT NULL,
    bucket              TEXT    NOT NULL,
    started_at_ms       INTEGER NOT NULL,
    finished_at_ms      INTEGER NOT NULL
);
CREATE INDEX calls_node_idx ON calls (run_id, node_id, iteration, attempt);
CREATE INDEX calls_context_idx ON calls (context_tokens DESC);

-- Token usage rolled up per (run, bucket) as calls are recorded, so histograms and totals never
-- scan the calls table. run_id '' is the whole workspace.
CREATE TABLE usage_rollups (
    run_id              TEXT    NOT NULL,
    bucket              TEXT    NOT NULL,
    calls               INTEGER NOT NULL DEFAULT 0,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, bucket)
) WITHOUT ROWID;

-- Memory blocks: what recall injected before a task prompt (or why nothing was injected).
-- One per (run, node, iteration): retries reuse it.
CREATE TABLE memory_blocks (
    block_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id          TEXT    NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    node_id         TEXT    NOT NULL,
    iteration       INTEGER NOT NULL DEFAULT 0,
    attempt         INTEGER NOT NULL DEFAULT 1,
    query           TEXT,
    banks_json      TEXT,
    text            TEXT,
    items_json      TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(items_json)),
    bytes_used      INTEGER NOT NULL DEFAULT 0,
    budget_bytes    INTEGER NOT NULL,
    truncated       INTEGER NOT NULL DEFAULT 0,
    warning         TEXT,
    degraded        INTEGER NOT NULL DEFAULT 0,
    duration_ms     INTEGER,
    created_at_ms   INTEGER NOT NULL,
    UNIQUE (run_id, node_id, iteration)
);

-- Handoffs: a run that stopped and continued in a fresh run carrying distilled state.
CREATE TABLE handoffs (
    handoff_id          INTEGER PRIMARY KEY AUTOINCREMENT,
    from_run_id         TEXT    NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    to_run_id           TEXT    REFERENCES runs (run_id) ON DELETE SET NULL,
    trigger             TEXT    NOT NULL CHECK (trigger IN ('ceiling', 'person')),
    reason              TEXT    NOT NULL,
    generation          INTEGER NOT NULL,
    tokens_at_handoff   INTEGER,
    carried_state_json  TEXT    NOT NULL CHECK (json_valid(carried_state_json)),
    carried_bytes       INTEGER NOT NULL,
    created_at_ms       INTEGER NOT NULL
);
CREATE INDEX handoffs_from_idx ON handoffs (from_run_id);
CREATE INDEX handoffs_to_idx ON handoffs (to_run_id);

-- Task-output cache.
CREATE TABLE task_cache (
    cache_key       TEXT PRIMARY KEY,
    scope           TEXT    NOT NULL CHECK (scope IN ('run', 'workflow', 'global')),
    workflow        TEXT,
    node_id         TEXT    NOT NULL,
    run_id          TEXT,
    payload_json    TEXT    NOT NULL CHECK (json_valid(payload_json)),
    created_at_ms   INTEGER NOT NULL,
    ttl_ms          INTEGER
);

-- Events: append-only log of everything that happens; seq is the monotonic sequence number
-- the dashboard tails ("what changed since N" and "the most recent K" both use the key).
CREATE TABLE events (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms         INTEGER NOT NULL,
    type          TEXT    NOT NULL,
    run_id        TEXT,
    node_id       TEXT,
    iteration     INTEGER,
    attempt       INTEGER,
    payload_json  TEXT CHECK (payload_json IS NULL OR json_valid(payload_json))
);
CREATE INDEX events_run_idx ON events (run_id, seq);
"""

# Cost of model calls (US dollars) and what kind of row a call is.
# - calls.cost_usd: NULL when no price is known for the call's model ("unknown", never 0).
# - calls.kind: 'model' (a model call), 'retry' (an HTTP request the agent retried: no tokens,
#   shown so every retry is visible) or 'reconciliation' (tokens and cost an agent's session
#   totals hold beyond its per-message calls). Only 'model' rows count as calls in rollups.
# - calls.detail_json: what the row needs to explain itself (retry status and wait, why a
#   reconciliation exists, the cost source).
# - attempts.details_json: what the agent passed and reported for the attempt (command line,
#   session id, per-model cost); cost_usd/unpriced_calls are the attempt's cost totals.
# - runs / usage_rollups: priced cost sums plus the count of calls without a known price.
_MIGRATION_2 = f"""
ALTER TABLE calls ADD COLUMN cost_usd REAL;
ALTER TABLE calls ADD COLUMN kind TEXT NOT NULL DEFAULT 'model'
    CHECK (kind IN ('model', 'retry', 'reconciliation'));
ALTER TABLE calls ADD COLUMN detail_json TEXT
    CHECK (detail_json IS NULL OR json_valid(detail_json));
ALTER TABLE attempts ADD COLUMN cost_usd REAL;
ALTER TABLE attempts ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN details_json TEXT
    CHECK (details_json IS NULL OR json_valid(details_json));
ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0;
{COST_BACKFILL}
"""

_MIGRATION_RECALL = """
-- Stemming: both full-text indexes are rebuilt with FTS5's porter stemmer over unicode61, so
-- "opening" finds "opened" (store/search/porter.py stems the Python side identically).
DROP TABLE notes_fts_vocab;
DROP TRIGGER notes_fts_insert;
DROP TRIGGER notes_fts_delete;
DROP TABLE notes_fts;
CREATE VIRTUAL TABLE notes_fts USING fts5 (
    body,
    content = 'notes',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
    INSERT INTO notes_fts (rowid, body) VALUES (new.rowid, new.body);
END;
CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, body) VALUES ('delete', old.rowid, old.body);
END;
INSERT INTO notes_fts (notes_fts) VALUES ('rebuild');
CREATE VIRTUAL TABLE notes_fts_vocab USING fts5vocab ('notes_fts', 'row');

DROP TRIGGER facts_fts_insert;
DROP TRIGGER facts_fts_update;
DROP TRIGGER facts_fts_delete;
DROP TABLE facts_fts;
CREATE VIRTUAL TABLE facts_fts USING fts5 (
    namespace UNINDEXED,
    key,
    value,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO facts_fts (rowid, namespace, key, value)
    SELECT rowid, namespace, key, value_json FROM facts;
CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts (rowid, namespace, key, value)
    VALUES (new.rowid, new.namespace, new.key, new.value_json);
END;
CREATE TRIGGER facts_fts_update AFTER UPDATE ON facts BEGIN
    DELETE FROM facts_fts WHERE rowid = old.rowid;
    INSERT INTO facts_fts (rowid, namespace, key, value)
    VALUES (new.rowid, new.namespace, new.key, new.value_json);
END;
CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
    DELETE FROM facts_fts WHERE rowid = old.rowid;
END;

-- Notes whose liveness (accepted, not superseded by an accepted note) may have changed after
-- they were inserted: a status decision on them or on a note superseding them, or a new edge.
-- In-memory term indexes (store/search/term_index.py) read this log's tail; new notes they find by
-- rowid (notes are append-only).
CREATE TABLE note_changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    note_rowid  INTEGER NOT NULL
);
CREATE TRIGGER note_changes_status AFTER UPDATE OF status ON notes BEGIN
    INSERT INTO note_changes (note_rowid) VALUES (new.rowid);
    INSERT INTO note_changes (note_rowid)
        SELECT t.rowid FROM note_supersessions s JOIN notes t ON t.id = s.supersedes_id
        WHERE s.note_id = new.id;
END;
CREATE TRIGGER note_changes_edge AFTER INSERT ON note_supersessions BEGIN
    INSERT INTO note_changes (note_rowid)
        SELECT rowid FROM notes WHERE id = new.supersedes_id;
END;
CREATE TRIGGER note_changes_delete AFTER DELETE ON notes BEGIN
    INSERT INTO note_changes (note_rowid) VALUES (old.rowid);
END;

-- Semantic recall: one embedding per note or fact and model (little-endian float32), written
-- in the background when the record is written and by `tether memory reindex`.
CREATE TABLE memory_vectors (
    ref            TEXT    NOT NULL,
    model          TEXT    NOT NULL,
    namespace      TEXT    NOT NULL,
    source_rowid   INTEGER NOT NULL,
    dim            INTEGER NOT NULL,
    vector         BLOB    NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (model, ref)
);
CREATE INDEX memory_vectors_namespace_idx ON memory_vectors (model, namespace);
-- How far each model's embedder got: notes by rowid (append-only), facts by update time.
CREATE TABLE vector_progress (
    model       TEXT    NOT NULL,
    source      TEXT    NOT NULL CHECK (source IN ('note', 'fact')),
    mark        INTEGER NOT NULL,
    PRIMARY KEY (model, source)
);
"""

# Queued runs, leases and workers (``tether run --queue``, ``tether worker``): a worker claims
# a queued run, holds it by a lease its heartbeat renews, and writes under a fencing token that
# goes up by one at every claim, so a worker that lost its lease can no longer write the run.
_MIGRATION_QUEUE = f"""
{queue_columns("INTEGER")}
CREATE TABLE workers (
    worker_id        TEXT PRIMARY KEY,
    host             TEXT    NOT NULL,
    pid              INTEGER NOT NULL,
    started_at_ms    INTEGER NOT NULL,
    heartbeat_at_ms  INTEGER NOT NULL,
    runs_held        INTEGER NOT NULL DEFAULT 0,
    stopped_at_ms    INTEGER
);
"""

# Two indexes no query reads: every node and run update rewrote their pages (about a fifth of
# the pages a finished node's commit wrote), for nothing.
_MIGRATION_UNREAD_INDEXES = """
DROP INDEX IF EXISTS nodes_updated_idx;
DROP INDEX IF EXISTS runs_updated_idx;
"""

# The notes' FTS5 index, written on every note and read by nothing since note search and recall
# rank with the in-memory term index (store/search/term_index.py). Facts keep facts_fts (recall
# matches facts with it).
_MIGRATION_UNREAD_NOTES_FTS = """
DROP TABLE IF EXISTS notes_fts_vocab;
DROP TRIGGER IF EXISTS notes_fts_insert;
DROP TRIGGER IF EXISTS notes_fts_delete;
DROP TABLE IF EXISTS notes_fts;
"""

# Carried nodes, daily spend and budget alerts (store/db/schema_parts.py, money_schema).
_MIGRATION_MONEY = money_schema("TEXT", "INTEGER", "REAL", "{0} IS NULL OR json_valid({0})")
# Where each attempt ran (executor, host, Ray node) and the executor's nodes (engine/executors/).
_MIGRATION_EXECUTOR = executor_schema("TEXT", "INTEGER", "json_valid({0})")
# Calls keyed by their number in the attempt, so a retried write cannot record one twice.
_MIGRATION_CALL_KEY = call_key("INTEGER")
# What the observation views read: usage per run, hour, agent and model (``tether usage``, the
# Usage view, ``agent``/``model`` in run search), saved run filters, runs by workflow.
_MIGRATION_OBSERVE = observe_tables("INTEGER", "REAL", "TEXT", " WITHOUT ROWID")

# The ordered, append-only list. Index i holds the SQL that takes user_version from i to i + 1.
MIGRATIONS: tuple[str, ...] = (
    _MIGRATION_1,
    _MIGRATION_2,
    _MIGRATION_RECALL,
    _MIGRATION_QUEUE,
    _MIGRATION_UNREAD_INDEXES,
    _MIGRATION_UNREAD_NOTES_FTS,
    _MIGRATION_EXECUTOR,
    _MIGRATION_CALL_KEY,
    _MIGRATION_OBSERVE,
    _MIGRATION_MONEY,
    fork_columns("TEXT", "{0} IS NULL OR json_valid({0})"),  # runs forked from a node
    steer_delivery("TEXT"),  # a steer for the node's next attempt
)

SCHEMA_VERSION = len(MIGRATIONS)
