"""Opening, validating and migrating the workspace database, and running short transactions.

All writes go through :meth:`Database.transaction`, which takes the write lock up front
(``BEGIN IMMEDIATE``) so two processes never deadlock upgrading a read to a write, waits on the
busy timeout, and retries with jittered backoff if the lock stays busy. "database is locked"
therefore never reaches a person unless another process holds the lock for minutes.

Before anything is written, an existing file is checked read-only: a file that is not SQLite,
is corrupt, belongs to another program, or was written by a newer Tether is refused with one
sentence and left byte-for-byte untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from store.backend import Database
from store.clock import SYSTEM_CLOCK, Clock
from store.errors import NotFoundError, WorkspaceError
from store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from store.workspace import Workspace

BUSY_TIMEOUT_MS = 30_000
_SQLITE_HEADER = b"SQLite format 3\x00"
_RETRY_ATTEMPTS = 8
_RETRY_BASE_S = 0.05
_RETRY_MAX_S = 2.0

Row = sqlite3.Row
T = TypeVar("T")
Params = Sequence[Any] | dict[str, Any]


def _is_busy(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, sqlite3.OperationalError) and (
        "locked" in text or "busy" in text
    )


def inspect_database_file(path: Path) -> int:
    """Check an existing file read-only and return its schema version (0 for an empty file).

    Raises:
        WorkspaceError: the file is not a SQLite database, is corrupt, is not a Tether
            database, or comes from a newer Tether than this one.
    """
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb") as handle:
        header = handle.read(len(_SQLITE_HEADER))
    if header != _SQLITE_HEADER:
        raise WorkspaceError(f"{path} is not a SQLite database; Tether left it untouched.")
    try:
        # mode=ro never writes the main file; we only read the header fields and catalogue.
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            application_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            ).fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        raise WorkspaceError(
            f"{path} is damaged or unreadable ({error}); Tether left it untouched."
        ) from error
    if application_id != APPLICATION_ID and (application_id != 0 or tables > 0):
        raise WorkspaceError(
            f"{path} is a SQLite database that does not belong to Tether; it was left untouched."
        )
    if version > SCHEMA_VERSION:
        raise WorkspaceError(
            f"{path} was written by a newer Tether (schema {version}, this one knows "
            f"{SCHEMA_VERSION}); upgrade Tether to open it."
        )
    return int(version)


class SqliteDatabase(Database):
    """A workspace database in one SQLite file (WAL): the embedded default."""

    backend = "sqlite"

    def __init__(
        self, conn: aiosqlite.Connection, workspace: Workspace, clock: Clock
    ) -> None:
        self._conn = conn
        self.workspace = workspace
        self.clock = clock
        self._write_lock = asyncio.Lock()
        # A second connection used on the event-loop thread for short writes that get the
        # lock at once (see run_in_transaction); opened on first use.
        self._direct: sqlite3.Connection | None = None

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        workspace: Workspace,
        *,
        create: bool = True,
        clock: Clock = SYSTEM_CLOCK,
    ) -> SqliteDatabase:
        """Open (and, when ``create`` is true, create and migrate) the workspace database.

        Raises:
            NotFoundError: ``create`` is false and the workspace has no database yet.
            WorkspaceError: the file cannot be used (see :func:`inspect_database_file`).
        """
        path = workspace.database_path
        if path.exists():
            version = inspect_database_file(path)
        elif not create:
            raise NotFoundError(f"There is no Tether workspace at {workspace.root}.")
        else:
            version = 0
        try:
            if create:
                workspace.ensure()
            old_umask = os.umask(0o077)
            try:
                conn = await aiosqlite.connect(
                    str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
                )
            finally:
                os.umask(old_umask)
        except (OSError, sqlite3.Error) as error:
            # A file where the folder should be, a missing parent, no permission: one sentence.
            reason = getattr(error, "strerror", None) or str(error)
            raise WorkspaceError(
                f"Cannot open the workspace at {workspace.root}: {reason}."
            ) from None
        conn.row_factory = sqlite3.Row
        db = cls(conn, workspace, clock)
        try:
            await db._configure()
            if version < SCHEMA_VERSION:
                await db._migrate()
        except BaseException:
            await conn.close()
            raise
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
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
        """Close the connection (its worker thread stops with it)."""
        if self._direct is not None:
            self._direct.close()
            self._direct = None
        await self._conn.close()

    # -- reading ---------------------------------------------------------------------------

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return every row (the cursor is exhausted, so no snapshot stays open)."""
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
            await self._begin_immediate()
            try:
                yield self._conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    await self._conn.execute("ROLLBACK")
                raise
            else:
                await self._commit()

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
                    # aiosqlite runs the callable on its worker thread (its documented-in-code
                    # queue); one hop instead of one per statement.
                    result: T = await self._conn._execute(
                        _run_transaction, self._conn._conn, work
                    )
                    return result
                except sqlite3.OperationalError as error:
                    if not _is_busy(error) or attempt == _RETRY_ATTEMPTS - 1:
                        raise
                    await asyncio.sleep(_backoff(attempt))
        raise AssertionError("unreachable")


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
