"""The dashboard's read side: one read-only connection, cheap change detection, bounded reads.

The dashboard never writes through this connection and never holds a read transaction: every
query is run to completion (``execute_fetchall``) before anything else is awaited, so the
connection's snapshot is released at once, ``PRAGMA data_version`` keeps moving, and the
writer's checkpoints are never blocked by a half-read cursor.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiosqlite

from store.db.sqlite.database_file import database_file_exists, read_file_info, readonly_uri
from store.db.sqlite.sqlite_database import BUSY_TIMEOUT_MS
from store.errors import NotFoundError
from store.model.buckets import BUCKET_LABELS
from store.model.run_records import STALE_AFTER_MS, TokenUsage
from store.read import dashboard_sql as sql
from store.workspace.layout import Workspace

T = TypeVar("T")


def _build(cls: type[T], rows: Iterable[sqlite3.Row]) -> list[T]:
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    out: list[T] = []
    for row in rows:
        keys = row.keys()
        out.append(cls(**{name: row[name] for name in names if name in keys}))
    return out


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class TokenColumns:
    """The five token columns a dashboard row carries, flat, as the query returns them.

    The arithmetic lives in :class:`store.model.run_records.TokenUsage` (``usage``); the columns
    stay flat here because every dashboard row is built by column name straight from its query row
    (:func:`_build`), which a nested ``TokenUsage`` field would not allow without a constructor
    per row type.
    """

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    # Cost of the row's calls: the priced sum (None: no priced call) and how many had no price.
    cost_usd: float | None = None
    unpriced_calls: int = 0

    @property
    def usage(self) -> TokenUsage:
        """The row's tokens as the shared value type."""
        return TokenUsage(
            self.input_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.output_tokens,
            self.reasoning_tokens,
        )

    @property
    def context_tokens(self) -> int:
        """Input the model had in its window: fresh + cache read + cache write."""
        return self.usage.context_tokens

    @property
    def total_tokens(self) -> int:
        """Everything: context plus output plus reasoning."""
        return self.usage.total

    @property
    def cached_share(self) -> float:
        """Fraction of the context window that was read from the prompt cache."""
        return self.usage.cached_share


@dataclass(frozen=True)
class RunRow(TokenColumns):
    """One run as the runs list shows it."""

    run_id: str = ""
    workflow: str = ""
    status: str = ""
    error: str | None = None
    parent_run_id: str | None = None
    generation: int = 0
    created_at_ms: int = 0
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    heartbeat_at_ms: int | None = None
    updated_at_ms: int = 0
    nodes_total: int = 0
    nodes_done: int = 0
    input_json: str | None = None
    clear_reason: str | None = None

    def is_stale(self, now_ms: int) -> bool:
        """Running, but nobody has beaten the heartbeat for more than 30 s."""
        if self.status != "running":
            return False
        beat = self.heartbeat_at_ms or self.started_at_ms or self.created_at_ms
        return now_ms - beat > STALE_AFTER_MS

    def elapsed_ms(self, now_ms: int) -> int:
        """Time from start to finish (or to now while it has not finished)."""
        start = self.started_at_ms or self.created_at_ms
        end = self.finished_at_ms or (now_ms if self.status == "running" else self.updated_at_ms)
        return max(0, end - start)


@dataclass(frozen=True)
class NodeRow:
    """One node iteration of a run."""

    run_id: str
    node_id: str
    iteration: int
    state: str
    attempts: int = 0
    cached: int = 0
    depends_on_json: str | None = None
    output_json: str | None = None
    error: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    updated_at_ms: int = 0

    @property
    def key(self) -> str:
        """Stable identity of the row across refreshes."""
        return f"{self.node_id}#{self.iteration}"

    def elapsed_ms(self, now_ms: int) -> int | None:
        """Time from start to finish (or now while running); None before it starts."""
        if self.started_at_ms is None:
            return None
        return max(0, (self.finished_at_ms or now_ms) - self.started_at_ms)


@dataclass(frozen=True)
class NodeUsage(TokenColumns):
    """Token usage summed over every call of one node iteration."""

    node_id: str = ""
    iteration: int = 0
    calls: int = 0
    max_context_tokens: int = 0


@dataclass(frozen=True)
class AttemptRow(TokenColumns):
    """One try of a node iteration, with the prompt as sent and the response."""

    run_id: str = ""
    node_id: str = ""
    iteration: int = 0
    attempt: int = 0
    state: str = ""
    agent: str | None = None
    model: str | None = None
    prompt: str | None = None
    response_text: str | None = None
    error: str | None = None
    cached: int = 0
    started_at_ms: int = 0
    finished_at_ms: int | None = None
    details_json: str | None = None


@dataclass(frozen=True)
class CallRow(TokenColumns):
    """One model call and its usage."""

    call_id: int = 0
    run_id: str = ""
    node_id: str = ""
    iteration: int = 0
    attempt: int = 0
    agent: str = ""
    model: str | None = None
    simulated: int = 0
    context_tokens_stored: int = 0
    bucket: str = ""
    started_at_ms: int = 0
    finished_at_ms: int = 0
    kind: str = "model"
    detail_json: str | None = None

    @property
    def detail(self) -> dict[str, Any]:
        """What explains a retry or reconciliation row (empty for a plain call)."""
        value = _json(self.detail_json)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class BucketUsage(TokenColumns):
    """Calls and tokens that fell in one context-window bucket."""

    bucket: str = ""
    calls: int = 0


