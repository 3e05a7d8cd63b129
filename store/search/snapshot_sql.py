"""SQL text for term-index snapshots (:mod:`store.search.term_snapshot`): checking that a snapshot
describes this database, and reading one bank's tail since it was written. SQLite only
(snapshots are not kept for PostgreSQL workspaces), so these statements have no twins."""

from __future__ import annotations

from store.search.term_sql import NOTE_INDEX_COLUMNS

# Ids of notes by rowid (:rowids is a JSON array): a snapshot's fingerprint.
NOTE_IDS_AT = """
SELECT rowid, id FROM notes WHERE rowid IN (SELECT value FROM json_each(:rowids))
"""

# The note logged at one change-log sequence.
CHANGE_AT = "SELECT note_rowid FROM note_changes WHERE seq = :seq"

# The first change logged after :after (a gap means the log was pruned).
FIRST_CHANGE_AFTER = "SELECT min(seq) FROM note_changes WHERE seq > :after"

# One bank's notes inserted after :after (a snapshot's tail), in rowid order.
BANK_NOTES_AFTER = f"""
SELECT {NOTE_INDEX_COLUMNS}
FROM notes n
WHERE n.rowid > :after AND n.namespace = :namespace
ORDER BY n.rowid
"""
