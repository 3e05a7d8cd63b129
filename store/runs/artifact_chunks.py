"""Artifacts kept in the database of a PostgreSQL workspace.

A file is a run of chunks keyed by ``(path, offset)``, ``path`` being its place inside the
workspace's ``artifacts/`` folder (``r-1a2b/plan/1/stream.log``). Appending adds a chunk at the
current end, so a reader on any host follows a growing log by offset, exactly like a file tail;
rewriting a file replaces its chunks. Deleting a run drops its artifacts (a trigger).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from store.db.postgres.pg_database import PostgresDatabase
from store.runs import artifacts_sql as sql

MAX_CHUNK_BYTES = 1024 * 1024
"""Larger writes are split so no row (or read) gets big."""


@dataclass(frozen=True)
class StoredFile:
    """An artifact file in the database and its size in bytes."""

    path: str
    size: int


def pieces(data: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, piece)`` for ``data`` written at ``offset``, in pieces of at most
    :data:`MAX_CHUNK_BYTES`."""
    for start in range(0, len(data), MAX_CHUNK_BYTES):
        yield offset + start, data[start : start + MAX_CHUNK_BYTES]


def prefix_range(prefix: str) -> tuple[str, str]:
    """``[low, high)`` of the paths inside folder ``prefix`` ("r-1/" .. "r-10")."""
    folder = prefix.rstrip("/")
    return folder + "/", folder + "0"


class ArtifactChunks:
    """Writes and reads artifact files stored as chunks."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def _rows(self, path: str, data: bytes, offset: int) -> list[dict[str, Any]]:
        now = self.db.clock.now_ms()
        return [
            {"path": path, "offset": at, "data": piece, "now": now}
            for at, piece in pieces(data, offset)
        ]

    async def append(self, path: str, data: bytes, offset: int) -> None:
        """Write ``data`` at ``offset`` (the size already stored, for an append)."""
        if not data:
            return
        rows = self._rows(path, data, offset)

        def work(conn: Any) -> None:
            conn.execute(sql.TRUNCATE_FROM, {"path": path, "offset": offset})
            conn.executemany(sql.APPEND_CHUNK, rows)

        await self.db.run_in_transaction(work)

    async def replace(self, path: str, data: bytes) -> None:
        """Store ``data`` as the whole file ``path`` (an empty file is one empty chunk)."""
        rows = self._rows(path, data, 0) or [
            {"path": path, "offset": 0, "data": b"", "now": self.db.clock.now_ms()}
        ]

        def work(conn: Any) -> None:
            conn.execute(sql.TRUNCATE_FROM, {"path": path, "offset": 0})
            conn.executemany(sql.APPEND_CHUNK, rows)

        await self.db.run_in_transaction(work)

    async def size(self, path: str) -> int:
        """The stored size of ``path`` (0 when there is no such file)."""
        return int(await self.db.fetch_value(sql.FILE_SIZE, {"path": path}) or 0)

    async def read(self, path: str, offset: int = 0, max_bytes: int = 1024 * 1024) -> bytes:
        """Up to about ``max_bytes`` of ``path`` from ``offset`` on."""
        limit = max(1, max_bytes // MAX_CHUNK_BYTES + 1)
        rows = await self.db.fetch_all(
            sql.CHUNKS_FROM, {"path": path, "offset": offset, "limit": limit}
        )
        data = b"".join(bytes(row[1])[max(0, offset - int(row[0])) :] for row in rows)
        return data[:max_bytes]

    def read_whole_now(self, path: str) -> bytes | None:
        """The whole file ``path``, or None when there is none: read on the calling thread
        (for synchronous callers such as a task's prompt function reading an artifact)."""

        def work(conn: Any) -> bytes | None:
            rows = conn.execute(
                sql.CHUNKS_FROM, {"path": path, "offset": 0, "limit": None}
            ).fetchall()
            if not rows:
                exists = conn.execute(sql.FILE_EXISTS, {"path": path}).fetchone()
                return b"" if exists else None
            return b"".join(bytes(row[1]) for row in rows)

        return self.db.transact_read(work)

    async def files(self, prefix: str = "") -> list[StoredFile]:
        """Files stored under folder ``prefix`` (every file for ``""``)."""
        low, high = prefix_range(prefix) if prefix else ("", "\U0010ffff")
        rows = await self.db.fetch_all(sql.PATHS_UNDER, {"low": low, "high": high})
        return [StoredFile(str(row[0]), int(row[1])) for row in rows]