@dataclass(frozen=True)
class MemoryBlockRow:
    """What recall injected before a node's prompt (or the warning saying why nothing was)."""

    block_id: int
    run_id: str
    node_id: str
    iteration: int
    attempt: int = 1
    query: str | None = None
    banks_json: str | None = None
    text: str | None = None
    items_json: str = "[]"
    bytes_used: int = 0
    budget_bytes: int = 0
    truncated: int = 0
    warning: str | None = None
    degraded: int = 0
    duration_ms: int | None = None
    created_at_ms: int = 0

    @property
    def items(self) -> list[dict[str, Any]]:
        """The recalled items (each a dict; anything else is wrapped as ``{"value": ...}``)."""
        value = _json(self.items_json)
        if not isinstance(value, list):
            return []
        return [item if isinstance(item, dict) else {"value": item} for item in value]

    @property
    def banks(self) -> list[str]:
        """The banks (namespaces) recall searched."""
        value = _json(self.banks_json)
        if isinstance(value, list):
            return [str(v) for v in value]
        return [] if value is None else [str(value)]


@dataclass(frozen=True)
class MemorySummary:
    """The headline numbers of a node's memory block (for the node table)."""

    node_id: str
    iteration: int
    bytes_used: int = 0
    budget_bytes: int = 0
    truncated: int = 0
    warning: str | None = None
    degraded: int = 0


@dataclass(frozen=True)
class HandoffRow:
    """One handoff: a run stopped and continued in a fresh run with distilled state."""

    handoff_id: int
    from_run_id: str
    to_run_id: str | None
    trigger: str
    reason: str
    generation: int
    tokens_at_handoff: int | None = None
    carried_state_json: str = "{}"
    carried_bytes: int = 0
    created_at_ms: int = 0

    @property
    def carried_state(self) -> Any:
        """The distilled state the next run started from."""
        return _json(self.carried_state_json)


@dataclass(frozen=True)
class HandoffChain:
    """Runs linked by handoffs, oldest generation first."""

    run_ids: list[str]
    handoffs: list[HandoffRow] = field(default_factory=list)

    @property
    def key(self) -> str:
        """The chain's identity: its first run."""
        return self.run_ids[0]


@dataclass(frozen=True)
class WorkerRow:
    """A ``tether worker`` process as it last reported itself."""

    worker_id: str
    host: str
    pid: int
    started_at_ms: int
    heartbeat_at_ms: int
    runs_held: int = 0

    def is_alive(self, now_ms: int) -> bool:
        """Heartbeat recent enough (a killed worker stops beating)."""
        return now_ms - self.heartbeat_at_ms <= STALE_AFTER_MS


@dataclass(frozen=True)
class EventRow:
    """One entry of the append-only event log."""

    seq: int
    at_ms: int
    type: str
    run_id: str | None = None
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    payload_json: str | None = None


def _call_rows(rows: Iterable[sqlite3.Row]) -> list[CallRow]:
    out = []
    for row in rows:
        values = dict(row)
        values["context_tokens_stored"] = values.pop("context_tokens")
        out.append(CallRow(**values))
    return out


def histogram(rows: Sequence[BucketUsage]) -> list[BucketUsage]:
    """One entry per bucket in the BRIEF's order, empty buckets included."""
    by_label = {row.bucket: row for row in rows}
    return [by_label.get(label, BucketUsage(bucket=label)) for label in BUCKET_LABELS]


