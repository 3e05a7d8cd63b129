"""PostgreSQL twins of :mod:`store.memory.memory_sql` (facts, threads, messages, notes, search).

Same names, same parameters, same results. Differences worth knowing: JSON arrays bound as one
parameter are read with ``jsonb_array_elements_text``; ``LIMIT -1`` (SQLite's "no limit") is
``LIMIT NULL``; the full-text index is the ``search_vector`` column (``store/sql/postgres/
search.py``) and note order uses ``seq`` where SQLite uses ``rowid``.
"""

from __future__ import annotations

from store.db.paging import counted

# Column lists are the same words in both dialects.
from store.memory.memory_sql import (
    FACT_COLUMNS,
    MESSAGE_COLUMNS,
    NOTE_COLUMNS,
    NOTE_COLUMNS_N,
    THREAD_COLUMNS,
)
from store.search.tsvector import derive_fact, derive_note
from store.sql.postgres.statement import Twin

# -- facts ----------------------------------------------------------------------------------



def fact_live(alias: str = "") -> str:
    """The live-fact condition at ``%(now)s`` over the facts columns of ``alias``."""
    p = f"{alias}." if alias else ""
    return f"({p}ttl_ms IS NULL OR {p}updated_at_ms + {p}ttl_ms > %(now)s)"


_FACT_LIVE = fact_live()

GET_FACT = f"""
SELECT {FACT_COLUMNS} FROM facts
WHERE namespace = %(namespace)s AND key = %(key)s AND {_FACT_LIVE}
"""

LIST_FACTS_IN_NAMESPACE = f"""
SELECT {FACT_COLUMNS} FROM facts
WHERE namespace = %(namespace)s AND {_FACT_LIVE}
ORDER BY key
LIMIT nullif(%(limit)s, -1)
"""

LIST_ALL_FACTS = f"""
SELECT {FACT_COLUMNS} FROM facts
WHERE {_FACT_LIVE}
ORDER BY namespace, key
LIMIT nullif(%(limit)s, -1)
"""

COUNT_ALL_FACTS = counted(LIST_ALL_FACTS)
COUNT_FACTS_IN_NAMESPACE = counted(LIST_FACTS_IN_NAMESPACE)

COUNT_FACTS_BY_NAMESPACE = f"""
SELECT namespace, count(*) AS facts FROM facts
WHERE {_FACT_LIVE}
GROUP BY namespace
ORDER BY namespace
"""

UPSERT_FACT_QUIET = Twin(
    f"""
INSERT INTO facts ({FACT_COLUMNS}, search_vector)
VALUES (%(namespace)s, %(key)s, %(value_json)s, %(now)s, %(now)s, %(ttl_ms)s, %(run_id)s,
        %(node_id)s, %(iteration)s, %(search_vector)s::tsvector)
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
    iteration     = excluded.iteration,
    search_vector = excluded.search_vector
""",
    derive_fact,
)

UPSERT_FACT = Twin(
    UPSERT_FACT_QUIET.text + f"RETURNING {FACT_COLUMNS}\n", derive_fact
)

DELETE_FACT = """
DELETE FROM facts WHERE namespace = %(namespace)s AND key = %(key)s
RETURNING updated_at_ms, ttl_ms
"""

DELETE_EXPIRED_FACTS_CHUNK = """
DELETE FROM facts WHERE seq IN (
    SELECT seq FROM facts
    WHERE ttl_ms IS NOT NULL AND updated_at_ms + ttl_ms <= %(now)s
    LIMIT %(chunk)s
)
"""

# -- threads and messages -------------------------------------------------------------------


INSERT_THREAD = f"""
INSERT INTO threads ({THREAD_COLUMNS})
VALUES (%(thread_id)s, %(namespace)s, %(title)s, %(metadata_json)s, %(now)s, %(now)s)
ON CONFLICT (thread_id) DO NOTHING
"""

GET_THREAD = f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread_id = %(thread_id)s"

LIST_THREADS = f"SELECT {THREAD_COLUMNS} FROM threads ORDER BY created_at_ms, thread_id"

LIST_THREADS_IN_NAMESPACE = f"""
SELECT {THREAD_COLUMNS} FROM threads WHERE namespace = %(namespace)s
ORDER BY created_at_ms, thread_id
"""

DELETE_THREAD_MESSAGES = "DELETE FROM messages WHERE thread_id = %(thread_id)s"
DELETE_THREAD = "DELETE FROM threads WHERE thread_id = %(thread_id)s"

INSERT_MESSAGE = f"""
INSERT INTO messages ({MESSAGE_COLUMNS})
VALUES (%(id)s, %(thread_id)s, %(role)s, %(content_json)s, %(run_id)s, %(node_id)s,
        %(iteration)s, %(created_at_ms)s)
ON CONFLICT (id) DO NOTHING
"""

GET_MESSAGE = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = %(id)s"

TOUCH_THREAD = """
UPDATE threads SET updated_at_ms = greatest(updated_at_ms, %(at)s)
WHERE thread_id = %(thread_id)s
"""

