"""The one place a backend is chosen: PostgreSQL when the workspace names a database URL, else
its SQLite file.

Everything that opens a workspace database comes through here: the engine and the dashboard's
writes and reading commands (:func:`open_database`), the short commands
of the command line (:func:`open_in_thread`: SQLite in the calling thread) and the dashboard's
reader (:func:`open_reader`). The backends are imported only when chosen, so a SQLite process
never imports psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from store.db.postgres.pg_database import PostgresDatabase
    from store.db.seam import Database
    from store.read.dashboard_reader import DashboardReader
    from store.workspace.layout import Workspace

_NO_DRIVER = (
    "This workspace lives in PostgreSQL; install the driver with "
    "pip install 'psycopg[binary]' psycopg-pool."
)


async def open_database(
    workspace: Workspace,
    *,
    create: bool = True,
    clock: Clock = SYSTEM_CLOCK,
    read_only: bool = False,
) -> Database:
    """Open the workspace's database for asyncio programs: PostgreSQL when the workspace names
    a database URL, else its SQLite file (created and migrated when ``create`` is true; with
    ``read_only`` opened with SQLite's ``mode=ro``, so nothing is created, migrated or
    chmod-ed).

    Raises:
        NotFoundError: ``create`` is false and there is no workspace database yet.
        WorkspaceError: the database cannot be used (foreign, newer schema, unreachable
            server, a link or special file where the SQLite file should be; no driver).
        StorageError: damaged, read-only for a writer, disk full or an I/O error.
    """
    if workspace.database_url:
        return await _postgres_database().open(
            workspace, create=create and not read_only, clock=clock, read_only=read_only
        )
    from store.db.sqlite.sqlite_database import SqliteDatabase

    return await SqliteDatabase.open(workspace, create=create, clock=clock, read_only=read_only)


async def open_in_thread(
    workspace: Workspace, *, create: bool, read_only: bool = False
) -> Database:
    """The database for a short command: a SQLite workspace in the calling thread (no event
    loop, no worker thread), a PostgreSQL one through its pool. With ``create`` false a
    missing workspace raises NotFoundError."""
    if workspace.database_url:
        return await open_database(workspace, create=create, read_only=read_only)
    from store.db.sqlite.direct import DirectDatabase

    return DirectDatabase.open_now(workspace, create=create, read_only=read_only)


async def open_reader(workspace: Workspace) -> DashboardReader:
    """The dashboard's read-only reader of the workspace (see :mod:`store.read`).

    Raises:
        NotFoundError: the workspace has no database yet.
        WorkspaceError: the database is not a usable Tether database.
    """
    if workspace.database_url:
        _postgres_database()  # the driver is there
        from store.read.pg_dashboard_tail import PgDashboardReader

        return await PgDashboardReader.open(workspace)
    from store.read.dashboard_reader import DashboardReader

    return await DashboardReader.open(workspace)


def _postgres_database() -> type[PostgresDatabase]:
    try:
        from store.db.postgres.pg_database import PostgresDatabase
    except ImportError:
        from store.errors import WorkspaceError

        raise WorkspaceError(_NO_DRIVER) from None
    return PostgresDatabase
