"""PostgreSQL twins of :mod:`store.search.term_sql`: what the in-memory term indexes read.
A note's number is its ``seq`` (read as ``rowid``, the name the index uses)."""

from __future__ import annotations

from store.memory.memory_sql import NOTE_COLUMNS_N

_SUPERSEDED = """EXISTS (
    SELECT 1 FROM note_supersessions s JOIN notes sup ON sup.id = s.note_id
    WHERE s.supersedes_id = n.id AND sup.status = 'accepted')"""

TAIL_MARKS = """
SELECT (SELECT max(seq) FROM notes), (SELECT max(seq) FROM note_changes)
"""

NOTE_INDEX_COLUMNS = f"""n.seq AS rowid, n.namespace, n.body, n.status, n.kind, n.tags_json,
       {_SUPERSEDED} AS superseded"""

BANK_NOTES = f"""
SELECT {NOTE_INDEX_COLUMNS}
FROM notes n
WHERE n.namespace = %(namespace)s
ORDER BY n.seq
"""

ALL_NOTES = f"""
SELECT {NOTE_INDEX_COLUMNS}
FROM notes n
ORDER BY n.seq
"""

NOTES_AFTER = f"""
SELECT {NOTE_INDEX_COLUMNS}
FROM notes n
WHERE n.seq > %(after)s
ORDER BY n.seq
"""

CHANGED_NOTES = f"""
SELECT c.note_rowid, n.namespace, n.status,
       CASE WHEN n.id IS NULL THEN false ELSE {_SUPERSEDED} END AS superseded
FROM (SELECT DISTINCT note_rowid FROM note_changes WHERE seq > %(after)s) c
LEFT JOIN notes n ON n.seq = c.note_rowid
"""

NOTES_BY_ROWID = f"""
SELECT {NOTE_COLUMNS_N}, n.seq AS rowid FROM notes n
WHERE n.seq IN (SELECT (jsonb_array_elements_text(%(rowids)s::jsonb))::bigint)
"""
