"""SQL text for the in-memory term indexes (:mod:`store.search.term_index`): building a bank,
reading the database's tail, and fetching ranked notes.

A note's *superseded* flag is the second half of the default read contract: some accepted
note supersedes it (a pending or rejected superseder hides nothing).
"""

from __future__ import annotations

from store.memory.memory_sql import NOTE_COLUMNS_N

_SUPERSEDED = """EXISTS (
    SELECT 1 FROM note_supersessions s CROSS JOIN notes sup ON sup.id = s.note_id
    WHERE s.supersedes_id = n.id AND +sup.status = 'accepted')"""

# What the index keeps of a note.
NOTE_INDEX_COLUMNS = f"""n.rowid AS rowid, n.namespace, n.body, n.status, n.kind, n.tags_json,
       {_SUPERSEDED} AS superseded"""

# The newest note rowid and change-log sequence: one cheap probe before every search.
TAIL_MARKS = """
SELECT (SELECT max(rowid) FROM notes), (SELECT max(seq) FROM note_changes)
"""

# Every note of one bank, in rowid order, with what the index keeps of it.
BANK_NOTES = f"""
SELECT {NOTE_INDEX_COLUMNS}
FROM notes n
WHERE n.namespace = :namespace
ORDER BY n.rowid
"""

# Every note of the workspace, for the index that serves searches over several banks.
ALL_NOTES = f"""
SELECT {NOTE_INDEX_COLUMNS}
FROM notes n
ORDER BY n.rowid
"""

# Notes inserted after :after (rowids only grow: notes are append-only).
NOTES_AFTER = f"""
SELECT {NOTE_INDEX_COLUMNS}
FROM notes n
WHERE n.rowid > :after
ORDER BY n.rowid
"""

# Notes whose status or supersession changed after change :after, as they are now (namespace
# NULL: the note was deleted).
CHANGED_NOTES = f"""
SELECT c.note_rowid, n.namespace, n.status, CASE WHEN n.id IS NULL THEN FALSE ELSE {_SUPERSEDED} END
       AS superseded
FROM (SELECT DISTINCT note_rowid FROM note_changes WHERE seq > :after) c
LEFT JOIN notes n ON n.rowid = c.note_rowid
"""

# Full rows of ranked notes (:rowids is a JSON array).
NOTES_BY_ROWID = f"""
SELECT {NOTE_COLUMNS_N}, n.rowid AS rowid FROM notes n
WHERE n.rowid IN (SELECT CAST(value AS BIGINT) FROM json_each(:rowids))
"""
