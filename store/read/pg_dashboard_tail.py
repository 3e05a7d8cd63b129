"""The dashboard's read side on a PostgreSQL workspace: the same queries and rows as
:class:`store.read.dashboard_reader.DashboardReader`, over a read-only session, with an event tail
that never skips an event that commits late.

Event numbers come from a sequence when a row is inserted, not when it commits: a transaction
holding number 11 may commit after the one holding 12 was read. The tail therefore remembers
every number it saw skipped (a *gap*) and asks for those again on each read; a gap fills when
its transaction commits, and one that never fills (its transaction rolled back) is forgotten
after :data:`GAP_TIMEOUT_S`. Only this workspace's events table is involved: a long
transaction elsewhere on the server delays nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from store.db.postgres.pg_database import PostgresDatabase
from store.model.history_records import EventRecord
from store.model.run_records import RunRecord
from store.read import dashboard_sql as sql
from store.read.dashboard_reader import DashboardReader
from store.runs.artifact_chunks import ArtifactChunks
from store.workspace.layout import Workspace

GAP_TIMEOUT_S = 60.0
"""Long enough for any Tether transaction to commit; a rolled-back number is dropped then."""
MAX_GAPS = 10_000


def find_gaps(after: int, seqs: Sequence[int]) -> list[int]:
    """The numbers between ``after`` and the largest of ``seqs`` (sorted) that are missing."""
    gaps: list[int] = []
    expected = after + 1
    for seq in seqs:
        gaps.extend(range(expected, seq))
        expected = seq + 1
    return gaps[-MAX_GAPS:]


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
        self._high = 0  # the largest number read
        self._echo = 0  # the number the last call ended with (what the tailer passes back)
        self._gaps: dict[int, float] = {}  # skipped number -> when it was first seen missing

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
        """The newest event number; the tail continues after it."""
        high = int(await self._db.fetch_value(sql.MAX_EVENT_SEQ) or 0)
        self._high = self._echo = high
        self._gaps.clear()
        return high

    async def events_since(self, seq: int, limit: int = 1000) -> list[EventRecord]:
        """Events not handed out yet: gaps that filled since, then events after the largest
        number read, in number order. ``seq`` is what the previous call ended with (or from
        :meth:`max_event_seq`); another value restarts the tail after it."""
        if seq != self._echo:
            self._high, self._gaps = seq, {}
        filled: list[Any] = []
        if self._gaps:
            filled = await self._db.fetch_all(sql.EVENTS_BY_SEQ, (sorted(self._gaps),))
            for row in filled:
                self._gaps.pop(int(row["seq"]), None)
            expired = time.monotonic() - GAP_TIMEOUT_S
            self._gaps = {n: at for n, at in self._gaps.items() if at > expired}
        rows = await self._db.fetch_all(sql.EVENTS_SINCE, (self._high, limit))
        if rows:
            now = time.monotonic()
            for gap in find_gaps(self._high, [int(row["seq"]) for row in rows]):
                self._gaps.setdefault(gap, now)
            self._high = int(rows[-1]["seq"])
        events = [EventRecord.from_row(row) for row in [*filled, *rows]]
        if events:
            self._echo = events[-1].seq
        return events

    async def runs_by_ids(self, run_ids: Sequence[str]) -> dict[str, RunRecord]:
        ids = list(dict.fromkeys(run_ids))
        rows = await self._db.fetch_all(sql.RUNS_BY_ID_LIST, (ids,))
        return {row.run_id: row for row in map(RunRecord.from_row, rows)}