def sum_usage(rows: Iterable[TokenColumns]) -> TokenUsage:
    """Add token lanes over rows."""
    return sum((row.usage for row in rows), TokenUsage())


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

    async def events_since(self, seq: int, limit: int = 1000) -> list[EventRow]:
        """Events after ``seq``, oldest first, at most ``limit``."""
        return _build(EventRow, await self._rows(sql.EVENTS_SINCE, (seq, limit)))

    async def recent_events(self, limit: int = 50) -> list[EventRow]:
        """The newest ``limit`` events, newest first."""
        return _build(EventRow, await self._rows(sql.EVENTS_RECENT, (limit,)))

    # -- runs and nodes ----------------------------------------------------------------------

    async def recent_runs(self, limit: int = 200) -> list[RunRow]:
        """The newest ``limit`` runs, newest first."""
        return _build(RunRow, await self._rows(sql.RUNS_RECENT, (limit,)))

    async def active_runs(self, limit: int = 500) -> list[RunRow]:
        """Runs whose status is running (healthy or stale)."""
        return _build(RunRow, await self._rows(sql.RUNS_ACTIVE, (limit,)))

    async def run(self, run_id: str) -> RunRow | None:
        """One run, or None."""
        rows = _build(RunRow, await self._rows(sql.RUN_BY_ID, (run_id,)))
        return rows[0] if rows else None

    async def runs_by_ids(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """The runs with these ids that exist, keyed by id."""
        out: dict[str, RunRow] = {}
        ids = list(dict.fromkeys(run_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for row in _build(RunRow, await self._rows(sql.runs_by_ids(len(chunk)), chunk)):
                out[row.run_id] = row
        return out

    async def nodes(self, run_id: str, limit: int = 2000) -> list[NodeRow]:
        """A run's node iterations in start order."""
        return _build(NodeRow, await self._rows(sql.NODES_OF_RUN, (run_id, limit)))

    async def node_usage(self, run_id: str) -> dict[str, NodeUsage]:
        """Token usage per node iteration of a run, keyed like :attr:`NodeRow.key`."""
        rows = _build(NodeUsage, await self._rows(sql.NODE_USAGE_OF_RUN, (run_id,)))
        return {f"{row.node_id}#{row.iteration}": row for row in rows}

    async def attempts(
        self, run_id: str, node_id: str, iteration: int, limit: int = 100
    ) -> list[AttemptRow]:
        """The newest ``limit`` attempts of a node iteration, first first (the node row's
        ``attempts`` says how many there are in all)."""
        rows = await self._rows(sql.ATTEMPTS_OF_NODE, (run_id, node_id, iteration, limit))
        return _build(AttemptRow, reversed(rows))

    async def calls(
        self, run_id: str, node_id: str, iteration: int, limit: int = 500
    ) -> list[CallRow]:
        """The newest ``limit`` model calls of a node iteration, in the order they were made."""
        rows = await self._rows(sql.CALLS_OF_NODE, (run_id, node_id, iteration, limit))
        return _call_rows(reversed(rows))

    async def memory_block(
        self, run_id: str, node_id: str, iteration: int
    ) -> MemoryBlockRow | None:
        """The memory block recall built for a node iteration, or None."""
        rows = _build(
            MemoryBlockRow,
            await self._rows(sql.MEMORY_BLOCK_OF_NODE, (run_id, node_id, iteration)),
        )
        return rows[0] if rows else None

    async def memory_summaries(self, run_id: str) -> dict[str, MemorySummary]:
        """Per node iteration of a run: bytes used/budget, truncation and warning of its block."""
        rows = _build(MemorySummary, await self._rows(sql.MEMORY_BLOCKS_OF_RUN, (run_id,)))
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
            return _build(WorkerRow, await self._rows(sql.WORKERS_RECENT, (limit,)))
        except sqlite3.OperationalError:
            return []

    # -- tokens --------------------------------------------------------------------------------

    async def usage_by_bucket(
        self, run_id: str | None = None, node_id: str | None = None
    ) -> list[BucketUsage]:
        """Calls and tokens per context-window bucket for the workspace, a run or a node."""
        if run_id is not None and node_id is not None:
            rows = await self._rows(sql.USAGE_OF_NODE, (run_id, node_id))
        else:
            rows = await self._rows(sql.USAGE_ROLLUP, (run_id or "",))
        return histogram(_build(BucketUsage, rows))

    async def top_calls(
        self, run_id: str | None = None, node_id: str | None = None, limit: int = 10
    ) -> list[CallRow]:
        """The calls with the largest context windows in the workspace, a run or a node."""
        if run_id is None:
            rows = await self._rows(sql.TOP_CALLS_WORKSPACE, (limit,))
        elif node_id is None:
            rows = await self._rows(sql.TOP_CALLS_RUN, (run_id, limit))
        else:
            rows = await self._rows(sql.TOP_CALLS_NODE, (run_id, node_id, limit))
        return _call_rows(rows)

    async def recent_calls_of_run(self, run_id: str, limit: int = 300) -> list[CallRow]:
        """The run's newest ``limit`` calls, oldest first (a bounded series for charts)."""
        rows = await self._rows(sql.CALLS_OF_RUN_RECENT, (run_id, limit))
        return list(reversed(_call_rows(rows)))

    # -- handoffs ------------------------------------------------------------------------------

    async def handoff_chains(self, limit: int = 50, max_length: int = 50) -> list[HandoffChain]:
        """Chains of runs linked by handoffs, newest chain first.

        Starts from the newest ``limit`` handoffs and walks each chain through the handoff
        indexes, so the cost depends on the chains shown, not on the history kept.
        """
        recent = _build(HandoffRow, await self._rows(sql.HANDOFFS_RECENT, (limit,)))
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
                previous = _build(HandoffRow, rows)[0]
                if previous.handoff_id in {h.handoff_id for h in links}:
                    break
                links.insert(0, previous)
            # Walk forward to the newest generation.
            while len(links) < max_length and links[-1].to_run_id:
                rows = await self._rows(sql.HANDOFF_FROM_RUN, (links[-1].to_run_id,))
                if not rows:
                    break
                following = _build(HandoffRow, rows)[0]
                if following.handoff_id in {h.handoff_id for h in links}:
                    break
                links.append(following)
            seen.update(h.handoff_id for h in links)
            run_ids = [links[0].from_run_id] + [h.to_run_id or "" for h in links]
            chains.append(HandoffChain(run_ids=[r for r in run_ids if r], handoffs=links))
        return chains
