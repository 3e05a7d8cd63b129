"""Plain ``sqlite3`` pieces every way of opening the workspace database shares: checking an
existing file, configuring a connection (WAL, the durability level, verified), migrating, and
running one transaction or a group of them.

No asyncio here: :class:`store.db.sqlite.sqlite_database.Database` runs these on its worker thread
(or directly,
see there), and :class:`store.db.sqlite.direct.DirectDatabase` runs them in the calling thread for
the short commands of the command line.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from store.db.durability import SYNCHRONOUS_VALUES, check_durability, read_durability
from store.db.retry import backoff_s
from store.db.seam import Deferred, HeldRows
from store.db.sqlite.database_file import (
    DatabaseFileInfo,
    database_file_exists,
    read_file_info,
)
from store.db.sqlite.sqlite_schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from store.db.storage_errors import recovery_hint, storage_error
from store.errors import DamagedDatabaseError, NotFoundError, StorageError, WorkspaceError
from store.workspace.damage import recorded_damage
from store.workspace.layout import Workspace

BUSY_TIMEOUT_MS = 30_000
QUICK_CHECK_MAX_BYTES = 32 * 1024 * 1024
"""Writers quick-check files up to this size when they open them (about 40 ms at the limit)."""
RETRY_ATTEMPTS = 8
_RETRY_BASE_S = 0.05
_RETRY_MAX_S = 2.0

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], Any]


def is_busy(error: BaseException) -> bool:
    """True for SQLite's "database is locked/busy" (another connection holds the lock)."""
    text = str(error).lower()
    return isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def busy_backoff_s(attempt: int) -> float:
    """A jittered, growing wait before retry number ``attempt`` of a busy write."""
    return backoff_s(attempt, first_s=_RETRY_BASE_S, max_s=_RETRY_MAX_S)


def before_open(
    workspace: Workspace, *, create: bool, durability: str | None, read_only: bool = False
) -> tuple[str, DatabaseFileInfo | None]:
    """Everything checked before a connection is opened, through SQLite only: the durability
    level (``durability`` or the workspace's configured one) and what the existing file holds
    (None when there is none yet; then the folder is created when ``create``). A writer is
    refused a file marked damaged, and quick-checks a small file over a read-only connection,
    so a damaged file is refused before a writable connection could change anything.

    Raises:
        NotFoundError: no workspace database yet (``create`` is false or ``read_only``), or an
            empty file that only a creating writer turns into one.
        WorkspaceError: the file cannot be used (a link or special file, not SQLite, another
            program's, or a newer schema) or the folder cannot be created.
        StorageError: damaged (DamagedDatabaseError), unreadable, or an I/O error.
        InvalidInputError: the configured durability level is unknown.
    """
    level = (
        check_durability(durability)
        if durability is not None
        else read_durability(workspace.config_path)
    )
    path = workspace.database_path
    exists = database_file_exists(path)
    damage = None if read_only or not exists else recorded_damage(workspace)
    if damage is not None:
        raise DamagedDatabaseError(
            f"{path} was found damaged earlier ({damage.rstrip('.')}); Tether will not "
            f"write to it, {recovery_hint()}."
        )
    if not exists:
        if not create or read_only:
            raise NotFoundError(f"There is no Tether workspace at {workspace.root}.")
        try:
            workspace.ensure()
        except OSError as error:
            raise cannot_open(workspace, error) from None
        return level, None
    info = read_file_info(path, quick_check_max_bytes=0 if read_only else QUICK_CHECK_MAX_BYTES)
    if info.empty and (read_only or not create):
        # A 0-byte (or schema-less) file is not a workspace yet; only a creating command
        # turns it into one.
        raise NotFoundError(f"There is no Tether workspace at {workspace.root} yet.")
    return level, info


def cannot_open(
    workspace: Workspace, error: OSError | sqlite3.Error
) -> StorageError | WorkspaceError:
    """One sentence for a workspace that cannot be opened (a file where the folder should be,
    a missing parent, no permission, a full disk)."""
    problem = storage_error(error, workspace.root) if isinstance(error, OSError) else None
    if problem is not None:
        return problem
    reason = getattr(error, "strerror", None) or str(error)
    return WorkspaceError(f"Cannot open the workspace at {workspace.root}: {reason}.")


def cannot_upgrade(path: Path, error: StorageError) -> StorageError:
    """One sentence for a file an older Tether wrote that a reading command could not migrate
    (a read-only opening migrates first: the one change a read makes)."""
    return StorageError(f"{path} was written by an older Tether and cannot be upgraded ({error})")


