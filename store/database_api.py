"""What the stores (:class:`~store.memory.MemoryStore`, :class:`~store.runs.RunStore`) need of
an open workspace database. Two implementations share every store method and every SQL
statement:

* :class:`store.database.Database`: asyncio programs (the engine, the dashboard); statements run
  on a worker thread and writes are grouped into shared commits;
* :class:`store.direct.DirectDatabase`: the short commands of the command line; statements run
  in the calling thread, so ``tether memory get`` pays for neither asyncio nor a thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from store.clock import Clock
from store.workspace import Workspace

T = TypeVar("T")
Params = Sequence[Any] | dict[str, Any]


class DatabaseApi(Protocol):
    """An open workspace database (see the module docstring)."""

    workspace: Workspace
    clock: Clock
    durability: str

    async def fetch_all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Every row of a query (the cursor is exhausted, so no snapshot stays open)."""
        ...

    async def fetch_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        """The first row of a query, or None."""
        ...

    async def fetch_value(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row of a query, or None."""
        ...

    async def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits."""
        ...

    async def run_read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` (reads only, no transaction) on the connection."""
        ...

    async def run_in_transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in a write transaction; its result once committed."""
        ...

    def submit(
        self, work: Callable[[sqlite3.Connection], T], *, flush: bool = True
    ) -> Awaitable[T]:
        """Queue ``work`` for the next commit; await the result to know it is committed
        (``flush=False``: no flush to disk needed, see :meth:`store.database.Database.submit`)."""
        ...

    async def execute(self, sql: str, params: Params = ()) -> int:
        """One write statement in its own transaction; the number of changed rows."""
        ...

    async def flush(self) -> None:
        """Wait until every queued write is committed."""
        ...

    async def close(self) -> None:
        """Commit what is queued and close."""
        ...
