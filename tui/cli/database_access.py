"""Opening the workspace database (and the memory store over it) for one command: read-only
for a reading command (never creating, migrating or chmodding anything), in this thread for a
SQLite workspace.

Free of click and asyncio: the hot commands (:mod:`tui.cli.hot_commands`) open the database
through here when :mod:`tui.cli.entry` runs them without the click layer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from store.workspace.layout import FIRST_WRITE, Workspace

if TYPE_CHECKING:
    from store.db.seam import Database
    from store.memory.memory_store import MemoryStore


def require_workspace(workspace: Workspace) -> None:
    """Raise NotFoundError when the workspace folder itself does not exist (``--workspace
    /nonexistent`` is a mistake to say, not an empty listing); a folder that exists but holds
    no database yet is a workspace nothing has written to."""
    from store.errors import NotFoundError

    if not workspace.is_shared and not workspace.root.is_dir():
        raise NotFoundError(f"There is no Tether workspace at {workspace.root}; {FIRST_WRITE}.")


@asynccontextmanager
async def reading(workspace: Workspace) -> AsyncIterator[Database | None]:
    """The workspace database opened read-only for a reading command, or None when there is
    none yet. A read never creates, migrates or chmods anything. A SQLite workspace is read in
    this thread (works with or without an event loop, see :func:`tui.cli.common.run_direct`).
    A workspace folder that does not exist at all is an error (:func:`require_workspace`)."""
    from store.db.backends import open_in_thread
    from store.errors import NotFoundError

    require_workspace(workspace)
    db: Database | None
    try:
        db = await open_in_thread(workspace, create=False, read_only=True)
    except NotFoundError:
        db = None
    try:
        yield db
    finally:
        if db is not None:
            await db.close()


async def open_database(workspace: Workspace, *, create: bool) -> Database:
    """The workspace's database for a short command: in this thread (no event loop) for a
    SQLite workspace, the PostgreSQL backend for a shared one (then
    :func:`tui.cli.common.run_direct` has put the command on an event loop). With ``create``
    false a missing workspace raises NotFoundError."""
    from store.db.backends import open_in_thread

    return await open_in_thread(workspace, create=create)


@asynccontextmanager
async def open_store(
    workspace: Workspace, *, create: bool, direct: bool = True
) -> AsyncIterator[MemoryStore]:
    """Open the memory store; with ``create`` false a missing workspace raises NotFoundError.

    ``direct`` (commands run with :func:`~tui.cli.common.run_direct`) opens it in this thread
    without an event loop; commands on an event loop pass ``direct=False``.
    """
    from store.memory.memory_store import MemoryStore

    if direct:
        store = MemoryStore(await open_database(workspace, create=create), owns_db=True)
    else:
        store = await MemoryStore.open(workspace, create=create)
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def reading_store(workspace: Workspace) -> AsyncIterator[MemoryStore | None]:
    """The memory store over a read-only connection, or None when there is no workspace yet:
    reading commands never create, migrate or chmod anything."""
    from store.memory.memory_store import MemoryStore

    async with reading(workspace) as db:
        yield None if db is None else MemoryStore(db)
