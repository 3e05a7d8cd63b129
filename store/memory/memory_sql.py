"""SQL text for the memory store: facts, threads, messages, notes, supersessions and search.

Everything the memory store sends to SQLite is written here, beside the schema
(``store/db/sqlite/sqlite_schema.py``); ``store/memory/facts.py``, ``store/memory/threads.py``,
``store/memory/notes.py`` and
``store/memory/memory_store.py`` only execute it. Statements use named parameters. The few
statements that
vary (note filters, search scope) are assembled by the small functions at the end from fixed
fragments, never from user text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from store.db.dialect import Statement
from store.db.paging import counted
from store.errors import InvalidInputError


def limit_param(limit: int | None) -> int:
    """A LIMIT parameter: None means no limit (SQLite reads a negative LIMIT that way)."""
    if limit is None:
        return -1
    if limit < 0:
        raise InvalidInputError("The limit must be zero or more.")
    return limit


# -- facts ----------------------------------------------------------------------------------

FACT_COLUMNS = (
    "namespace, key, value_json, created_at_ms, updated_at_ms, ttl_ms, run_id, node_id, iteration"
)

# A fact is live until ``updated_at_ms + ttl_ms``; at that instant it is expired (hidden on read
# and removable by the collector). One definition shared by reads, deletes, the collector and
# recall.
def fact_live(alias: str = "") -> str:
    """The live-fact condition at ``:now``, over the facts columns of ``alias`` (e.g. ``f``)."""
    p = f"{alias}." if alias else ""
    return f"({p}ttl_ms IS NULL OR {p}updated_at_ms + {p}ttl_ms > :now)"


_FACT_LIVE = fact_live()

GET_FACT = f"""
SELECT {FACT_COLUMNS} FROM facts
WHERE namespace = :namespace AND key = :key AND {_FACT_LIVE}
"""

LIST_FACTS_IN_NAMESPACE = f"""
SELECT {FACT_COLUMNS} FROM facts
WHERE namespace = :namespace AND {_FACT_LIVE}
ORDER BY key
LIMIT :limit
"""

LIST_ALL_FACTS = f"""
SELECT {FACT_COLUMNS} FROM facts
WHERE {_FACT_LIVE}
ORDER BY namespace, key
LIMIT :limit
"""

# What a cut listing left out, counted on the listing's own query (its LIMIT caps the count).
COUNT_ALL_FACTS = counted(LIST_ALL_FACTS)
COUNT_FACTS_IN_NAMESPACE = counted(LIST_FACTS_IN_NAMESPACE)

COUNT_FACTS_BY_NAMESPACE = f"""
SELECT namespace, count(*) AS facts FROM facts
WHERE {_FACT_LIVE}
GROUP BY namespace
ORDER BY namespace
"""

# Last write wins. created_at_ms survives an overwrite unless the old value had already expired
# (then the write starts a new fact). Provenance and TTL always come from the latest writer.
_UPSERT_FACT = """
ON CONFLICT (namespace, key) DO UPDATE SET
    value_json    = excluded.value_json,
    created_at_ms = CASE
        WHEN facts.ttl_ms IS NOT NULL
             AND facts.updated_at_ms + facts.ttl_ms <= excluded.updated_at_ms
        THEN excluded.created_at_ms ELSE facts.created_at_ms END,
    updated_at_ms = excluded.updated_at_ms,
    ttl_ms        = excluded.ttl_ms,
    run_id        = excluded.run_id,
    node_id       = excluded.node_id,
    iteration     = excluded.iteration"""
_FACT_VALUES = ":namespace, :key, :value_json, :now, :now, :ttl_ms, :run_id, :node_id, :iteration"


def _derive_fact(params: Mapping[str, Any]) -> dict[str, Any]:
    # Imported when PostgreSQL first writes a fact: the command line starts without it.
    from store.search.tsvector import derive_fact

    return derive_fact(params)


def _upsert_fact(returning: str) -> Statement:
    """The fact upsert; on PostgreSQL it also writes the fact's lexemes (``search_vector``,
    derived from key and value: what FTS5's ``facts_fts`` derives inside SQLite)."""
    return Statement(
        f"INSERT INTO facts ({FACT_COLUMNS})\nVALUES ({_FACT_VALUES}){_UPSERT_FACT}\n{returning}",
        postgres=(
            f"INSERT INTO facts ({FACT_COLUMNS}, search_vector)\n"
            f"VALUES ({_FACT_VALUES}, CAST(:search_vector AS tsvector)){_UPSERT_FACT},\n"
            f"    search_vector = excluded.search_vector\n{returning}"
        ),
        derive=_derive_fact,
    )


UPSERT_FACT_QUIET = _upsert_fact("")

