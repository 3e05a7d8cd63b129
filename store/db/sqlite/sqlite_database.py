"""The workspace database for asyncio programs (the engine, the dashboard): opening, validating
and migrating it, reads, and writes by group commit.

Every write is a function of a ``sqlite3`` connection (``work``) handed to
:meth:`Database.run_in_transaction` (or :meth:`Database.submit`). Writes queue up
(:mod:`store.db.write_queue`) while one is being committed; the next commit lets what is
ready on the event loop run for a few passes, then takes the whole queue in one
``BEGIN IMMEDIATE`` ... ``COMMIT`` (:func:`store.db.sqlite.sqlite_connection.run_group`; each
write keeps its own all-or-nothing meaning): writes that arrive together (nodes finishing at
the same moment) share one commit and, at the
``full`` durability level, one flush to disk. A write is acknowledged (its future resolves)
only once the commit holding it has returned, so anything that waits for a write sees it
durable at the workspace's level (:mod:`store.db.durability`). Writes are committed in the order
they were submitted.

``BEGIN IMMEDIATE`` takes the write lock up front, so two processes never deadlock upgrading a
read to a write; a busy lock is waited for (busy timeout) and retried with jittered backoff, so
"database is locked" never reaches a person unless another process holds the lock for minutes.

Before anything is written, an existing file is checked through SQLite only
(:mod:`store.db.sqlite.database_file`; nothing here ever opens the file itself): a file that is not
SQLite,
belongs to another program, or was written by a newer Tether is refused with one sentence and
left byte-for-byte untouched. A writer also runs ``PRAGMA quick_check`` when the file is small
enough for it to be cheap (:data:`store.db.sqlite.sqlite_connection.QUICK_CHECK_MAX_BYTES`). The
first time SQLite
reports the file corrupt, in any process, the damage is recorded (:mod:`store.workspace.damage`) and
no process writes to it again. Disk full, I/O errors and read-only files become one sentence
(:mod:`store.db.sqlite.storage_guard`, exit code 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import aiosqlite

from store.clock import SYSTEM_CLOCK, Clock
from store.db.seam import Database, Params
from store.db.sqlite.database_file import DatabaseFileInfo, inspect_database_file, readonly_uri
from store.db.sqlite.sqlite_connection import (
    BUSY_TIMEOUT_MS,
    RETRY_ATTEMPTS,
    Outcome,
    Work,
    before_open,
    busy_backoff_s,
    cannot_open,
    cannot_upgrade,
    configure,
    connect,
    durability_pragmas,
    is_busy,
    migrate,
    run_group,
    run_group_unflushed,
)
from store.db.sqlite.sqlite_schema import SCHEMA_VERSION
from store.db.sqlite.storage_guard import StorageGuard
from store.db.write_queue import WriteQueue
from store.errors import StorageError
from store.workspace.layout import Workspace

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Database",
    "Row",
    "SqliteDatabase",
    "forget_database",
    "inspect_database_file",
    "open_databases",
]

Row = sqlite3.Row

T = TypeVar("T")

_OPEN: weakref.WeakSet[SqliteDatabase] = weakref.WeakSet()


def open_databases() -> list[SqliteDatabase]:
    """Databases opened in this process and not closed yet (the test suite checks for leaks)."""
    return list(_OPEN)


def forget_database(db: SqliteDatabase) -> None:
    """Stop counting ``db`` as open (after its worker was stopped some other way)."""
    _OPEN.discard(db)


class SqliteDatabase(StorageGuard, Database):
    """A workspace database in one SQLite file (WAL): the embedded default."""

    backend = "sqlite"

    def __init__(
        self,
        conn: aiosqlite.Connection,
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
        self._closed = False
        _OPEN.add(self)
        self._write_lock = asyncio.Lock()
        # A second connection used on the event-loop thread for commits that get the lock at
        # once and need no flush to disk (see _commit); opened on first use.
        self._direct: sqlite3.Connection | None = None
        self.writes = WriteQueue(self._committed, self.converted)

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        workspace: Workspace,
        *,
        create: bool = True,
        clock: Clock = SYSTEM_CLOCK,
        durability: str | None = None,
        read_only: bool = False,
    ) -> SqliteDatabase:
        """Open (and, when ``create`` is true, create and migrate) the workspace database.

        ``durability`` overrides the workspace's configured level (``normal`` or ``full``).
        With ``read_only`` the file is opened with SQLite's ``mode=ro``: nothing is created,
        migrated or chmod-ed, and every write fails with a StorageError.

        Raises:
            NotFoundError: ``create`` is false (or ``read_only``) and there is no database, or
                (``read_only``) the file is empty.
            WorkspaceError: the file cannot be used (a link or special file, not SQLite,
                another program's database, or a newer schema).
            StorageError: damaged (DamagedDatabaseError), read-only for a writer, unreadable,
                disk full or an I/O error.
            InvalidInputError: the configured durability level is unknown.
        """
        level, info = before_open(
            workspace, create=create, durability=durability, read_only=read_only
        )
        if read_only:
            assert info is not None
            return await cls._open_readonly(workspace, info, clock, level)
        path = workspace.database_path
        conn = await _connect(workspace, lambda: connect(path))
        db = cls(conn, workspace, clock, level)
        try:
            with db.storage_errors():
                await conn._execute(configure, conn._conn, path, level)
                if info is None or info.schema_version < SCHEMA_VERSION:
                    async with db._write_lock:
                        await db._retry_busy(lambda: conn._execute(migrate, conn._conn, path))
        except BaseException:
            await db.close()
            raise
        return db

    @classmethod
    async def _open_readonly(
        cls, workspace: Workspace, info: DatabaseFileInfo, clock: Clock, level: str
    ) -> SqliteDatabase:
        path = workspace.database_path
        if info.schema_version < SCHEMA_VERSION:
            # An older Tether wrote it: the one change a read makes is the upgrade it needs.
            try:
                await (await cls.open(workspace, create=False, clock=clock)).close()
            except StorageError as error:
                raise cannot_upgrade(path, error) from None
        conn = await _connect(workspace, lambda: connect(readonly_uri(path), uri=True))
        db = cls(conn, workspace, clock, level, read_only=True)
        try:
            with db.storage_errors():
                await conn.execute("PRAGMA query_only = 1")
        except BaseException:
            await db.close()
            raise
        return db

    async def close(self) -> None:
        """Commit what is queued, then close the connections (the worker thread stops with
        them). Safe to call twice."""
        if self._closed:
            return
        try:
            await self.flush()
        finally:
            self._closed = True
            _OPEN.discard(self)
            if self._direct is not None:
                direct, self._direct = self._direct, None
                with contextlib.suppress(sqlite3.Error):
                    direct.close()
            await self._conn.close()

    async def writer_pragmas(self) -> dict[str, dict[str, str]]:
        """``journal_mode`` and ``synchronous`` as read back now from every connection of this
        process that writes the workspace (for benchmarks and ``tether doctor``-style checks)."""
        found = {"worker": await self._conn._execute(durability_pragmas, self._conn._conn)}
        if self._direct is not None:
            found["direct"] = durability_pragmas(self._direct)
        return found

    # -- reading ---------------------------------------------------------------------------

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return every row (the cursor is exhausted, so no snapshot stays open)."""
        with self.storage_errors():
            return list(await self._conn.execute_fetchall(sql, params))

    async def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits.

        A cheap way for a long-lived view to tell whether re-reading is worth it.
        """
        return int(await self.fetch_value("PRAGMA data_version"))

    async def run_read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work``, which only reads, on the connection's own thread: several queries for
        one thread hop (recall's hot path; each hop can cost milliseconds on a busy machine).

        Like :meth:`fetch_all`, no transaction is opened: each statement reads the latest
        committed state.
        """
        with self.storage_errors():
            result: T = await self._conn._execute(work, self._conn._conn)
        return result

    # -- writing ---------------------------------------------------------------------------

    def submit(
        self, work: Callable[[sqlite3.Connection], T], *, flush: bool = True
    ) -> asyncio.Future[T]:
        """Queue a write for the next group commit and return its future (see the module
        docstring); await it to know the write is committed at the workspace's level.

        ``flush=False`` is for writes nothing needs to survive a power cut (an attempt's start:
        a run interrupted by one abandons its running attempts anyway). At the ``full`` level a
        group made only of such writes is committed without a flush to disk: committed, so it
        survives the process being killed, and flushed with the next flushed commit (the WAL
        is flushed whole). At ``normal`` the flag changes nothing.

        ``work`` must only touch the database: it may be run again from the start when the
        write lock stays busy. An exception it raises undoes its own statements and is set on
        its future.
        """
        return self.writes.submit(work, flush, self.check_writable)

    async def run_in_transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in a write transaction and return its result once committed."""
        return await self.submit(work)

    async def flush(self) -> None:
        """Wait until every queued write is committed."""
        await self.writes.flush()

    async def _committed(
        self, works: list[Work], flush: bool, _queued_at: float
    ) -> list[Outcome]:
        with self.storage_errors():
            return await self._commit(works, flush)

    async def _commit(self, works: list[Work], flush: bool) -> list[Outcome]:
        """One group commit. A commit that needs no flush to disk (every commit at ``normal``,
        an unflushed group at ``full``) is tried right here, when no other write of this
        process is in flight, on a second connection whose busy timeout is zero: it costs no
        thread hand-off; if another process holds the lock the attempt fails at once with
        nothing written, and the worker thread waits instead. A flushed commit at ``full``
        always runs on the worker thread, so the event loop keeps running tasks (and queueing
        their writes for the next commit) while the disk flushes."""
        full = self.durability == "full"
        group = run_group_unflushed if full and not flush else run_group
        if (not full or not flush) and not self._write_lock.locked():
            try:
                return group(self._direct_connection(), works)
            except sqlite3.OperationalError as error:
                if not is_busy(error):
                    raise
        async with self._write_lock:
            outcomes: list[Outcome] = await self._retry_busy(
                lambda: self._conn._execute(group, self._conn._conn, works)
            )
            return outcomes

    async def _retry_busy(self, attempt_fn: Callable[[], Any]) -> Any:
        for attempt in range(RETRY_ATTEMPTS):
            try:
                return await attempt_fn()
            except sqlite3.OperationalError as error:
                if not is_busy(error) or attempt == RETRY_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(busy_backoff_s(attempt))
        raise AssertionError("unreachable")

    def _direct_connection(self) -> sqlite3.Connection:
        if self._direct is None:
            path = self.workspace.database_path
            direct = connect(path, busy_timeout_ms=0)
            configure(direct, path, self.durability, busy_timeout_ms=0, set_wal=False)
            self._direct = direct
        return self._direct


async def _connect(
    workspace: Workspace, connector: Callable[[], sqlite3.Connection]
) -> aiosqlite.Connection:
    """An aiosqlite connection made by ``connector`` on its worker thread; a failure to open is
    one sentence."""
    conn = aiosqlite.Connection(connector, iter_chunk_size=64)
    try:
        await conn
    except (OSError, sqlite3.Error) as error:
        raise cannot_open(workspace, error) from None
    return conn
