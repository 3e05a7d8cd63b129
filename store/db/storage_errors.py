"""What went wrong with the workspace files, in one sentence: SQLite and OS errors classified.

Pure policy: SQLite's primary result code (``sqlite_errorcode & 0xff``) or the OS ``errno`` picks
the sentence and the exit code. Busy/locked, constraint and programming errors are not storage
problems and are left alone (None), so they keep their own handling.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from store.errors import DamagedDatabaseError, StorageError

SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_NOTADB = 26

FULL_REASON = "the disk holding the workspace was full"
DAMAGED_CODES = frozenset({SQLITE_CORRUPT, SQLITE_NOTADB})
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def primary_code(error: BaseException) -> int | None:
    """SQLite's primary result code of ``error`` (None for anything that is not SQLite's)."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def recovery_hint() -> str:
    """How to get a damaged database back (the same words everywhere)."""
    return "run 'tether doctor' for how to recover it"


def full_message(path: Path) -> str:
    """The sentence for a full disk."""
    return (
        f"The disk holding {path} is full, so Tether could not finish writing; nothing was "
        "half-written (free some space, then run the command again)."
    )


def storage_error(error: BaseException, path: Path) -> StorageError | None:
    """The one-sentence error for ``error`` met while using the database at ``path``, or None
    when ``error`` is not a storage problem."""
    if isinstance(error, OSError) and not isinstance(error, sqlite3.Error):
        return os_storage_error(error, path)
    code = primary_code(error)
    if code is None:
        return None
    detail = str(error).rstrip(".")
    if code in DAMAGED_CODES:
        return DamagedDatabaseError(
            f"{path} is damaged ({detail}); Tether will not write to it again, "
            f"{recovery_hint()}."
        )
    if code == SQLITE_FULL:
        return StorageError(full_message(path), FULL_REASON)
    if code == SQLITE_IOERR:
        return StorageError(
            f"Reading or writing {path} failed with an I/O error ({detail}); check the disk, "
            "then run the command again.",
            "of an I/O error",
        )
    if code == SQLITE_READONLY:
        return StorageError(
            f"{path} is read-only, so this command could not write to it (reading commands "
            "still work; make it writable to change it).",
            "the database was read-only",
        )
    if code == SQLITE_CANTOPEN:
        return StorageError(f"Cannot open {path} ({detail}); check that it is readable.")
    return None


def os_storage_error(error: OSError, path: Path) -> StorageError | None:
    """The one-sentence error for an OS error on a workspace file, or None."""
    if error.errno in _FULL_ERRNOS:
        return StorageError(full_message(path), FULL_REASON)
    if error.errno == errno.EROFS:
        return StorageError(
            f"{path} is on a read-only file system, so it could not be written.",
            "the file system was read-only",
        )
    if error.errno == errno.EIO:
        return StorageError(
            f"Writing {path} failed with an I/O error; check the disk.", "of an I/O error"
        )
    if error.errno in (errno.EACCES, errno.EPERM):
        return StorageError(
            f"Permission denied for {path}; Tether could not write it.",
            "permission was denied",
        )
    return None
