"""The dashboard's read side: one read-only connection, cheap change detection, bounded reads.

The dashboard never writes through this connection and never holds a read transaction: every
query is run to completion (``execute_fetchall``) before anything else is awaited, so the
connection's snapshot is released at once, ``PRAGMA data_version`` keeps moving, and the
writer's checkpoints are never blocked by a half-read cursor.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import aiosqlite

from store.db.sqlite.database_file import database_file_exists, read_file_info, readonly_uri
from store.db.sqlite.sqlite_database import BUSY_TIMEOUT_MS
from store.errors import NotFoundError
from store.model.executor_records import ExecutorNodeRecord
from store.model.history_records import EventRecord, HandoffRecord, MemoryBlockRecord
from store.model.run_records import AttemptRecord, CallRecord, NodeRecord, RunRecord, row_values
from store.read import dashboard_sql as sql
from store.read.dashboard_rows import (
    BucketUsage,
    HandoffChain,
    MemorySummary,
    NodeUsage,
    WorkerRow,
    histogram,
)
from store.runs import executor_sql
from store.workspace.layout import Workspace

T = TypeVar("T")


def _records(make: Callable[[Any], T], rows: Iterable[Any]) -> list[T]:
    return [make(row) for row in rows]


def _rows_of(make: Callable[..., T], rows: Iterable[Any]) -> list[T]:
    return [make(**row_values(row)) for row in rows]


class DashboardReader:
    """A read-only connection to the workspace database with the dashboard's queries."""

    def __init__(self, conn: aiosqlite.Connection, workspace: Workspace) -> None:
        self._conn = conn
        self.workspace = workspace
        self._data_version: int | None = None
        self.journal_mode = ""
        self.read_only = False
        """True when the workspace may only be read (a read-only PostgreSQL role)."""

    @classmethod
    async def open(cls, workspace: Workspace) -> DashboardReader:
        """Open the SQLite workspace database read-only (``mode=ro``); a PostgreSQL workspace's
        reader is :class:`store.read.pg_dashboard_tail.PgDashboardReader` (both chosen by
        :func:`store.db.backends.open_reader`).

        Raises:
            NotFoundError: the workspace has no database yet.
            WorkspaceError: the file is not a usable Tether database.
        """
        path = workspace.database_path
        if not database_file_exists(path):
            raise NotFoundError(f"There is no Tether workspace at {workspace.root}.")
        if read_file_info(path).empty:
            raise NotFoundError(f"There is no Tether workspace at {workspace.root} yet.")
        conn = await aiosqlite.connect(
            readonly_uri(path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
        )
        conn.row_factory = sqlite3.Row
        reader = cls(conn, workspace)
        try:
            await conn.execute("PRAGMA query_only = 1")
            reader.journal_mode = str(await reader._value(sql.JOURNAL_MODE)).lower()
        except BaseException:
            await conn.close()
            raise
        return reader

    async def close(self) -> None:
        """Close the connection and its worker thread."""
        await self._conn.close()

    async def _rows(self, query: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        # execute_fetchall exhausts the cursor, so no snapshot outlives the call.
        return list(await self._conn.execute_fetchall(query, params))

    async def fetch_all(self, query: str, params: Any = ()) -> list[Any]:
        """Run any read of :mod:`store.read` (search, timeline, usage) on this connection; the
        rows are read to the end before it returns."""
        return await self._rows(query, params)

    async def _value(self, query: str, params: Sequence[Any] = ()) -> Any:
        rows = await self._rows(query, params)
        return rows[0][0] if rows else None

    # -- change detection --------------------------------------------------------------------

    async def data_version(self) -> int:
        """SQLite's per-connection counter that moves when another connection commits."""
        return int(await self._value(sql.DATA_VERSION))

    async def changed(self) -> bool:
        """True when another connection committed since the last call (and on the first)."""
        version = await self.data_version()
        moved = version != self._data_version
        self._data_version = version
        return moved

    async def max_event_seq(self) -> int:
        """The newest event sequence number (0 when there are none)."""
        return int(await self._value(sql.MAX_EVENT_SEQ) or 0)

    async def events_since(self, seq: int, limit: int = 1000) -> list[EventRecord]:
        """Events after ``seq``, oldest first, at most ``limit``."""
        return _records(EventRecord.from_row, await self._rows(sql.EVENTS_SINCE, (seq, limit)))

    async def recent_events(self, limit: int = 50) -> list[EventRecord]:
        """The newest ``limit`` events, newest first."""
        return _records(EventRecord.from_row, await self._rows(sql.EVENTS_RECENT, (limit,)))

    # -- runs and nodes ----------------------------------------------------------------------

    async def recent_runs(self, limit: int = 200) -> list[RunRecord]:
        """The newest ``limit`` runs, newest first."""
        return _records(RunRecord.from_row, await self._rows(sql.RUNS_RECENT, (limit,)))

    async def active_runs(self, limit: int = 500) -> list[RunRecord]:
        """Runs whose status is running (healthy or stale)."""
        return _records(RunRecord.from_row, await self._rows(sql.RUNS_ACTIVE, (limit,)))

    async def run(self, run_id: str) -> RunRecord | None:
        """One run, or None."""
        rows = _records(RunRecord.from_row, await self._rows(sql.RUN_BY_ID, (run_id,)))
        return rows[0] if rows else None

    async def runs_by_ids(self, run_ids: Sequence[str]) -> dict[str, RunRecord]:
        """The runs with these ids that exist, keyed by id."""
        out: dict[str, RunRecord] = {}
        ids = list(dict.fromkeys(run_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = await self._rows(sql.runs_by_ids(len(chunk)), chunk)
            for row in _records(RunRecord.from_row, rows):
                out[row.run_id] = row
        return out

    async def calls_of_runs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """How many model calls each of these runs made (a run with none is absent)."""
        out: dict[str, int] = {}
        ids = list(dict.fromkeys(run_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for run_id, calls in await self._rows(sql.calls_of_runs(len(chunk)), chunk):
                out[str(run_id)] = int(calls)
        return out

    async def nodes(self, run_id: str, limit: int = 2000) -> list[NodeRecord]:
        """A run's node iterations in start order."""
        return _records(NodeRecord.from_row, await self._rows(sql.NODES_OF_RUN, (run_id, limit)))

    async def node(self, run_id: str, node_id: str, iteration: int) -> NodeRecord | None:
        """One node iteration, or None."""
        rows = await self._rows(sql.NODE_OF_RUN, (run_id, node_id, iteration))
        return NodeRecord.from_row(rows[0]) if rows else None

    async def node_usage(self, run_id: str) -> dict[str, NodeUsage]:
        """Token usage per node iteration of a run, keyed like :attr:`NodeRecord.key`."""
        rows = _records(NodeUsage.from_row, await self._rows(sql.NODE_USAGE_OF_RUN, (run_id,)))
        return {row.key: row for row in rows}

    async def attempts(
        self, run_id: str, node_id: str, iteration: int, limit: int = 100
    ) -> list[AttemptRecord]:
        """The newest ``limit`` attempts of a node iteration, first first (the node row's
        ``attempts`` says how many there are in all)."""
        rows = await self._rows(sql.ATTEMPTS_OF_NODE, (run_id, node_id, iteration, limit))
        return _records(AttemptRecord.from_row, reversed(rows))

    async def calls(
        self, run_id: str, node_id: str, iteration: int, limit: int = 500
    ) -> list[CallRecord]:
        """The newest ``limit`` model calls of a node iteration, in the order they were made."""
        rows = await self._rows(sql.CALLS_OF_NODE, (run_id, node_id, iteration, limit))
        return _records(CallRecord.from_row, reversed(rows))

    async def memory_block(
        self, run_id: str, node_id: str, iteration: int
    ) -> MemoryBlockRecord | None:
        """The memory block recall built for a node iteration, or None."""
        rows = _records(
            MemoryBlockRecord.from_row,
            await self._rows(sql.MEMORY_BLOCK_OF_NODE, (run_id, node_id, iteration)),
        )
        return rows[0] if rows else None

    async def warned_nodes(self, run_id: str) -> set[str]:
        """The node iterations of a run (keyed like :attr:`NodeRecord.key`) with an attempt
        that recorded warnings."""
        rows = await self._rows(sql.WARNED_NODES_OF_RUN, (run_id, sql.WARNINGS_PATTERN))
        return {f"{row[0]}#{row[1]}" for row in rows}

    async def memory_summaries(self, run_id: str) -> dict[str, MemorySummary]:
        """Per node iteration of a run: bytes used/budget, truncation and warning of its block."""
        rows = _rows_of(MemorySummary, await self._rows(sql.MEMORY_BLOCKS_OF_RUN, (run_id,)))
        return {f"{row.node_id}#{row.iteration}": row for row in rows}

    async def latest_memory_block_node(self) -> tuple[str, str, int] | None:
        """(run, node, iteration) of the newest non-empty memory block, or None."""
        rows = await self._rows(sql.LATEST_MEMORY_BLOCK)
        if not rows:
            return None
        return str(rows[0][0]), str(rows[0][1]), int(rows[0][2])

    async def workers(self, limit: int = 20) -> list[WorkerRow]:
        """Workers that have not stopped, most recent heartbeat first (none on a workspace
        that predates workers)."""
        try:
            return _rows_of(WorkerRow, await self._rows(sql.WORKERS_RECENT, (limit,)))
        except sqlite3.OperationalError:
            return []

    async def executor_nodes(self, limit: int = 50) -> list[ExecutorNodeRecord]:
        """The executor's nodes as last seen by an orchestrator, alive first (none on a
        workspace that predates executors)."""
        try:
            rows = await self._rows(executor_sql.SELECT_EXECUTOR_NODES, (limit,))
        except sqlite3.OperationalError:
            return []
        return _records(ExecutorNodeRecord.from_row, rows)

    # -- tokens --------------------------------------------------------------------------------

    async def usage_by_bucket(
        self, run_id: str | None = None, node_id: str | None = None
    ) -> list[BucketUsage]:
        """Calls and tokens per context-window bucket for the workspace, a run or a node."""
        if run_id is not None and node_id is not None:
            rows = await self._rows(sql.USAGE_OF_NODE, (run_id, node_id))
        else:
            rows = await self._rows(sql.USAGE_ROLLUP, (run_id or "",))
        return histogram(_records(BucketUsage.from_row, rows))

    async def top_calls(
        self, run_id: str | None = None, node_id: str | None = None, limit: int = 10
    ) -> list[CallRecord]:
        """The calls with the largest context windows in the workspace, a run or a node."""
        if run_id is None:
            rows = await self._rows(sql.TOP_CALLS_WORKSPACE, (limit,))
        elif node_id is None:
            rows = await self._rows(sql.TOP_CALLS_RUN, (run_id, limit))
        else:
            rows = await self._rows(sql.TOP_CALLS_NODE, (run_id, node_id, limit))
        return _records(CallRecord.from_row, rows)

    async def recent_calls_of_run(self, run_id: str, limit: int = 300) -> list[CallRecord]:
        """The run's newest ``limit`` calls, oldest first (a bounded series for charts)."""
        rows = await self._rows(sql.CALLS_OF_RUN_RECENT, (run_id, limit))
        return list(reversed(_records(CallRecord.from_row, rows)))

    # -- handoffs ------------------------------------------------------------------------------

    async def handoff_chains(self, limit: int = 50, max_length: int = 50) -> list[HandoffChain]:
        """Chains of runs linked by handoffs, newest chain first.

        Starts from the newest ``limit`` handoffs and walks each chain through the handoff
        indexes, so the cost depends on the chains shown, not on the history kept.
        """
        recent = _records(HandoffRecord.from_row, await self._rows(sql.HANDOFFS_RECENT, (limit,)))
        chains: list[HandoffChain] = []
        seen: set[int] = set()
        for newest in recent:
            if newest.handoff_id in seen:
                continue
            links = [newest]
            # Walk back to the first run of the chain.
            while len(links) < max_length:
                rows = await self._rows(sql.HANDOFF_INTO_RUN, (links[0].from_run_id,))
                if not rows:
                    break
                previous = _records(HandoffRecord.from_row, rows)[0]
                if previous.handoff_id in {h.handoff_id for h in links}:
                    break
                links.insert(0, previous)
            # Walk forward to the newest generation.
            while len(links) < max_length and links[-1].to_run_id:
                rows = await self._rows(sql.HANDOFF_FROM_RUN, (links[-1].to_run_id,))
                if not rows:
                    break
                following = _records(HandoffRecord.from_row, rows)[0]
                if following.handoff_id in {h.handoff_id for h in links}:
                    break
                links.append(following)
            seen.update(h.handoff_id for h in links)
            run_ids = [links[0].from_run_id] + [h.to_run_id or "" for h in links]
            chains.append(HandoffChain(run_ids=[r for r in run_ids if r], handoffs=links))
        return chains
