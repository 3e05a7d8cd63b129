"""The dashboard's write side: one writable database connection and the embedded engine.

The dashboard reads through its read-only tailing connection (``store/dashboard.py``); every
change a person makes goes through :class:`EngineHost`, which owns a separate writable
:class:`store.database.Database` used only for short ``BEGIN IMMEDIATE`` transactions. Memory
edits call :class:`store.memory.MemoryStore` and run control calls :class:`store.runs.RunStore`
and the engine, the same code the command line runs, so a rule holds everywhere.
"""

from __future__ import annotations

from typing import Any

from store.clock import SYSTEM_CLOCK, Clock
from store.database import Database
from store.memory import MemoryStore
from store.runs import RunStore
from store.workspace import Workspace


class EngineHost:
    """Owns the dashboard's writable connection (opened on first use) and its embedded runs."""

    def __init__(self, workspace: Workspace, clock: Clock = SYSTEM_CLOCK) -> None:
        self.workspace = workspace
        self.clock = clock
        self._db: Database | None = None

    async def database(self, *, create: bool = False) -> Database:
        """The writable connection; ``create`` makes the workspace on a first write.

        Raises:
            NotFoundError: there is no workspace yet and ``create`` is false.
        """
        if self._db is None:
            self._db = await Database.open(self.workspace, create=create, clock=self.clock)
        return self._db

    async def memory(self, *, create: bool = False) -> MemoryStore:
        """The memory store over the writable connection (same methods as ``tether memory``)."""
        return MemoryStore(await self.database(create=create))

    async def runs(self) -> RunStore:
        """The run records over the writable connection (same methods as ``tether runs``)."""
        return RunStore(await self.database())

    async def close(self) -> None:
        """Close the writable connection (safe to call twice)."""
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()


def host_for(app: Any) -> EngineHost:
    """The app's :class:`EngineHost`, created on first use from ``app.workspace``/``app.clock``."""
    host = getattr(app, "engine_host", None)
    if not isinstance(host, EngineHost):
        host = EngineHost(app.workspace, getattr(app, "clock", SYSTEM_CLOCK))
        app.engine_host = host
    return host
