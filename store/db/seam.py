"""The storage seam: what every workspace database offers the store, whatever holds it.

A workspace lives in SQLite (``store/db/sqlite/sqlite_database.py``, the embedded default) or in
PostgreSQL
(``store/db/postgres/pg_database.py``, a team workspace). Both implement :class:`Database`; the
store modules call only these methods, so facts, notes, runs and the rest are written once.

How statements reach the right backend: every statement is written once, in SQLite's
spelling, in the ``*_sql.py`` module of its area (``store/memory/memory_sql.py``...), and run
through a :class:`Connection`. SQLite runs that text as is; the PostgreSQL connection renders it
with :mod:`store.db.dialect` (markers, limits, ``rowid``...), or takes the statement's own
PostgreSQL text where the SQL really differs. The backend is chosen once, when the workspace
opens, by :mod:`store.db.backends`.

Rows behave like ``sqlite3.Row`` on both backends: by index, by column name, ``keys()``,
``tuple(row)`` and ``dict(row)``.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar, cast

from store.clock import Clock

if TYPE_CHECKING:
    from store.workspace.layout import Workspace

T = TypeVar("T")
Params = Sequence[Any] | Mapping[str, Any]


class RowLike(Protocol):
    """A result row: by index or column name, like ``sqlite3.Row``."""

    def __getitem__(self, key: int | str) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Connection(Protocol):
    """The part of ``sqlite3.Connection`` the store's transaction callbacks use.

    ``sqlite3.Connection`` satisfies it as is; :class:`store.db.postgres.pg_connection.PgConnection`
    adapts a psycopg connection to it.
    """

    def execute(self, sql: str, parameters: Params = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Params], /) -> Any: ...


class Database(abc.ABC):
    """An open workspace database shared by the memory store and the run records (opened by
    :func:`store.db.backends.open_database`, the one place a backend is chosen).

    Writes go through :meth:`run_in_transaction` (one short transaction per call; ``work`` may
    be re-run from the start when the backend asks for a retry) or :meth:`execute`; reads
    through :meth:`fetch_all` and friends or :meth:`run_read`, none of which holds a
    transaction open after it returns.
    """

    backend: str = ""
    """``"sqlite"`` or ``"postgresql"``."""

    workspace: Workspace
    clock: Clock

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every connection (and worker thread) this database holds."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def leases(self) -> dict[str, int]:
        """Fencing tokens of the runs this process holds by lease (run id -> token): every
        write of such a run first checks that the run is still held under its token."""
        held: dict[str, int] | None = self.__dict__.get("_leases")
        if held is None:
            held = self.__dict__["_leases"] = {}
        return held

    # -- reading ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def fetch_all(self, sql: str, params: Params = ()) -> list[Any]:
        """Run a query and return every row (no snapshot stays open afterwards)."""

    async def fetch_one(self, sql: str, params: Params = ()) -> Any:
        """Run a query and return its first row, or None."""
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def fetch_value(self, sql: str, params: Params = ()) -> Any:
        """Run a query and return the first column of its first row, or None."""
        row = await self.fetch_one(sql, params)
        return None if row is None else row[0]

    @abc.abstractmethod
    async def run_read(self, work: Callable[[Any], T]) -> T:
        """Run ``work(conn)``, which only reads, in one hop to the database: several queries
        for the price of one (recall's hot path). No transaction is held afterwards."""

    @abc.abstractmethod
    async def data_version(self) -> int:
        """A number that moves when another connection commits (cheap change detection)."""

    # -- writing ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def run_in_transaction(self, work: Callable[[Any], T]) -> T:
        """Run ``work(conn)`` inside one short write transaction and return its result.

        ``work`` must only touch the database: it may be re-run from the start when the backend
        asks for a retry. An exception rolls everything back and propagates.
        """

    def submit(self, work: Callable[[Any], T], *, flush: bool = True) -> Awaitable[T]:
        """Queue ``work`` as a write and return an awaitable of its result, without waiting:
        writes submitted this way are committed in the order they were submitted (the engine
        queues a node's end, then its dependents' starts behind it). ``flush=False``: the write
        need not survive a power cut on its own (see :mod:`store.db.durability`).

        This default runs each write in a transaction of its own, one after the other; the
        SQLite and PostgreSQL backends group the queued writes into shared commits
        (store/db/write_queue.py).
        """
        import asyncio

        previous: asyncio.Future[Any] | None = self.__dict__.get("_last_submitted")

        async def in_order() -> T:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            return await self.run_in_transaction(work)

        task = asyncio.ensure_future(in_order())
        task.add_done_callback(retrieved)
        self.__dict__["_last_submitted"] = task
        return task

    async def flush(self) -> None:
        """Wait until every submitted write is committed."""
        import asyncio

        last: asyncio.Future[Any] | None = self.__dict__.get("_last_submitted")
        if last is not None and not last.done():
            await asyncio.wait([last])

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one write statement in its own transaction; returns the number of changed rows."""

        def work(conn: Connection) -> int:
            return int(conn.execute(sql, params).rowcount)

        return await self.run_in_transaction(work)


class Deferred:
    """A value a write returns, read once its transaction's statements have all been sent
    (PostgreSQL's pipelined group commit); resolved before the write's future gets it."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], Any]) -> None:
        self._read = read

    def resolve(self) -> Any:
        """The value (its statement's result has arrived by now)."""
        return self._read()


class HeldRows(Protocol):
    """Rows that consecutive writes of one transaction append to a table (or add to a rollup's
    row), held back and written by one statement when that run of writes ends (before a
    write that holds none, and before the ``COMMIT``). A write carrying one as its
    ``held_rows`` attribute asks the backend's group commit for it; a backend that does not
    hold rows (PostgreSQL) leaves it closed, and the write's rows then go as it runs.
    Nothing may read such a table inside the run of writes that hold its rows."""

    def open(self, conn: Any) -> None:
        """Hold the rows of the writes run on ``conn`` from now on."""

    def close(self, conn: Any) -> None:
        """Write what is held (statements on ``conn``) and stop holding."""

    def discard(self, conn: Any) -> None:
        """Forget what is held for ``conn`` (its transaction is being rolled back) and stop
        holding."""


def read_later(conn: Any, read: Callable[[], T]) -> T:
    """``read()`` at once, or, on a connection where reading waits for the server
    (``waits_for_results``), once the transaction's statements have all been sent: for the
    value a write returns at its end, so that reading it costs no round trip of its own."""
    if getattr(conn, "waits_for_results", False):
        return cast(T, Deferred(read))
    return read()


def resolved(value: T) -> T:
    """``value``, or what it stands for when it was deferred (:func:`read_later`)."""
    return cast(T, value.resolve()) if isinstance(value, Deferred) else value


def retrieved(write: Any) -> None:
    """Mark a queued write's failure as seen (a done callback). Whoever awaits the write still
    gets the error; one nobody awaits any more (its execution already stopped for another
    reason: a lost lease, an outage) must not print "Task exception was never retrieved" with
    a traceback on the terminal."""
    if not write.cancelled():
        write.exception()
