"""The workspace database in the calling thread, for the short commands of the command line.

:class:`DirectDatabase` offers the same methods as :class:`store.db.sqlite.sqlite_database.Database`
(see :mod:`store.db.seam`), so the command line calls the very same store methods (and SQL) as
the engine and the dashboard. Its coroutines never wait on anything: each statement runs at once
in this thread, so :func:`run_now` drives a store call to its end without an event loop, and
``tether memory get`` starts without importing asyncio or starting a thread.

Writes are one ``BEGIN IMMEDIATE`` ... ``COMMIT`` each, at the workspace's durability level,
waiting on the busy timeout and retrying with jittered backoff like every other writer. Storage
problems (disk full, I/O, damage, a read-only handle) are one sentence, as everywhere
(:mod:`store.db.sqlite.storage_guard`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from store.clock import SYSTEM_CLOCK, Clock
from store.db.seam import Database, Params
from store.db.sqlite.database_file import readonly_uri
from store.db.sqlite.sqlite_connection import (
    RETRY_ATTEMPTS,
    before_open,
    busy_backoff_s,
    cannot_open,
    cannot_upgrade,
    configure,
    connect,
    is_busy,
    migrate,
    run_transaction,
)
from store.db.sqlite.sqlite_schema import SCHEMA_VERSION
from store.db.sqlite.storage_guard import StorageGuard
from store.errors import StorageError
from store.workspace.layout import Workspace

T = TypeVar("T")


def run_now(awaitable: Awaitable[T]) -> T:
    """Run an awaitable that never suspends (a store call on a :class:`DirectDatabase`) to its
    end and return its result."""
    steps = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    close = getattr(steps, "close", None)
    if close is not None:
        close()
    raise RuntimeError("a direct database call tried to wait on an event loop")


class _Committed:
    """The awaitable :meth:`DirectDatabase.submit` returns: the write already ran."""

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    def __await__(self) -> Generator[Any, None, Any]:
        if self._error is not None:
            raise self._error
        return self._value
        yield  # makes this a generator; never reached


class DirectDatabase(StorageGuard, Database):
    """An open workspace database used from one thread without an event loop."""

    backend = "sqlite"

    def __init__(
        self,
        conn: sqlite3.Connection,
        workspace: Workspace,
        clock: Clock,
        durability: str,
        *,
        read_only: bool = False,
    ) -> None:
        self._conn = conn
        self.workspace = workspace
        self.clock = clock
        self.durability = durability
        self.read_only = read_only

    @classmethod
    def open_now(
        cls,
        workspace: Workspace,
        *,
        create: bool = True,
        clock: Clock = SYSTEM_CLOCK,
        durability: str | None = None,
        read_only: bool = False,
    ) -> DirectDatabase:
        """Open (and with ``create``, create and migrate) the workspace database; the same
        checks, errors and ``read_only`` meaning as
        :meth:`store.db.sqlite.sqlite_database.SqliteDatabase.open`."""
        level, info = before_open(
            workspace, create=create, durability=durability, read_only=read_only
        )
        path = workspace.database_path
        if read_only and info is not None and info.schema_version < SCHEMA_VERSION:
            # An older Tether wrote it: the one change a read makes is the upgrade it needs.
            try:
                cls.open_now(workspace, create=False, clock=clock).close_now()
            except StorageError as error:
                raise cannot_upgrade(path, error) from None
        try:
            conn = connect(readonly_uri(path), uri=True) if read_only else connect(path)
        except (OSError, sqlite3.Error) as error:
            raise cannot_open(workspace, error) from None
        db = cls(conn, workspace, clock, level, read_only=read_only)
        try:
            with db.storage_errors():
                if read_only:
                    conn.execute("PRAGMA query_only = 1")
                else:
                    configure(conn, path, level)
                    if info is None or info.schema_version < SCHEMA_VERSION:
                        _retry_busy(lambda: migrate(conn, path))
        except BaseException:
            conn.close()
            raise
        return db

    def close_now(self) -> None:
        """Close the connection (without an awaitable)."""
        self._conn.close()

    async def flush(self) -> None:
        """Nothing is ever queued here: every write commits before it returns."""

    async def close(self) -> None:
        """Close the connection."""
        self.close_now()

    async def fetch_all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Every row of a query."""
        with self.storage_errors():
            return self._conn.execute(sql, params).fetchall()

    async def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits."""
        return int(await self.fetch_value("PRAGMA data_version"))

    async def run_read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` (reads only) on the connection."""
        with self.storage_errors():
            return work(self._conn)

    async def run_in_transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one write transaction and return its result."""
        return self._write_now(work)

    def _write_now(self, work: Callable[[sqlite3.Connection], T]) -> T:
        self.check_writable()
        with self.storage_errors():
            return _retry_busy(lambda: run_transaction(self._conn, work))

    def submit(self, work: Callable[[sqlite3.Connection], T], *, flush: bool = True) -> _Committed:
        """Run ``work`` in a transaction now (always flushed at the workspace's level);
        awaiting the result gives its value or error."""
        try:
            return _Committed(self._write_now(work))
        except Exception as error:
            return _Committed(error=error)


def _retry_busy(attempt_fn: Callable[[], T]) -> T:
    for attempt in range(RETRY_ATTEMPTS):
        try:
            return attempt_fn()
        except sqlite3.OperationalError as error:
            if not is_busy(error) or attempt == RETRY_ATTEMPTS - 1:
                raise
            time.sleep(busy_backoff_s(attempt))
    raise AssertionError("unreachable")