# The same upsert returning the stored row (batches use the quiet form: executemany cannot
# return rows).
UPSERT_FACT = _upsert_fact(f"RETURNING {FACT_COLUMNS}\n")

# Returns the deleted row's expiry inputs, so an expired fact can read as "not found".
# (An expression in RETURNING came back NULL with the FTS delete trigger on SQLite 3.40.)
DELETE_FACT = """
DELETE FROM facts WHERE namespace = :namespace AND key = :key
RETURNING updated_at_ms, ttl_ms
"""

# Chunked so the collector never holds the write lock for long on a big backlog.
DELETE_EXPIRED_FACTS_CHUNK = """
DELETE FROM facts WHERE rowid IN (
    SELECT rowid FROM facts
    WHERE ttl_ms IS NOT NULL AND updated_at_ms + ttl_ms <= :now
    LIMIT :chunk
)
"""

# -- threads and messages -------------------------------------------------------------------

THREAD_COLUMNS = "thread_id, namespace, title, metadata_json, created_at_ms, updated_at_ms"
MESSAGE_COLUMNS = (
    "id, thread_id, role, content_json, run_id, node_id, iteration, created_at_ms"
)

INSERT_THREAD = f"""
INSERT INTO threads ({THREAD_COLUMNS})
VALUES (:thread_id, :namespace, :title, :metadata_json, :now, :now)
ON CONFLICT (thread_id) DO NOTHING
"""

GET_THREAD = f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread_id = :thread_id"

LIST_THREADS = f"SELECT {THREAD_COLUMNS} FROM threads ORDER BY created_at_ms, thread_id"

LIST_THREADS_IN_NAMESPACE = f"""
SELECT {THREAD_COLUMNS} FROM threads WHERE namespace = :namespace
ORDER BY created_at_ms, thread_id
"""

# Messages go first explicitly (the foreign key cascades too, but only with foreign_keys on).
DELETE_THREAD_MESSAGES = "DELETE FROM messages WHERE thread_id = :thread_id"
DELETE_THREAD = "DELETE FROM threads WHERE thread_id = :thread_id"

INSERT_MESSAGE = f"""
INSERT INTO messages ({MESSAGE_COLUMNS})
VALUES (:id, :thread_id, :role, :content_json, :run_id, :node_id, :iteration, :created_at_ms)
ON CONFLICT (id) DO NOTHING
"""

GET_MESSAGE = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = :id"

# A message can carry an older timestamp (a summary sorts first), so never move updated_at back.
TOUCH_THREAD = """
UPDATE threads SET updated_at_ms = max(updated_at_ms, :at) WHERE thread_id = :thread_id
"""

# All messages of a thread in chronological order.
LIST_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = :thread_id
ORDER BY created_at_ms, id
"""

# The newest :limit messages, returned in chronological order.
LIST_NEWEST_MESSAGES = f"""
SELECT * FROM (
    SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = :thread_id
    ORDER BY created_at_ms DESC, id DESC
    LIMIT :limit
) AS newest ORDER BY created_at_ms, id
"""

COUNT_MESSAGES = "SELECT count(*) FROM messages WHERE thread_id = :thread_id"

DELETE_MESSAGE = "DELETE FROM messages WHERE thread_id = :thread_id AND id = :id"

# -- notes ----------------------------------------------------------------------------------

NOTE_COLUMNS = (
    "id, namespace, body, kind, tags_json, author, status, status_changed_at_ms, status_reason, "
    "created_at_ms, run_id, node_id, iteration"
)
NOTE_COLUMNS_N = ", ".join(f"n.{column.strip()}" for column in NOTE_COLUMNS.split(","))

# Append-only: an existing id is never overwritten ("history cannot be destroyed").
INSERT_NOTE = f"""
INSERT INTO notes ({NOTE_COLUMNS})
VALUES (:id, :namespace, :body, :kind, :tags_json, :author, :status, NULL, NULL, :now,
        :run_id, :node_id, :iteration)
ON CONFLICT (id) DO NOTHING
"""

# The same insert with an explicit creation time (batch imports keep their dates).
INSERT_NOTE_AT = f"""
INSERT INTO notes ({NOTE_COLUMNS})
VALUES (:id, :namespace, :body, :kind, :tags_json, :author, :status, NULL, NULL,
        :created_at_ms, :run_id, :node_id, :iteration)
