"""The dashboard's read side on a PostgreSQL workspace: the same queries and rows as
:class:`store.dashboard.DashboardReader`, over a read-only session, with a commit-safe event
tail (see ``store/sql/postgres/dashboard.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.artifact_chunks import ArtifactChunks
from store.dashboard import DashboardReader, EventRow, RunRow, _build
from store.postgres import PostgresDatabase
from store.sql.postgres import dashboard as pg_sql
from store.sql.postgres.statement import Native
from store.workspace import Workspace


class PgDashboardReader(DashboardReader):
    """A read-only session on the workspace's PostgreSQL database."""

    def __init__(self, db: PostgresDatabase, workspace: Workspace) -> None:
        super().__init__(None, workspace)  # type: ignore[arg-type]
        self._db = db
        self.journal_mode = "wal"  # nothing to warn about: PostgreSQL has no such mode
        self.read_only = not db.role_can_write
        self.schema_name = db.schema_name
        self.chunks = ArtifactChunks(db)
        """Artifact files kept in the database (logs followed from any host)."""
        self._cursor: tuple[str, int] = ("0", 0)

    @classmethod
    async def open(cls, workspace: Workspace) -> PgDashboardReader:
        """Connect with ``default_transaction_read_only`` on.

        Raises:
            NotFoundError: the database holds no Tether workspace yet.
            WorkspaceError: unreachable, foreign or newer.
        """
        db = await PostgresDatabase.open(workspace, create=False, read_only=True)
        return cls(db, workspace)

    async def close(self) -> None:
        await self._db.close()

    async def _rows(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._db.fetch_all(query, params)

    async def data_version(self) -> int:
        return await self._db.data_version()

    # -- the tail ----------------------------------------------------------------------------

    async def max_event_seq(self) -> int:
        """The newest event safe to have read; the tail continues after it."""
        row = await self._db.fetch_one(Native(pg_sql.TAIL_POSITION))
        self._cursor = ("0", 0) if row is None else (str(row[0]), int(row[1]))
        return self._cursor[1]

    async def events_since(self, seq: int, limit: int = 1000) -> list[EventRow]:
        """Events after the cursor in commit-safe order. ``seq`` is the last one returned (or
        from :meth:`max_event_seq`); another value restarts the tail after that number."""
        xid = self._cursor[0] if seq == self._cursor[1] else "0"
        rows = await self._db.fetch_all(
            Native(pg_sql.EVENTS_AFTER), {"xid": xid, "seq": seq, "limit": limit}
        )
        if rows:
            self._cursor = (str(rows[-1]["tx_id"]), int(rows[-1]["seq"]))
        return _build(EventRow, rows)

    async def runs_by_ids(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        ids = list(dict.fromkeys(run_ids))
        rows = await self._db.fetch_all(Native(pg_sql.RUNS_BY_ID_LIST), (ids,))
        return {row.run_id: row for row in _build(RunRow, rows)}
