"""The memory store: facts, threads/messages and notes over the workspace database.

:class:`MemoryStore` is the single code path for memory. The engine, the command line and the
dashboard all call the same methods, so a rule (TTL hidden on read, the note read contract,
idempotent saves) holds everywhere by construction. The operations are grouped by area in
``store/memory/facts.py``, ``store/memory/threads.py`` and ``store/memory/notes.py``; this class
combines them.

Typical use::

    async with await MemoryStore.open(workspace) as memory:
        await memory.set_fact("workflow:code-review", "answer", "use pytest -x")
        note = await memory.save_note("workflow:code-review", "Run ruff first.")
        hits = await memory.search_notes("ruff", namespace="workflow:code-review")
"""

from __future__ import annotations

from store.clock import SYSTEM_CLOCK, Clock
from store.db.backends import open_database
from store.db.seam import Database
from store.memory.facts import Fact, FactOps
from store.memory.note_values import Note, SearchHit
from store.memory.notes import NoteOps
from store.memory.threads import Message, Thread, ThreadOps
from store.workspace.layout import Workspace

__all__ = ["Fact", "MemoryStore", "Message", "Note", "SearchHit", "Thread"]


class MemoryStore(FactOps, ThreadOps, NoteOps):
    """Facts, threads/messages and notes of one workspace database.

    Construct it over an open database (the engine shares its own; the command line passes a
    :class:`~store.db.sqlite.direct.DirectDatabase`), or use
    :meth:`open` to open the workspace and own the connection.
    """

    def __init__(self, db: Database, *, owns_db: bool = False) -> None:
        self.db = db
        self._owns_db = owns_db

    @classmethod
    async def open(
        cls, workspace: Workspace, *, create: bool = True, clock: Clock = SYSTEM_CLOCK
    ) -> MemoryStore:
        """Open the workspace database (see :meth:`Database.open`) and wrap it.

        With ``create=False`` a missing workspace raises NotFoundError and nothing is created.
        """
        return cls(await open_database(workspace, create=create, clock=clock), owns_db=True)

    def now_ms(self) -> int:
        """The store's clock (injected; tests use a ManualClock)."""
        return self.db.clock.now_ms()

    async def close(self) -> None:
        """Close the database if this store opened it."""
        if self._owns_db:
            await self.db.close()

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
