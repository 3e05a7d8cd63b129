"""Group commit for asyncio programs, one queue for both backends.

Writes (``work`` callbacks over a connection) queue up while one group is being committed; the
next group lets what is ready on the event loop run for a few passes, then hands the whole
queue to the backend's ``commit`` (one transaction: one ``COMMIT``, one flush to disk at the
durability levels that flush). Each write keeps its own all-or-nothing meaning (the backend
runs the writes of a failed group again one by one) and is acknowledged, its future resolved,
only once the commit holding it has returned. Writes are committed in the order they were
submitted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

from store.errors import StorageError

Work = Callable[[Any], Any]
Outcome = tuple[bool, Any]
"""One write's fate in a group: ``(True, its value)`` or ``(False, its exception)``."""
GroupCommit = Callable[[list[Work], bool, float], Awaitable[list[Outcome]]]
"""Commit these writes in one transaction (flushed to disk when the flag says so); the last
argument is when the oldest of them was queued (``time.monotonic()``): a backend that waits
out an outage gives each write the same window from its queueing as a write alone gets."""

GATHER_PASSES = 4
"""How many passes of the event loop a group commit waits for more writes before it starts."""


@dataclasses.dataclass(frozen=True)
class _Queued:
    """A write waiting for the next group commit."""

    work: Work
    future: asyncio.Future[Any]
    flush: bool
    queued_at: float


class WriteQueue:
    """The writes waiting for a group commit, and the task committing them."""

    def __init__(
        self, commit: GroupCommit, converted: Callable[[BaseException], BaseException]
    ) -> None:
        self._commit = commit
        self._converted = converted
        self._queue: list[_Queued] = []
        self._flusher: asyncio.Task[None] | None = None
        self.groups = 0
        """How many group commits ran (tests and benchmarks count them)."""
        self.submitted = 0
        """How many writes were queued (each would be a commit of its own without grouping)."""

    def submit(self, work: Work, flush: bool, check: Callable[[], None]) -> asyncio.Future[Any]:
        """Queue ``work`` and return its future (its result once its group has committed);
        ``check`` refuses a write up front (a read-only handle): its error is the future's."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            check()
        except StorageError as refused:
            _fail(future, refused)
            return future
        self._add(work, future, flush)
        return future

    def _add(self, work: Work, future: asyncio.Future[Any], flush: bool) -> None:
        self._queue.append(_Queued(work, future, flush, time.monotonic()))
        self.submitted += 1
        if self._flusher is None:
            loop = asyncio.get_running_loop()
            self._flusher = loop.create_task(self._drain(), name="tether-group-commit")

    async def flush(self) -> None:
        """Wait until every queued write is committed."""
        while self._flusher is not None:
            await asyncio.shield(self._flusher)

    async def _drain(self) -> None:
        batch: list[_Queued] = []
        try:
            while self._queue:
                # Let what is ready run first so it can join this commit: a node's end, the
                # scheduler collecting it and its dependents queueing their starts take four
                # passes of the event loop (tens of microseconds; no timer).
                for _ in range(GATHER_PASSES):
                    await asyncio.sleep(0)
                batch, self._queue = self._queue, []
                self.groups += 1
                try:
                    outcomes = await self._commit(
                        [queued.work for queued in batch], any(q.flush for q in batch),
                        batch[0].queued_at,
                    )
                except Exception as error:
                    for queued in batch:
                        if not queued.future.done():
                            _fail(queued.future, error)
                    continue
                for future, (ok, value) in zip(
                    (queued.future for queued in batch), outcomes, strict=True
                ):
                    if future.done():  # its waiter was cancelled; the write still committed
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        _fail(future, self._converted(value))
                batch = []
        finally:
            self._flusher = None
            for queued in [*batch, *self._queue]:
                queued.future.cancel()  # only when this task itself was cancelled (loop shutdown)
            if batch:
                self._queue = []


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    """Fail a write's future, its failure marked as seen at once (what
    :func:`store.db.seam.retrieved` does as a done callback: whoever awaits the write still
    gets the error, one nobody awaits any more prints nothing), so a write that succeeds costs
    no callback, and no pass of the event loop, of its own."""
    future.set_exception(error)
    future.exception()
