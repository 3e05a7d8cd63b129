"""The event log of run records: appending events inside a write's transaction, and reading
them back by sequence number (``events.seq``, monotonic).

:class:`EventLog` is the base of :class:`store.runs.run_store.RunStore`; every area of the store
appends the events describing a write in the same transaction as the write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from store.db.seam import Connection, Database
from store.errors import LeaseLost
from store.model.history_records import EventRecord
from store.model.json_columns import dump_recorded_json
from store.model.run_records import NewEvent
from store.runs import events_sql as sql
from store.runs import queue_sql
from store.runs.fences import held_tokens

T = TypeVar("T")

MAX_READ_LIMIT = 100_000
"""The most rows one read returns, whatever limit the caller asks for."""


def insert_events(conn: Connection, now: int, events: Iterable[NewEvent]) -> None:
    """Append ``events`` inside the caller's transaction, all at ``now``, in their order (one
    statement for up to :data:`~store.runs.events_sql.EVENTS_PER_INSERT` of them); while
    ``conn`` runs writes that hold their events (:class:`HeldEvents`), they join what is held
    instead."""
    values: list[Any] = []
    for e in events:
        values += (now, e.type, e.run_id, e.node_id, e.iteration, e.attempt, _payload(e))
    held = _HOLDING.get(id(conn)) if _HOLDING else None
    if held is not None:
        held.events.extend(values)
        return
    _insert_rows(conn, values)


def add_summed(
    conn: Connection, statement: str, key: tuple[Any, ...], row: Mapping[str, Any],
    summed: tuple[str, ...], latest: tuple[str, ...] = (),
) -> Callable[[], Any]:
    """Run ``statement``, an upsert that only adds ``row``'s ``summed`` parameters to a
    rollup's row (usage by bucket, by hour, spend per day), inside the caller's transaction;
    while ``conn`` runs writes that hold their rows (:class:`HeldEvents`), the rows of the same
    statement and ``key`` (what picks the rollup's row) are summed instead and the statement
    runs once for each when the held writes end: the totals a run of calls adds, not one
    statement per call. A summed ``cost_usd`` of None (unpriced: the statement adds 0) stays
    None until a priced row joins it; each ``latest`` parameter is the last row's that gives
    one (what the statement sets rather than adds: a time, a count). Returns what reads the
    first row the statement returns (``RETURNING``; None when it returns none): while held,
    only once the held writes have ended (:func:`holding` says so)."""
    held = _HOLDING.get(id(conn)) if _HOLDING else None
    if held is None:
        return conn.execute(statement, row).fetchone
    whose = (statement, key)
    first = held.sums.get(whose)
    if first is None:
        held.sums[whose] = row  # copied only when a second row joins it
    else:
        total = held.copied.get(whose)
        if total is None:
            total = held.copied[whose] = dict(first)
            held.sums[whose] = total
        for name in summed:
            value = row[name]
            if value is not None:
                before = total[name]
                total[name] = value if before is None else before + value
        for name in latest:
            if row[name] is not None:
                total[name] = row[name]
    returned = held.returned.setdefault(whose, [])
    return lambda: returned[0] if returned else None


def holding(conn: Connection) -> bool:
    """Whether ``conn`` runs writes that hold their rows right now (:class:`HeldEvents`)."""
    return bool(_HOLDING) and id(conn) in _HOLDING


def _insert_rows(conn: Connection, values: list[Any]) -> None:
    width = 7 * sql.EVENTS_PER_INSERT
    for start in range(0, len(values), width):
        chunk = values[start:start + width]
        conn.execute(sql.insert_events_text(len(chunk) // 7), chunk)


class HeldEvents:
    """The events of consecutive writes of one SQLite transaction (an attempt's start, its
    calls, its end, and the next node's...), appended by one statement when the run of those
    writes ends (:class:`store.db.seam.HeldRows`): in the order the writes made them, each at
    its write's time, before any other write of the transaction runs and before it commits;
    and the rollup rows their calls add to (:func:`add_summed`), summed, one statement each,
    as is what their calls and ends change in their run's row (tokens, progress).
    The writes that hold their events read no events and no rollup. What is held is the
    connection's (one transaction at a time each), so two connections' groups never mix
    their events."""

    def open(self, conn: Any) -> None:
        """Hold every event appended on ``conn`` from now on (the writes' own, and those of
        what they call: a steer decided in an attempt's start), so their order is kept, and
        every rollup row added (:func:`add_summed`)."""
        _HOLDING[id(conn)] = _Held()

    def close(self, conn: Any) -> None:
        """Append what is held, in one statement (per 500 events), add each rollup's summed
        row, and stop holding."""
        held = _HOLDING.pop(id(conn), None)
        if held is None:
            return
        if held.events:
            _insert_rows(conn, held.events)
        for whose, row in held.sums.items():
            first = conn.execute(whose[0], row).fetchone()
            returned = held.returned.get(whose)
            if returned is not None:
                returned.append(first)

    def discard(self, conn: Any) -> None:
        """Forget what is held (its transaction is rolled back) and stop holding."""
        _HOLDING.pop(id(conn), None)


class _Held:
    """What one connection's holding writes have appended so far."""

    __slots__ = ("copied", "events", "returned", "sums")

    def __init__(self) -> None:
        self.events: list[Any] = []
        """The event rows, flat, seven values each."""
        self.sums: dict[tuple[str, tuple[Any, ...]], Mapping[str, Any]] = {}
        """Each rollup row's parameters summed so far, by statement and key."""
        self.copied: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}
        """The sums more than one row made: copies of the first (the caller's own row is never
        changed)."""
        self.returned: dict[tuple[str, tuple[Any, ...]], list[Any]] = {}
        """The first row each summed statement returns, once it has run."""


_HOLDING: dict[int, _Held] = {}
"""What is held for each connection (by ``id``) running writes that hold their rows: it
stops holding before it commits or rolls back."""

_HELD = HeldEvents()


class _HoldingEvents:
    """A write whose events join the :class:`HeldEvents` its group commit opens for it."""

    def __init__(self, work: Callable[[Any], Any], held: HeldEvents) -> None:
        self.work = work
        self.held_rows = held

    def __call__(self, conn: Any) -> Any:
        return self.work(conn)


def event_params(events: Sequence[NewEvent]) -> dict[str, Any]:
    """The parameters of :func:`store.runs.events_sql.named_event_rows` for ``events``."""
    params: dict[str, Any] = {}
    for n, e in enumerate(events):
        params.update({
            f"e{n}_type": e.type, f"e{n}_run_id": e.run_id, f"e{n}_node_id": e.node_id,
            f"e{n}_iteration": e.iteration, f"e{n}_attempt": e.attempt,
            f"e{n}_payload_json": _payload(e),
        })
    return params


def _payload(event: NewEvent) -> str | None:
    return None if event.payload is None else dump_recorded_json(dict(event.payload))


class EventLog:
    """Appends and reads events on an open :class:`~store.db.sqlite.sqlite_database.Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def now_ms(self) -> int:
        return self.db.clock.now_ms()

    async def _write(self, run_ids: Iterable[str | None], work: Callable[[Any], T]) -> T:
        """Run ``work`` in one transaction, fenced for every run of ``run_ids`` this process
        holds by lease (:attr:`Database.leases`): the transaction first checks that the run is
        still held under the same token, and raises :class:`LeaseLost` (writing nothing) if
        another worker has claimed it since."""
        return await self._submit(run_ids, work)

    def _submit(
        self, run_ids: Iterable[str | None], work: Callable[[Any], T], *, flush: bool = True,
        hold: bool = False,
    ) -> Awaitable[T]:
        """:meth:`_write` as a queued write (:meth:`Database.submit`): committed in submission
        order; await the result to know it is committed. ``hold``: ``work`` reads no events,
        so on SQLite the events it appends join those of the writes beside it in its group
        commit (:class:`HeldEvents`)."""
        held = held_tokens(self.db)
        fences = [
            (run_id, held[run_id])
            for run_id in dict.fromkeys(run_ids)
            if run_id is not None and run_id in held
        ]
        submitted: Callable[[Any], T] = work
        if fences:
            def fenced(conn: Any) -> T:
                for run_id, token in fences:
                    hold_lease(conn, run_id, token)
                return work(conn)

            submitted = fenced
        if hold:
            submitted = _HoldingEvents(submitted, _HELD)
        return self.db.submit(submitted, flush=flush)

    # -- events -----------------------------------------------------------------------------

    async def append_events(self, events: Sequence[NewEvent]) -> None:
        """Append many events in one transaction (each gets the next ``seq``)."""
        if not events:
            return

        def work(conn: Connection) -> Any:
            insert_events(conn, self.now_ms, events)

        await self._write((e.run_id for e in events), work)

    async def append_event(
        self,
        type: str,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        iteration: int | None = None,
        attempt: int | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one event."""
        await self.append_events([NewEvent(type, run_id, node_id, iteration, attempt, payload)])

    async def last_event_seq(self) -> int:
        """The highest event sequence number so far (0 when there is none)."""
        return int(await self.db.fetch_value(sql.LAST_EVENT_SEQ) or 0)

    async def events_since(
        self, seq: int, *, run_id: str | None = None, limit: int = 1000
    ) -> list[EventRecord]:
        """Events with ``seq`` greater than the given one, oldest first (uses the seq key)."""
        limit = max(1, min(limit, MAX_READ_LIMIT))
        if run_id is None:
            rows = await self.db.fetch_all(sql.EVENTS_SINCE, (seq, limit))
        else:
            rows = await self.db.fetch_all(sql.EVENTS_SINCE_RUN, (run_id, seq, limit))
        return [EventRecord.from_row(r) for r in rows]

    async def recent_events(self, k: int, *, run_id: str | None = None) -> list[EventRecord]:
        """The most recent ``k`` events, oldest first."""
        k = max(1, min(k, MAX_READ_LIMIT))
        if run_id is None:
            rows = await self.db.fetch_all(sql.RECENT_EVENTS, (k,))
        else:
            rows = await self.db.fetch_all(sql.RECENT_EVENTS_RUN, (run_id, k))
        return [EventRecord.from_row(r) for r in reversed(rows)]


def hold_lease(conn: Any, run_id: str, token: int) -> None:
    """Inside a write transaction: check (and on PostgreSQL lock) that ``run_id`` is still held
    under fencing token ``token``; raise :class:`LeaseLost` otherwise."""
    if conn.execute(queue_sql.HOLD_LEASE, {"run_id": run_id, "token": token}).fetchone() is None:
        raise LeaseLost(
            f"Run {run_id} was claimed by another worker (this one's lease expired); "
            "nothing was written."
        )
