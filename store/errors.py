"""Errors raised by the store, each mapping to one CLI exit code.

Every message is one sentence a person can act on; the command line prints it as is.
"""

from __future__ import annotations


class TetherError(Exception):
    """Base class for every error Tether reports to a person."""

    exit_code = 1


class NotFoundError(TetherError):
    """The named thing (fact, note, run, node, workspace) does not exist. Exit code 1."""

    exit_code = 1


class InvalidInputError(TetherError):
    """Input was rejected before anything was written. Exit code 2."""

    exit_code = 2


class WorkspaceError(TetherError):
    """The workspace database cannot be used as given (not a regular file, not SQLite, another
    program's database, or from a newer Tether). Exit code 2."""

    exit_code = 2


class StorageError(TetherError):
    """The workspace could not be read or written to the end: disk full, an I/O error, a
    damaged database, or a read-only one asked to change. Exit code 3 ("could not complete").

    ``reason`` is a short clause naming the cause ("the disk was full"), for messages that
    quote it (an interrupted run's error)."""

    exit_code = 3

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message.rstrip(".")


class DamagedDatabaseError(StorageError):
    """SQLite reported the database file as corrupt (SQLITE_CORRUPT / SQLITE_NOTADB). Exit 3."""


class ConflictError(TetherError):
    """A write contradicts what is stored (for example re-saving a note id with other content)."""

    exit_code = 2


class LeaseLost(TetherError):
    """This process no longer holds the run it tried to write: its lease expired and another
    worker claimed the run (a newer fencing token). Nothing was written. Exit code 3."""

    exit_code = 3


class DatabaseUnavailable(StorageError):
    """The workspace's database server could not complete a request (down, unreachable, the
    connection dropped, a privilege revoked) for longer than its retries wait. Exit code 3:
    could not complete. A storage error: a run that meets it stops and is interrupted like one
    whose disk is full, never failed by the outage itself."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message, reason or "the workspace database could not be reached")