LIST_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = %(thread_id)s
ORDER BY created_at_ms, id
"""

LIST_NEWEST_MESSAGES = f"""
SELECT * FROM (
    SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = %(thread_id)s
    ORDER BY created_at_ms DESC, id DESC
    LIMIT nullif(%(limit)s, -1)
) AS newest ORDER BY created_at_ms, id
"""

COUNT_MESSAGES = "SELECT count(*) FROM messages WHERE thread_id = %(thread_id)s"

DELETE_MESSAGE = "DELETE FROM messages WHERE thread_id = %(thread_id)s AND id = %(id)s"

# -- notes ----------------------------------------------------------------------------------


INSERT_NOTE = Twin(
    f"""
INSERT INTO notes ({NOTE_COLUMNS}, search_vector, body_length)
VALUES (%(id)s, %(namespace)s, %(body)s, %(kind)s, %(tags_json)s, %(author)s, %(status)s, NULL,
        NULL, %(now)s, %(run_id)s, %(node_id)s, %(iteration)s, %(search_vector)s::tsvector,
        %(body_length)s)
ON CONFLICT (id) DO NOTHING
""",
    derive_note,
)

INSERT_NOTE_AT = Twin(
    f"""
INSERT INTO notes ({NOTE_COLUMNS}, search_vector, body_length)
VALUES (%(id)s, %(namespace)s, %(body)s, %(kind)s, %(tags_json)s, %(author)s, %(status)s, NULL,
        NULL, %(created_at_ms)s, %(run_id)s, %(node_id)s, %(iteration)s,
        %(search_vector)s::tsvector, %(body_length)s)
ON CONFLICT (id) DO NOTHING
""",
    derive_note,
)

EXISTING_NOTE_IDS = """
SELECT id FROM notes WHERE id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb))
"""

INSERT_SUPERSESSION = """
INSERT INTO note_supersessions (note_id, supersedes_id, created_at_ms)
VALUES (%(note_id)s, %(supersedes_id)s, %(now)s)
ON CONFLICT (note_id, supersedes_id) DO NOTHING
"""

GET_NOTE = f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = %(id)s"

NOTE_NAMESPACES = """
SELECT id, namespace FROM notes WHERE id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb))
"""

SUPERSEDED_IDS = """
SELECT supersedes_id FROM note_supersessions WHERE note_id = %(id)s ORDER BY supersedes_id
"""

NOTES_SUPERSEDING = f"""
SELECT {NOTE_COLUMNS_N} FROM note_supersessions s JOIN notes n ON n.id = s.note_id
WHERE s.supersedes_id = %(id)s
ORDER BY n.created_at_ms, n.id
"""

NOTES_SUPERSEDED_BY = f"""
SELECT {NOTE_COLUMNS_N} FROM note_supersessions s JOIN notes n ON n.id = s.supersedes_id
WHERE s.note_id = %(id)s
ORDER BY n.created_at_ms, n.id
"""

SUPERSESSION_EDGES = """
SELECT s.note_id, s.supersedes_id, sup.status AS note_status, tgt.status AS target_status
FROM note_supersessions s
JOIN notes sup ON sup.id = s.note_id
JOIN notes tgt ON tgt.id = s.supersedes_id
WHERE s.note_id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb))
   OR s.supersedes_id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb))
ORDER BY s.note_id, s.supersedes_id
"""

SET_NOTE_STATUS = """
UPDATE notes SET status = %(status)s, status_changed_at_ms = %(now)s, status_reason = %(reason)s
WHERE id = %(id)s
"""

NOT_SUPERSEDED_BY_ACCEPTED = """NOT EXISTS (
    SELECT 1 FROM note_supersessions s JOIN notes sup ON sup.id = s.note_id
    WHERE s.supersedes_id = n.id AND sup.status = 'accepted')"""


def note_filter(
    *,
    namespace: bool,
    namespace_kind: bool,
    statuses: bool,
    include_superseded: bool,
    kind: bool,
    status: bool = False,
) -> str:
    """The WHERE clause over alias ``n``; the same flags and parameters as SQLite's."""
    conditions = ["TRUE"]
    if namespace:
        conditions.append("n.namespace = %(namespace)s")
    if namespace_kind:
        conditions.append("n.namespace >= %(namespace_low)s AND n.namespace < %(namespace_high)s")
    if statuses:
        conditions.append("n.status IN (SELECT jsonb_array_elements_text(%(statuses)s::jsonb))")
    if status:
        conditions.append("n.status = %(status)s")
    if not include_superseded:
        conditions.append(NOT_SUPERSEDED_BY_ACCEPTED)
    if kind:
        conditions.append("n.kind = %(kind)s")
    return " AND ".join(conditions)


def count_notes_sql(where: str) -> str:
    """How many notes :func:`list_notes_sql` lists for ``where``, up to its limit."""
    return counted(list_notes_sql(where))


def list_notes_sql(where: str, *, newest_first: bool = False) -> str:
    """Notes matching ``where``, oldest (or newest) first, at most ``%(limit)s``."""
    direction = "DESC" if newest_first else "ASC"
    return f"""
SELECT {NOTE_COLUMNS_N} FROM notes n
WHERE {where}
ORDER BY n.created_at_ms {direction}, n.seq {direction}
LIMIT nullif(%(limit)s, -1)
"""
