"""SQL for artifacts kept in a PostgreSQL workspace (``artifact_chunks``): PostgreSQL only (a
SQLite workspace keeps its artifacts as files), written in the store's one spelling like every
statement and rendered by :mod:`store.db.dialect`."""

from __future__ import annotations

APPEND_CHUNK = """
INSERT INTO artifact_chunks (path, offset_bytes, data, written_at_ms)
VALUES (:path, :offset, :data, :now)
ON CONFLICT (path, offset_bytes) DO UPDATE SET data = excluded.data,
    written_at_ms = excluded.written_at_ms
"""

# Drop what lies at or after an offset (a file rewritten from there).
TRUNCATE_FROM = """
DELETE FROM artifact_chunks WHERE path = :path AND offset_bytes >= :offset
"""

FILE_SIZE = """
SELECT coalesce(max(offset_bytes + length(data)), 0) FROM artifact_chunks WHERE path = :path
"""

# Chunks that end after :offset, in order, up to :limit of them.
CHUNKS_FROM = """
SELECT offset_bytes, data FROM artifact_chunks
WHERE path = :path AND offset_bytes + length(data) > :offset
ORDER BY offset_bytes LIMIT :limit
"""

# Paths below a prefix (a run, a node), with their sizes.
PATHS_UNDER = """
SELECT path, max(offset_bytes + length(data)) AS size FROM artifact_chunks
WHERE path >= :low AND path < :high GROUP BY path ORDER BY path
"""

FILE_EXISTS = "SELECT 1 FROM artifact_chunks WHERE path = :path LIMIT 1"

