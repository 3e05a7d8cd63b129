"""Blocking work kept off a running event loop, yet callable without one.

The dashboard's reads must never hold its event loop (it keeps drawing and taking keys), so
their heavy parts run in a worker thread. The command line's short commands drive the same
store calls with no event loop at all (:func:`store.db.sqlite.direct.run_now`), where there is
no thread pool to hand work to and the work simply runs here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def off_the_loop(work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` in a worker thread when an event loop is running, else right here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work(*args)
    return await asyncio.to_thread(work, *args)
