"""A workspace's memory as the memory runtime and the memory tools both use it: the stores, the
recall backend asked under a timeout (``TETHER_MEMORY_TIMEOUT_MS``, default 2000 ms), and the
notice that a note or fact was written (a semantic backend embeds it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from engine.env_settings import env_number
from engine.memory.keyword_recall import RecallBackend
from engine.memory.memory_config import MemoryConfig
from engine.memory.recall_items import RecallRequest, RecallResult
from engine.memory.tag_rules import recall_tag_groups
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore

TIMEOUT_ENV = "TETHER_MEMORY_TIMEOUT_MS"
DEFAULT_TIMEOUT_MS = 2000
RECALL_LIMIT = 16


def timeout_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The recall timeout in ms: ``TETHER_MEMORY_TIMEOUT_MS`` (a whole number above 0), 2000
    when unset.

    Raises:
        InvalidInputError: it is set to anything else.
    """
    return int(env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_MS, whole=True, above=0,
                          environ=environ))


def recall_request(config: MemoryConfig, query: str, limit: int) -> RecallRequest:
    """The recall request of a task: its banks, the query, and each bank's tag scope under the
    bank-type rules (project banks: main plus the configured branch; user banks: none)."""
    groups = {ns: recall_tag_groups(ns, config.tags) for ns in config.namespaces}
    return RecallRequest(config.namespaces, query, config.tags, limit, groups)


async def recall_with_timeout(
    backend: RecallBackend, request: RecallRequest, timeout_ms: int
) -> RecallResult:
    """Ask ``backend`` under a timeout; a timeout or error becomes a degraded result.

    The recall runs as its own task: on timeout it is cancelled and *not* awaited, so even a
    backend that ignores cancellation cannot hold the task up.
    """
    task = asyncio.ensure_future(backend.recall(request))
    done, _ = await asyncio.wait({task}, timeout=timeout_ms / 1000)
    if not done:
        task.cancel()
        task.add_done_callback(_consume)
        return RecallResult.failed(f"memory recall timed out after {timeout_ms} ms")
    error = task.exception()
    if error is not None:
        return RecallResult.failed(
            f"memory recall failed: {type(error).__name__}: {error}".rstrip(": ")
        )
    return task.result()


def _consume(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(BaseException):
        task.exception()


class MemoryAccess:
    """The memory of one workspace as the tools use it: its stores, its recall backend and the
    recall timeout (set up by :class:`~engine.memory.runtime.MemoryRuntime`)."""

    db: Database
    memory: MemoryStore
    runs: RunStore
    backend: RecallBackend
    timeout_ms: int

    def backend_for_config(self, config: MemoryConfig) -> RecallBackend:
        """The backend that answers for ``config`` (its mode; here: the one backend)."""
        return self.backend

    def written(self) -> None:
        """A note or fact was written: a semantic backend embeds it in the background (a
        failure only leaves it to keyword recall until the next pass)."""
        notify = getattr(self.backend, "written", None)
        if notify is not None:
            task = notify()
            task.add_done_callback(_consume)

    async def recall_for_tool(
        self, config: MemoryConfig, namespaces: tuple[str, ...], query: str, tags: tuple[str, ...]
    ) -> RecallResult:
        """Recall for the ``recall`` tool: the configured tag scope (under the bank-type rules)
        plus the tool's own tags, which only ever narrow it."""
        combined = tuple(dict.fromkeys((*config.tags, *tags)))
        groups = {ns: recall_tag_groups(ns, config.tags, tags) for ns in namespaces}
        request = RecallRequest(namespaces, query, combined, RECALL_LIMIT, groups)
        return await recall_with_timeout(self.backend_for_config(config), request,
                                         self.timeout_ms)
