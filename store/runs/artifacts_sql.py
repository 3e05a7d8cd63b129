"""SQL for artifacts kept in a PostgreSQL workspace (``artifact_chunks``): PostgreSQL only, so
written as :class:`~store.sql.postgres.statement.Native` text (there is no SQLite statement to
pair with: a SQLite workspace keeps its artifacts as files)."""

from __future__ import annotations

from store.sql.postgres.statement import Native

APPEND_CHUNK = Native("""
INSERT INTO artifact_chunks (path, offset_bytes, data, written_at_ms)
VALUES (%(path)s, %(offset)s, %(data)s, %(now)s)
ON CONFLICT (path, offset_bytes) DO UPDATE SET data = excluded.data,
    written_at_ms = excluded.written_at_ms
""")

# Drop what lies at or after an offset (a file rewritten from there).
TRUNCATE_FROM = Native("""
DELETE FROM artifact_chunks WHERE path = %(path)s AND offset_bytes >= %(offset)s
""")

FILE_SIZE = Native("""
SELECT coalesce(max(offset_bytes + length(data)), 0) FROM artifact_chunks WHERE path = %(path)s
""")

# Chunks that end after :offset, in order, up to :limit of them.
CHUNKS_FROM = Native("""
SELECT offset_bytes, data FROM artifact_chunks
WHERE path = %(path)s AND offset_bytes + length(data) > %(offset)s
ORDER BY offset_bytes LIMIT %(limit)s
""")

# Paths below a prefix (a run, a node), with their sizes.
PATHS_UNDER = Native("""
SELECT path, max(offset_bytes + length(data)) AS size FROM artifact_chunks
WHERE path >= %(low)s AND path < %(high)s GROUP BY path ORDER BY path
""")

FILE_EXISTS = Native("SELECT 1 FROM artifact_chunks WHERE path = %(path)s LIMIT 1")

COUNT_FILES = Native("SELECT count(DISTINCT path) FROM artifact_chunks")