def connect(
    target: Path | str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS, uri: bool = False
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit); a new file is created
    owner-only (0600, and SQLite gives its -wal and -shm the same mode). ``target`` may be a
    ``file:`` URI (``uri``), e.g. :func:`store.db.sqlite.database_file.readonly_uri`."""
    old_umask = os.umask(0o077)
    try:
        conn = sqlite3.connect(
            target,
            isolation_level=None,
            timeout=busy_timeout_ms / 1000,
            check_same_thread=False,
            uri=uri,
        )
    finally:
        os.umask(old_umask)
    conn.row_factory = sqlite3.Row
    return conn


def configure(
    conn: sqlite3.Connection,
    path: Path,
    durability: str,
    *,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    set_wal: bool = True,
) -> None:
    """Set the busy timeout, WAL, the durability level's ``synchronous`` and foreign keys, and
    read the two that matter for durability back: a connection that would write with less
    than the workspace promises is refused (WorkspaceError)."""
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    if set_wal:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise WorkspaceError(f"Could not switch {path} to WAL mode.")
    conn.execute(f"PRAGMA synchronous = {durability.upper()}")
    conn.execute("PRAGMA foreign_keys = ON")
    found = durability_pragmas(conn)
    if found != {"journal_mode": "wal", "synchronous": durability}:
        raise WorkspaceError(
            f"{path} would be written with {found}, not WAL with synchronous={durability}."
        )


_SYNC_NAMES = {value: name for name, value in SYNCHRONOUS_VALUES.items()} | {0: "off", 3: "extra"}


def durability_pragmas(conn: sqlite3.Connection) -> dict[str, str]:
    """``journal_mode`` and ``synchronous`` as this connection reads them now."""
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    synchronous = int(conn.execute("PRAGMA synchronous").fetchone()[0])
    return {"journal_mode": str(journal).lower(), "synchronous": _SYNC_NAMES[synchronous]}


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the schema up to date in one write transaction (no-op when already current)."""

    def work(conn: sqlite3.Connection) -> None:
        # Re-read inside the write lock: another process may have migrated meanwhile.
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if current > SCHEMA_VERSION:
            raise WorkspaceError(f"{path} was written by a newer Tether; upgrade.")
        for index in range(current, SCHEMA_VERSION):
            for statement in split_statements(MIGRATIONS[index]):
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    run_transaction(conn, work)


def run_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """``work`` inside one ``BEGIN IMMEDIATE`` ... ``COMMIT``; an exception rolls it back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = run_works(conn, [work])[0]
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return result


Outcome = tuple[bool, Any]
"""``(True, value)`` or ``(False, exception)``: how one write of a group ended."""


def run_works(conn: sqlite3.Connection, works: Sequence[Work]) -> list[Any]:
    """Run ``works`` in order inside the caller's transaction and return their values.

    Consecutive works carrying the same :class:`~store.db.seam.HeldRows` (``held_rows``) have
    those rows held and written together when the run of them ends (an attempt's start, its
    calls and its end each append events: one statement for all of a group's, not one per
    write); what is held is forgotten when a work raises (the transaction is rolled back). A
    work's value that reads what its held rows return (a :class:`~store.db.seam.Deferred`) is
    read once they are written."""
    values: list[Any] = []
    held: HeldRows | None = None
    try:
        for work in works:
            rows: HeldRows | None = getattr(work, "held_rows", None)
            if held is not None and rows is not held:
                held.close(conn)
                held = None
            if rows is not None and held is None:
                rows.open(conn)
                held = rows
            values.append(work(conn))
        if held is not None:
            held.close(conn)
            held = None
    finally:
        if held is not None:
            held.discard(conn)
    return [value.resolve() if type(value) is Deferred else value for value in values]


def run_group(conn: sqlite3.Connection, works: Sequence[Work]) -> list[Outcome]:
    """Several writes in one transaction (group commit): one ``COMMIT``, so at
    ``synchronous=FULL`` one flush to disk, for all of them.

    Should one write raise, the whole transaction is rolled back and every write is run again
    in a transaction of its own, so the failing write gets its exception back and the others
    commit: each keeps the all-or-nothing meaning it has on its own (writes are run again
    anyway when the lock is busy, so they only touch the database). An error of the
    transaction itself (busy, disk full, I/O) rolls everything back and is raised.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        values = run_works(conn, works)
        conn.execute("COMMIT")
    except Exception as error:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        if _ends_the_group(error):
            raise
        if len(works) == 1:
            return [(False, error)]
        return [_run_alone(conn, work) for work in works]
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return [(True, value) for value in values]


def run_group_unflushed(conn: sqlite3.Connection, works: Sequence[Work]) -> list[Outcome]:
    """:func:`run_group` committed without a flush to disk (``synchronous=NORMAL`` for this
    one commit, then back to ``FULL``): for writes that must survive the process being killed
    but not a power cut; the next flushed commit flushes them too (the WAL is flushed whole)."""
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        return run_group(conn, works)
    finally:
        conn.execute("PRAGMA synchronous = FULL")


def _run_alone(conn: sqlite3.Connection, work: Work) -> Outcome:
    try:
        return (True, run_transaction(conn, work))
    except Exception as error:
        if _ends_the_group(error):
            raise
        return (False, error)


def _ends_the_group(error: Exception) -> bool:
    return isinstance(error, sqlite3.OperationalError) and (is_busy(error) or _is_io(error))


def _is_io(error: sqlite3.OperationalError) -> bool:
    """Errors of the database file itself (disk full, I/O), which end the whole group."""
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)


def split_statements(script: str) -> list[str]:
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
