"""Opening, validating and migrating the workspace database, and running short transactions.

All writes go through :meth:`Database.transaction`, which takes the write lock up front
(``BEGIN IMMEDIATE``) so two processes never deadlock upgrading a read to a write, waits on the
busy timeout, and retries with jittered backoff if the lock stays busy. "database is locked"
therefore never reaches a person unless another process holds the lock for minutes.

Before anything is written, an existing file is checked through SQLite only
(:mod:`store.database_file`; nothing here ever opens the file itself): a file that is not SQLite,
belongs to another program, or was written by a newer Tether is refused with one sentence and
left byte-for-byte untouched. A writer also runs ``PRAGMA quick_check`` when the file is small
enough for it to be cheap (:data:`QUICK_CHECK_MAX_BYTES`). The first time SQLite reports the file
corrupt, in any process, the damage is recorded (:mod:`store.damage`) and no process writes to
it again. Disk full, I/O errors and read-only files become one sentence
(:mod:`store.storage_errors`, exit code 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sqlite3
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from store.backend import Database
from store.clock import SYSTEM_CLOCK, Clock
from store.damage import record_damage, recorded_damage
from store.database_file import (
    DatabaseFileInfo,
    database_file_exists,
    inspect_database_file,
    read_file_info,
    readonly_uri,
)
from store.errors import DamagedDatabaseError, NotFoundError, StorageError, WorkspaceError
from store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from store.storage_errors import recovery_hint, storage_error
from store.workspace import Workspace

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Database",
    "Row",
    "SqliteDatabase",
    "forget_database",
    "inspect_database_file",
    "open_databases",
]

BUSY_TIMEOUT_MS = 30_000
QUICK_CHECK_MAX_BYTES = 32 * 1024 * 1024
"""Writers quick-check files up to this size when they open them (about 40 ms at the limit)."""
_RETRY_ATTEMPTS = 8
_RETRY_BASE_S = 0.05
_RETRY_MAX_S = 2.0

Row = sqlite3.Row
T = TypeVar("T")
Params = Sequence[Any] | dict[str, Any]

_OPEN: weakref.WeakSet[SqliteDatabase] = weakref.WeakSet()


def open_databases() -> list[SqliteDatabase]:
    """Databases opened in this process and not closed yet (the test suite checks for leaks)."""
    return list(_OPEN)


def forget_database(db: SqliteDatabase) -> None:
    """Stop counting ``db`` as open (after its worker was stopped some other way)."""
    _OPEN.discard(db)


def _is_busy(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, sqlite3.OperationalError) and (
        "locked" in text or "busy" in text
    )


class SqliteDatabase(Database):
    """A workspace database in one SQLite file (WAL): the embedded default."""

    backend = "sqlite"

    def __init__(
        self,
        conn: aiosqlite.Connection,
        workspace: Workspace,
        clock: Clock,
        *,
        read_only: bool = False,
    ) -> None:
        self._conn = conn
        self.workspace = workspace
        self.clock = clock
        self.read_only = read_only
        self._write_lock = asyncio.Lock()
        # A second connection used on the event-loop thread for short writes that get the
        # lock at once (see run_in_transaction); opened on first use.
        self._direct: sqlite3.Connection | None = None
        self._damage: DamagedDatabaseError | None = None
        self._closed = False
        _OPEN.add(self)

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        workspace: Workspace,
        *,
        create: bool = True,
        clock: Clock = SYSTEM_CLOCK,
        read_only: bool = False,
    ) -> SqliteDatabase:
        """Open (and, when ``create`` is true, create and migrate) the workspace database.

        With ``read_only`` the file is opened with SQLite's ``mode=ro``: nothing is created,
        migrated or chmod-ed, and every write fails with a StorageError.

        Raises:
            NotFoundError: ``create`` is false (or ``read_only``) and there is no database, or
                (``read_only``) the file is empty.
            WorkspaceError: the file cannot be used (a link or special file, not SQLite,
                another program's database, or a newer schema).
            StorageError: damaged (DamagedDatabaseError), read-only for a writer, unreadable,
                disk full or an I/O error.
        """
        path = workspace.database_path
        info: DatabaseFileInfo | None = None
        exists = database_file_exists(path)
        damage = None if read_only or not exists else recorded_damage(workspace)
        if damage is not None:
            raise DamagedDatabaseError(
                f"{path} was found damaged earlier ({damage.rstrip('.')}); Tether will not "
                f"write to it, {recovery_hint()}."
            )
        if exists:
            # Writers quick-check small files here, over a read-only connection: a damaged
            # file is refused before a writable connection could change anything.
            info = read_file_info(
                path, quick_check_max_bytes=0 if read_only else QUICK_CHECK_MAX_BYTES
            )
        elif not create or read_only:
            raise NotFoundError(f"There is no Tether workspace at {workspace.root}.")
        if read_only:
            assert info is not None
            return await cls._open_readonly(workspace, info, clock)
        if info is not None and info.empty and not create:
            # A 0-byte (or schema-less) file is not a workspace yet; only a creating command
            # turns it into one.
            raise NotFoundError(f"There is no Tether workspace at {workspace.root} yet.")
        conn = await _connect(workspace, str(path), create=create)
        db = cls(conn, workspace, clock)
        try:
            with db._storage_errors():
                await db._configure()
                if info is None or info.schema_version < SCHEMA_VERSION:
                    await db._migrate()
        except BaseException:
            await db.close()
            raise
        return db

    @classmethod
    async def open_readonly(
        cls, workspace: Workspace, *, clock: Clock = SYSTEM_CLOCK
    ) -> SqliteDatabase | None:
        """The database opened read-only, or None when there is none yet (no file, or an
        empty one): what reading commands use, so a read never changes anything."""
        try:
            return await cls.open(workspace, create=False, clock=clock, read_only=True)
        except NotFoundError:
            return None

    @classmethod
    async def _open_readonly(
        cls, workspace: Workspace, info: DatabaseFileInfo, clock: Clock
    ) -> SqliteDatabase:
        path = workspace.database_path
        if info.empty:
            raise NotFoundError(f"There is no Tether workspace at {workspace.root} yet.")
        if info.schema_version < SCHEMA_VERSION:
            # An older Tether wrote it: the one change a read makes is the upgrade it needs.
            try:
                await (await cls.open(workspace, create=False, clock=clock)).close()
            except StorageError as error:
                raise StorageError(
                    f"{path} was written by an older Tether and cannot be upgraded ({error})"
                ) from None
        conn = await _connect(workspace, readonly_uri(path), create=False, uri=True)
        db = cls(conn, workspace, clock, read_only=True)
        try:
            with db._storage_errors():
                await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                await conn.execute("PRAGMA query_only = 1")
        except BaseException:
            await db.close()
            raise
        return db

    async def _configure(self) -> None:
        await self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = await self._fetch_value("PRAGMA journal_mode = WAL")
        if str(mode).lower() != "wal":
            raise WorkspaceError(f"Could not switch {self.workspace.database_path} to WAL mode.")
        await self._conn.execute("PRAGMA synchronous = NORMAL")
        await self._conn.execute("PRAGMA foreign_keys = ON")

    async def _migrate(self) -> None:
        async with self.transaction() as conn:
            # Re-read inside the write lock: another process may have migrated meanwhile.
            async with conn.execute("PRAGMA user_version") as cursor:
                row = await cursor.fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise WorkspaceError(
                    f"{self.workspace.database_path} was written by a newer Tether; upgrade."
                )
            for index in range(current, SCHEMA_VERSION):
                for statement in _split_statements(MIGRATIONS[index]):
                    await conn.execute(statement)
            await conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    async def close(self) -> None:
        """Close the connections (the worker thread stops with them). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        if self._direct is not None:
            direct, self._direct = self._direct, None
            with contextlib.suppress(sqlite3.Error):
                direct.close()
        await self._conn.close()

    # -- storage problems ------------------------------------------------------------------

    @property
    def damage(self) -> DamagedDatabaseError | None:
        """The damage this connection met (no write is attempted after it), or None."""
        return self._damage

    def _record(self, damage: DamagedDatabaseError) -> None:
        """Remember damage here and for every process (the mark), then raise it."""
        if self._damage is None:
            self._damage = damage
            record_damage(self.workspace, str(damage))
        raise damage

    def _refuse_writes_after_damage(self) -> None:
        if self._damage is not None:
            raise DamagedDatabaseError(str(self._damage))

    @contextlib.contextmanager
    def _storage_errors(self) -> Iterator[None]:
        """Turn SQLite's storage errors (full, I/O, corrupt, read-only) into one sentence."""
        try:
            yield
        except sqlite3.Error as error:
            problem = storage_error(error, self.workspace.database_path)
            if problem is None:
                raise
            if isinstance(problem, DamagedDatabaseError):
                try:
                    self._record(problem)
                except DamagedDatabaseError as recorded:
                    raise recorded from None
            raise problem from None

    # -- reading ---------------------------------------------------------------------------

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return every row (the cursor is exhausted, so no snapshot stays open)."""
        with self._storage_errors():
            return list(await self._conn.execute_fetchall(sql, params))

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        """Run a query and return its first row, or None."""
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def _fetch_value(self, sql: str, params: Params = ()) -> Any:
        row = await self.fetch_one(sql, params)
        return None if row is None else row[0]

    async def fetch_value(self, sql: str, params: Params = ()) -> Any:
        """Run a query and return the first column of its first row, or None."""
        return await self._fetch_value(sql, params)

    async def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits.

        A cheap way for a long-lived view to tell whether re-reading is worth it.
        """
        return int(await self._fetch_value("PRAGMA data_version"))

    # -- writing ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """A short write transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on error).

        Waits on the busy timeout and then retries with jittered backoff while another process
        holds the write lock, so callers never see "database is locked" for ordinary contention.
        """
        async with self._write_lock:
            self._check_writable()
            with self._storage_errors():
                await self._begin_immediate()
                try:
                    yield self._conn
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        await self._conn.execute("ROLLBACK")
                    raise
                else:
                    await self._commit()

    def _check_writable(self) -> None:
        self._refuse_writes_after_damage()
        if self.read_only:
            raise StorageError(
                f"{self.workspace.database_path} was opened read-only; this change was not made."
            )

    async def _begin_immediate(self) -> None:
        await self._retry_busy("BEGIN IMMEDIATE", rollback_on_failure=False)

    async def _commit(self) -> None:
        await self._retry_busy("COMMIT", rollback_on_failure=True)

    async def _retry_busy(self, statement: str, *, rollback_on_failure: bool) -> None:
        """Run ``statement``, retrying with jittered backoff while the database is busy.

        A failed COMMIT leaves the transaction open, so ``rollback_on_failure`` ends it before
        the error is raised; a failed BEGIN has nothing to roll back.
        """
        for attempt in range(_RETRY_ATTEMPTS):
            try:
                await self._conn.execute(statement)
                return
            except sqlite3.OperationalError as error:
                if not _is_busy(error) or attempt == _RETRY_ATTEMPTS - 1:
                    if rollback_on_failure:
                        with contextlib.suppress(sqlite3.Error):
                            await self._conn.execute("ROLLBACK")
                    raise
                await asyncio.sleep(_backoff(attempt))

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one write statement in its own transaction; returns the number of changed rows."""
        async with self.transaction() as conn:
            cursor = await conn.execute(sql, params)
            count = cursor.rowcount
            await cursor.close()
            return count

    async def execute_many(self, sql: str, rows: Iterable[Params]) -> None:
        """Run one write statement for many parameter rows in a single transaction."""
        async with self.transaction() as conn:
            await conn.executemany(sql, rows)

    async def run_read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work``, which only reads, on the connection's own thread: several queries for
        one thread hop (recall's hot path; each hop can cost milliseconds on a busy machine).

        Like :meth:`fetch_all`, no transaction is opened: each statement reads the latest
        committed state.
        """
        with self._storage_errors():
            result: T = await self._conn._execute(work, self._conn._conn)
        return result

    def _direct_connection(self) -> sqlite3.Connection:
        if self._direct is None:
            self._direct = _open_direct(self.workspace.database_path)
        return self._direct

    async def run_in_transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` inside one ``BEGIN IMMEDIATE`` ... ``COMMIT`` on the connection's own
        thread: many statements for the price of one thread hop (the engine's hot write path).

        When no write of this process is in flight, the transaction is first tried right here
        on a second connection whose busy timeout is zero: if the write lock is free (the usual
        case) a short transaction costs no thread hand-off at all; if another process holds it,
        the attempt fails at once, nothing was written, and the worker thread waits instead.

        ``work`` must only touch the database (it is re-run from the start if the write lock
        stays busy); an exception rolls everything back and propagates.
        """
        self._check_writable()
        with self._storage_errors():
            if not self._write_lock.locked():
                direct = self._direct_connection()
                try:
                    return _run_transaction(direct, work)
                except sqlite3.OperationalError as error:
                    if not _is_busy(error):
                        raise
                    # Another process holds the write lock: wait for it off the event loop.
            async with self._write_lock:
                for attempt in range(_RETRY_ATTEMPTS):
                    try:
                        # aiosqlite runs the callable on its worker thread (its
                        # documented-in-code queue); one hop instead of one per statement.
                        result: T = await self._conn._execute(
                            _run_transaction, self._conn._conn, work
                        )
                        return result
                    except sqlite3.OperationalError as error:
                        if not _is_busy(error) or attempt == _RETRY_ATTEMPTS - 1:
                            raise
                        await asyncio.sleep(_backoff(attempt))
        raise AssertionError("unreachable")


async def _connect(
    workspace: Workspace, target: str, *, create: bool, uri: bool = False
) -> aiosqlite.Connection:
    """Open an aiosqlite connection; a new file is created owner-only (0600, and SQLite gives
    its -wal and -shm the same mode)."""
    try:
        if create:
            workspace.ensure()
        old_umask = os.umask(0o077)
        try:
            conn = await aiosqlite.connect(
                target, uri=uri, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
        finally:
            os.umask(old_umask)
    except (OSError, sqlite3.Error) as error:
        # A file where the folder should be, a missing parent, no permission: one sentence.
        if isinstance(error, OSError):
            problem = storage_error(error, workspace.root)
            if problem is not None:
                raise problem from None
        reason = getattr(error, "strerror", None) or str(error)
        raise WorkspaceError(f"Cannot open the workspace at {workspace.root}: {reason}.") from None
    conn.row_factory = sqlite3.Row
    return conn


def _open_direct(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 0")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _run_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return result


def _backoff(attempt: int) -> float:
    delay = min(_RETRY_MAX_S, _RETRY_BASE_S * (2**attempt))
    return delay / 2 + random.random() * delay / 2


def _split_statements(script: str) -> list[str]:
    """Split a migration script into complete statements (triggers contain inner semicolons)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        stripped = line.strip()
        if not buffer and (not stripped or stripped.startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete statement in migration: {buffer[:80]!r}")
    return statements