ON CONFLICT (id) DO NOTHING
"""

# Which of :ids (a JSON array) are already notes.
EXISTING_NOTE_IDS = "SELECT id FROM notes WHERE id IN (SELECT value FROM json_each(:ids))"

INSERT_SUPERSESSION = """
INSERT INTO note_supersessions (note_id, supersedes_id, created_at_ms)
VALUES (:note_id, :supersedes_id, :now)
ON CONFLICT (note_id, supersedes_id) DO NOTHING
"""

GET_NOTE = f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = :id"

# Ids and namespaces of the notes a new note wants to supersede (checked before edges go in).
# :ids is a JSON array so any number of ids binds as one parameter.
NOTE_NAMESPACES = "SELECT id, namespace FROM notes WHERE id IN (SELECT value FROM json_each(:ids))"

SUPERSEDED_IDS = """
SELECT supersedes_id FROM note_supersessions WHERE note_id = :id ORDER BY supersedes_id
"""

# Notes that supersede :id (any status): what would retire it, or has.
NOTES_SUPERSEDING = f"""
SELECT {NOTE_COLUMNS_N} FROM note_supersessions s JOIN notes n ON n.id = s.note_id
WHERE s.supersedes_id = :id
ORDER BY n.created_at_ms, n.id
"""

# Notes that :id supersedes: what accepting it would retire.
NOTES_SUPERSEDED_BY = f"""
SELECT {NOTE_COLUMNS_N} FROM note_supersessions s JOIN notes n ON n.id = s.supersedes_id
WHERE s.note_id = :id
ORDER BY n.created_at_ms, n.id
"""

# Every supersession edge touching any of :ids (a JSON array), with both ends' statuses: lets
# a list of notes show which are retired and what each would supersede in one query.
SUPERSESSION_EDGES = """
SELECT s.note_id, s.supersedes_id, sup.status AS note_status, tgt.status AS target_status
FROM note_supersessions s
JOIN notes sup ON sup.id = s.note_id
JOIN notes tgt ON tgt.id = s.supersedes_id
WHERE s.note_id IN (SELECT value FROM json_each(:ids))
   OR s.supersedes_id IN (SELECT value FROM json_each(:ids))
ORDER BY s.note_id, s.supersedes_id
"""

# The one write a person's decision makes; body, tags and edges never change.
SET_NOTE_STATUS = """
UPDATE notes SET status = :status, status_changed_at_ms = :now, status_reason = :reason
WHERE id = :id
"""

# The default read contract, part (b): no *accepted* note supersedes this one. A pending or
# rejected superseder hides nothing, so accepting one retires its targets with a single write.
# CROSS JOIN and the unary + pin the plan: walk this note's incoming edges by the target
# index, then look each superseder up by id. (Left to itself, the planner without statistics
# scanned every accepted note per row: seconds per search at 100k notes.)
NOT_SUPERSEDED_BY_ACCEPTED = """NOT EXISTS (
    SELECT 1 FROM note_supersessions s CROSS JOIN notes sup ON sup.id = s.note_id
    WHERE s.supersedes_id = n.id AND +sup.status = 'accepted')"""


def note_filter(
    *,
    namespace: bool,
    namespace_kind: bool,
    statuses: bool,
    include_superseded: bool,
    kind: bool,
    status: bool = False,
) -> str:
    """The WHERE clause (over alias ``n``) for a note read; each flag adds one fixed condition.

    Parameters bound by the caller: ``:namespace``; ``:namespace_low`` / ``:namespace_high``
    (``kind:`` and ``kind;``, a range the namespace index can serve, for a namespace-kind
    scope); ``:statuses`` (a JSON array); ``:status`` (one status: an equality the
    status-and-time indexes serve in order, so the few pending notes among a million are found
    without walking the others); ``:kind``.
    """
    conditions = ["TRUE"]
    if namespace:
        conditions.append("n.namespace = :namespace")
    if namespace_kind:
        conditions.append("n.namespace >= :namespace_low AND n.namespace < :namespace_high")
    if statuses:
        conditions.append("n.status IN (SELECT value FROM json_each(:statuses))")
    if status:
        conditions.append("n.status = :status")
    if not include_superseded:
        conditions.append(NOT_SUPERSEDED_BY_ACCEPTED)
    if kind:
        conditions.append("n.kind = :kind")
    return " AND ".join(conditions)


def count_notes_sql(where: str) -> str:
    """How many notes :func:`list_notes_sql` lists for ``where``, up to its ``:limit``."""
    return counted(list_notes_sql(where))


def list_notes_sql(where: str, *, newest_first: bool = False) -> str:
    """Notes matching ``where`` (from :func:`note_filter`), oldest (or newest) first.

    The order matches the time indexes, so SQLite walks one and stops at ``:limit``.
    """
    direction = "DESC" if newest_first else "ASC"
    return f"""
SELECT {NOTE_COLUMNS_N} FROM notes n
WHERE {where}
ORDER BY n.created_at_ms {direction}, n.rowid {direction}
LIMIT :limit
"""
