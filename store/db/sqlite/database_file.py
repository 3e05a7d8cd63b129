"""Checking the workspace database file before using it, through SQLite only.

Never ``open()``, read, copy or hash ``tether.db`` (or its ``-wal``/``-shm``) with anything but
SQLite in a process that may hold a connection to it: closing *any* descriptor of the file drops
every POSIX lock the process holds on it, including the locks of its open SQLite connections.
The next process to close its connection then believes it is the last one, checkpoints, and
deletes the WAL and shared-memory files under the connections still using them: the database is
corrupted (SQLite's "How To Corrupt An SQLite Database File", section 2.2). ``os.lstat`` opens
nothing, so it refuses links and non-files; everything else is asked of SQLite over a read-only
connection (SQLite keeps its own descriptors of a file open while any of its locks stand).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import NamedTuple

from store.db.sqlite.sqlite_schema import APPLICATION_ID, SCHEMA_VERSION
from store.db.storage_errors import SQLITE_NOTADB, primary_code, recovery_hint, storage_error
from store.errors import DamagedDatabaseError, StorageError, WorkspaceError

OPEN_TIMEOUT_S = 30.0


class DatabaseFileInfo(NamedTuple):
    """What SQLite reports about an existing database file (read without changing it)."""

    schema_version: int
    application_id: int
    tables: int
    page_count: int
    page_size: int

    @property
    def empty(self) -> bool:
        """True for a file with no schema at all (0 bytes, or a fresh SQLite file)."""
        return self.tables == 0 and self.schema_version == 0

    @property
    def size_bytes(self) -> int:
        """The database's size in bytes (pages in the main file and the WAL)."""
        return self.page_count * self.page_size


_KINDS = (
    (stat.S_ISDIR, "folder"),
    (stat.S_ISFIFO, "named pipe (FIFO)"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def database_file_exists(path: Path) -> bool:
    """True when ``path`` is a regular file, False when nothing is there.

    Raises:
        WorkspaceError: ``path`` is a symbolic link (never followed: creating or changing the
            file through it would touch another file) or not a regular file (a FIFO would block
            SQLite forever).
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except NotADirectoryError as error:
        raise WorkspaceError(
            f"Cannot open the workspace at {path.parent}: {error.strerror}."
        ) from None
    except OSError as error:
        raise StorageError(f"Cannot look at {path}: {error.strerror or error}.") from None
    if stat.S_ISLNK(mode):
        raise WorkspaceError(
            f"{path} is a symbolic link; Tether only uses a regular file there and left it "
            "untouched (name the real folder with --workspace)."
        )
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "special file")
        raise WorkspaceError(f"{path} is a {kind}, not a database file; Tether left it untouched.")
    return True


def readonly_uri(path: Path) -> str:
    """A ``file:`` URI opening ``path`` read-only (``mode=ro``): SQLite never writes through it.

    When nothing can change the database while it is read (:func:`cannot_change`), the URI also
    says ``immutable=1``: SQLite then reads it without the ``-shm`` file it would otherwise
    create, which a read-only folder (or file system) refuses."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    return f"{uri}&immutable=1" if cannot_change(path) else uri


def probe_uri(path: Path) -> str:
    """The URI for looking at a file before deciding to use it (:func:`read_file_info`): when
    no ``-wal`` or ``-shm`` lies beside it, no connection has it open in WAL mode and it holds
    all its pages, so it is read immutable and nothing is created beside it; a file Tether
    refuses is left exactly as it was found."""
    uri = readonly_uri(path)
    if "immutable" not in uri and not _beside(path, "-wal") and not _beside(path, "-shm"):
        return f"{uri}&immutable=1"
    return uri


def cannot_change(path: Path) -> bool:
    """True when nobody can write the database at ``path`` now: no ``-wal`` waits to be
    checkpointed into it, and its folder takes no new file (no write permission for anyone, or
    a read-only file system), so no writer can create the ``-wal`` a change starts with."""
    folder = path.parent
    try:
        mode = os.stat(folder).st_mode
        read_only_fs = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
    if mode & 0o222 and not read_only_fs:
        return False
    return not _beside(path, "-wal")


def _beside(path: Path, suffix: str) -> bool:
    try:
        os.lstat(f"{path}{suffix}")
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: assume it is there (the safe way for both callers)
    return True


def _read_info(conn: sqlite3.Connection) -> DatabaseFileInfo:
    def value(pragma: str) -> int:
        return int(conn.execute(pragma).fetchone()[0])

    return DatabaseFileInfo(
        schema_version=value("PRAGMA user_version"),
        application_id=value("PRAGMA application_id"),
        tables=value("SELECT count(*) FROM sqlite_master WHERE type = 'table'"),
        page_count=value("PRAGMA page_count"),
        page_size=value("PRAGMA page_size"),
    )


def _check_identity(path: Path, info: DatabaseFileInfo) -> None:
    if info.application_id != APPLICATION_ID and (info.application_id != 0 or info.tables > 0):
        raise WorkspaceError(
            f"{path} is a SQLite database that does not belong to Tether; it was left untouched."
        )
    if info.schema_version > SCHEMA_VERSION:
        raise WorkspaceError(
            f"{path} was written by a newer Tether (schema {info.schema_version}, this one knows "
            f"{SCHEMA_VERSION}); upgrade Tether to open it."
        )


def read_file_info(path: Path, *, quick_check_max_bytes: int = 0) -> DatabaseFileInfo:
    """Ask SQLite, over a short read-only connection, what the file at ``path`` holds; with
    ``quick_check_max_bytes``, also run ``PRAGMA quick_check`` when the database is at most that
    big (before any writable connection exists, so a refusal changes nothing at all).

    Raises:
        WorkspaceError: not a SQLite database, another program's database, or a newer schema.
        StorageError: damaged (DamagedDatabaseError), unreadable, or an I/O error.
    """
    try:
        conn = sqlite3.connect(probe_uri(path), uri=True, timeout=OPEN_TIMEOUT_S)
        try:
            info = _read_info(conn)
            _check_identity(path, info)
            if 0 < info.size_bytes <= quick_check_max_bytes and not info.empty:
                verdict = conn.execute("PRAGMA quick_check(1)").fetchone()
                text = " ".join(
                    str(verdict[0] if verdict else "no answer")
                    .replace("*** in database main ***", "")
                    .split()
                )
                if text != "ok":
                    raise DamagedDatabaseError(
                        f"{path} is damaged (quick check: {text.rstrip('.')}); Tether will not "
                        f"write to it, {recovery_hint()}."
                    )
        finally:
            conn.close()
    except sqlite3.Error as error:
        if primary_code(error) == SQLITE_NOTADB:
            raise WorkspaceError(
                f"{path} is not a SQLite database (or its first page is destroyed); Tether "
                "left it untouched."
            ) from None
        problem = storage_error(error, path)
        if problem is not None:
            raise problem from None
        raise StorageError(f"Cannot read {path} ({error}).") from None
    return info


def inspect_database_file(path: Path) -> int:
    """Check an existing file through SQLite only and return its schema version (0 when empty).

    Raises:
        WorkspaceError: a link or special file, not SQLite, another program's, or newer.
        StorageError: damaged, unreadable, or an I/O error.
    """
    database_file_exists(path)
    return read_file_info(path).schema_version
