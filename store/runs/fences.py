"""Which fencing token a write of a leased run carries: the token of the execution that
makes it, never merely the newest one this process holds.

A worker whose lease lapsed (a database outage longer than the lease) can claim the same run
again while its first execution still winds down. Both live in one process, so a token kept
per process and run (:attr:`store.db.seam.Database.leases`) would let the stale execution
write under the new claim's token. Each execution therefore runs inside :func:`holding`,
which binds its own token to its asyncio context (tasks it starts inherit it); the store's
writes read :func:`held_tokens` first, and the stale execution's writes fail the fence
(:class:`store.errors.LeaseLost`) while the new one's pass.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.db.seam import Database

_HELD: contextvars.ContextVar[Mapping[str, int] | None] = contextvars.ContextVar(
    "tether_fences", default=None
)


def held_tokens(db: Database) -> Mapping[str, int]:
    """Tokens the current execution writes under: its own (see :func:`holding`), merged over
    those this process registered for runs it holds."""
    own = _HELD.get()
    if own is None:
        return db.leases
    return {**db.leases, **own}


@contextlib.contextmanager
def holding(run_id: str, token: int) -> Iterator[None]:
    """Run the block (and every task it starts) as the execution of ``run_id`` under
    ``token``."""
    current = _HELD.get() or {}
    reset = _HELD.set(MappingProxyType({**current, run_id: token}))
    try:
        yield
    finally:
        _HELD.reset(reset)
