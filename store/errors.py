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
    """The workspace database cannot be used (foreign, corrupt or from a newer Tether). Exit 2."""

    exit_code = 2


class ConflictError(TetherError):
    """A write contradicts what is stored (for example re-saving a note id with other content)."""

    exit_code = 2


class LeaseLost(TetherError):
    """This process no longer holds the run it tried to write: its lease expired and another
    worker claimed the run (a newer fencing token). Nothing was written. Exit code 3."""

    exit_code = 3


class DatabaseUnavailable(TetherError):
    """The workspace's database server could not complete a request (down, unreachable, the
    connection dropped). Exit code 3: could not complete."""

    exit_code = 3
