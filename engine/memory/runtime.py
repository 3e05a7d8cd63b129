"""The memory runtime: what the scheduler calls for a task with a memory config.

* :meth:`MemoryRuntime.block_for` recalls under a timeout (``TETHER_MEMORY_TIMEOUT_MS``,
  default 2000 ms) and builds the block. Every outcome is persisted per run/node/iteration with
  its accounting: the block, or "no block because ..." (recall off, nothing matched, nothing
  fitted, timed out, failed). A timeout or error also appends a ``memory.warning`` event and the
  task runs on its own prompt: memory never fails a task. Retries of the same node and
  iteration, also after a resume in another process, reuse the persisted block, so every
  attempt of a node iteration sees the same prompt.
* :meth:`MemoryRuntime.retain_in_background` writes a bounded digest of a successful output as a
  note (provenance run/node/iteration, status as configured) without delaying completion; a
  failure is a warning event only. :meth:`MemoryRuntime.drain` waits for pending writes.
* :meth:`MemoryRuntime.tools_for` offers ``remember`` and ``recall`` to the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from engine.agents.agent_tool import AgentTool
from engine.memory.answered_turns import with_answered_turns
from engine.memory.block import MemoryBlock, build_block, utf8_len
from engine.memory.encoders import choose_kind
from engine.memory.keyword_recall import KeywordRecallBackend, RecallBackend
from engine.memory.memory_access import (
    RECALL_LIMIT,
    MemoryAccess,
    recall_request,
    recall_with_timeout,
    timeout_from_env,
)
from engine.memory.memory_config import MemoryConfig
from engine.memory.memory_tools import build_memory_tools
from engine.memory.prepared_block import (
    RETAIN_MAX_BYTES,
    PreparedBlock,
    block_items_record,
    retain_digest,
    retained_note_id,
)
from engine.memory.recall_items import RecallItem, without_repeats
from engine.memory.recall_mode import MemorySettings, ModeChoice, resolve_mode
from engine.memory.semantic_recall import (
    LOADING,
    UNAVAILABLE,
    EncoderSource,
    HybridRecallBackend,
    SemanticRecallBackend,
)
from engine.memory.tag_rules import write_tags_for
from store.clock import Clock
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.model.wording import plural
from store.runs.run_store import RunStore

MAX_CACHED_BLOCKS = 4096
# The first recall of a process waits this share of the recall timeout for the model still
# loading; the rest is left for the recall itself.
LOAD_WAIT_SHARE = 0.75

Key = tuple[str, str, int]


class MemoryRuntime(MemoryAccess):
    """Recall blocks, retention and memory tools for one workspace (see the module docstring)."""

    def __init__(
        self,
        db: Database,
        memory_store: MemoryStore | None = None,
        clock: Clock | None = None,
        *,
        timeout_ms: int | None = None,
        recall_backend: RecallBackend | None = None,
        retain_max_bytes: int = RETAIN_MAX_BYTES,
        settings: MemorySettings | None = None,
        encoder_source: EncoderSource | None = None,
    ) -> None:
        self.db = db
        self.memory = memory_store or MemoryStore(db)
        self.clock = clock or db.clock
        self.timeout_ms = timeout_ms if timeout_ms is not None else timeout_from_env()
        self.settings = settings or MemorySettings()
        self._fixed = recall_backend
        self.keyword = KeywordRecallBackend(db)
        kind, self.encoder_why = choose_kind(self.settings.encoder)
        self.semantic: SemanticRecallBackend | None = None
        self.hybrid: HybridRecallBackend | None = None
        if kind is not None:
            self.semantic = SemanticRecallBackend(
                db, kind=kind, source=encoder_source, requested=self.settings.encoder)
            self.hybrid = HybridRecallBackend(db, keyword=self.keyword, semantic=self.semantic)
        self.runs = RunStore(db)
        self.retain_max_bytes = retain_max_bytes
        self._blocks: dict[Key, PreparedBlock] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self._pending_by_run: dict[str, set[asyncio.Task[None]]] = {}
        self._prompts: dict[Key, str] = {}

    # -- which recall --------------------------------------------------------------------------

    def choice(self, mode: str | None) -> ModeChoice:
        """The recall mode in force for a task asking ``mode`` (None: the workspace's), and
        why (:func:`engine.memory.recall_mode.resolve_mode`)."""
        return resolve_mode(mode, self.settings, self.semantic is not None, self.encoder_why)

    @property
    def backend(self) -> RecallBackend:
        """The backend of a task that names no mode (a backend set here answers every task)."""
        return self._fixed or self._by_mode(self.choice(None).mode)

    @backend.setter
    def backend(self, value: RecallBackend) -> None:
        self._fixed = value

    def _by_mode(self, mode: str) -> RecallBackend:
        if mode == "hybrid" and self.hybrid is not None:
            return self.hybrid
        if mode == "semantic" and self.semantic is not None:
            return self.semantic
        return self.keyword

    def backend_for_config(self, config: MemoryConfig) -> RecallBackend:
        """The backend that answers a task with ``config`` (a backend given to the runtime
        answers every task)."""
        if self.semantic is not None:  # the model still loading is waited for within the timeout
            self.semantic.load_wait_s = self.timeout_ms * LOAD_WAIT_SHARE / 1000
        return self._fixed or self._by_mode(self.choice(config.mode).mode)

    def warm_up(self, configs: list[MemoryConfig]) -> None:
        """Start loading the encoder now when any of ``configs`` will recall with it (called
        at engine and server start), so the first recall is not keyword-only."""
        if self._fixed is not None or self.semantic is None:
            return
        if any((c.recall != "off" or c.tools) and self.choice(c.mode).mode != "keyword"
               for c in configs):
            self.semantic.start_loading()

    def written(self) -> None:
        """A note or fact was written: the encoder embeds it in the background."""
        if self._fixed is not None:
            super().written()
        elif self.semantic is not None and self.settings.mode != "keyword":
            self.semantic.written().add_done_callback(_ignore)

    # -- the recall block --------------------------------------------------------------------

    async def block_for(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        attempt: int,
        config: MemoryConfig,
        task_prompt: str,
    ) -> PreparedBlock:
        """The memory block for an attempt (see the module docstring). Never raises: recall
        problems become a recorded warning and no block; if even the record cannot be written
        the task still runs on its own prompt (that attempt only; a retry tries again)."""
        key = (run_id, node_id, iteration)
        self._prompts[key] = task_prompt
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._blocks:
                return self._blocks[key]
            try:
                stored = await self.runs.get_memory_block(run_id, node_id, iteration)
                if stored is not None:
                    prepared = PreparedBlock.from_record(stored)
                else:
                    prepared = await self._recall_and_store(
                        run_id, node_id, iteration, attempt, config, task_prompt
                    )
            except Exception as error:
                message = (
                    f"memory block unavailable ({type(error).__name__}: {error}); "
                    "the task ran without recalled memory"
                )
                with contextlib.suppress(Exception):
                    await self._warn(run_id, node_id, iteration, attempt, message)
                return PreparedBlock(None, False, True, message, budget_bytes=0)
            self._remember(key, prepared)
            return prepared

    def _remember(self, key: Key, prepared: PreparedBlock) -> None:
        """Keep the block for further attempts in this process, bounded: the persisted record
        stays the source of truth, so an evicted block is simply read back."""
        self._blocks[key] = prepared
        while len(self._blocks) > MAX_CACHED_BLOCKS:
            oldest = next(iter(self._blocks))
            del self._blocks[oldest]
            self._prompts.pop(oldest, None)
            lock = self._locks.get(oldest)
            if lock is not None and not lock.locked():
                del self._locks[oldest]

    def forget_run(self, run_id: str) -> None:
        """Drop what this process keeps of a run's blocks once it stops executing here (the
        persisted records stay; a resume reads them back). A dashboard's engine runs for hours:
        without this every finished run's blocks and prompts stayed in memory."""
        for key in [k for k in self._prompts if k[0] == run_id]:
            self._prompts.pop(key, None)
            self._blocks.pop(key, None)
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]

    async def _recall_and_store(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        attempt: int,
        config: MemoryConfig,
        task_prompt: str,
    ) -> PreparedBlock:
        budget = config.effective_budget
        query = config.query_for(task_prompt)
        started = time.monotonic()
        block: MemoryBlock | None = None
        degraded = False
        primers, missing = await self._primers(config)
        notes = [f"primer {pid} is not a note of {', '.join(config.namespaces)}; left out"
                 for pid in missing]
        items: tuple[RecallItem, ...] = ()
        warning: str | None = None
        if query is None:
            if not primers:
                warning = "no block: recall is off for this task"
        else:
            await self.settle_retains(run_id)
            request = recall_request(config, query, RECALL_LIMIT)
            choice = self.choice(config.mode)
            result = await recall_with_timeout(self.backend_for_config(config), request,
                                               self.timeout_ms)
            loading = result.details.get("mode") == LOADING
            if choice.fallback_from and self._fixed is None:
                notes.append(choice.why)
            elif loading:
                notes.append("semantic model loading: recalled by keyword only")
            elif result.details.get("mode") == UNAVAILABLE:
                notes.append("the semantic model could not be loaded: recalled by keyword only")
            if result.degraded:
                degraded = True
                warning = f"{result.reason}; the task ran without recalled memory"
            else:
                primer_ids = {p.id for p in primers}
                distinct, repeats = without_repeats(
                    [i for i in result.items if i.id not in primer_ids])
                if repeats:
                    count = sum(len(found) for found in repeats.values())
                    notes.append(f"{plural(count, 'recalled item')} repeating a "
                                 "higher-ranked item's text left out")
                items = await with_answered_turns(self.db, distinct)
                if not items and not primers:
                    warning = (
                        f"no block: keyword recall found nothing in "
                        f"{', '.join(config.namespaces)} while the semantic model was loading"
                        if loading else
                        f"no block: nothing in {', '.join(config.namespaces)} matched the query")
        if (items or primers) and not degraded:
            block = build_block(items, budget, primers=primers)
            if not block.text:
                warning = "no block: no recalled item fitted the budget"
        elif degraded and primers:
            block = build_block((), budget, primers=primers)
        if notes:
            warning = "; ".join([*notes, *([warning] if warning else [])])
        duration_ms = int((time.monotonic() - started) * 1000)
        block_id = await self.runs.save_memory_block(
            run_id,
            node_id,
            iteration,
            attempt=attempt,
            text=block.text if block else None,
            budget_bytes=budget,
            bytes_used=block.bytes_used if block else 0,
            items=block_items_record(block) if block else [],
            query=query,
            banks=config.namespaces,
            truncated=block.truncated if block else False,
            warning=warning,
            degraded=degraded,
            duration_ms=duration_ms,
        )
        if degraded:
            await self._warn(run_id, node_id, iteration, attempt, warning or "recall degraded")
        return PreparedBlock(
            text=block.text if block else None,
            reused=False,
            degraded=degraded,
            warning=warning,
            item_ids=block.item_ids if block else (),
            bytes_used=block.bytes_used if block else 0,
            budget_bytes=budget,
            truncated=block.truncated if block else False,
            block_id=block_id,
        )

    async def _primers(self, config: MemoryConfig) -> tuple[list[RecallItem], list[str]]:
        """The configured primer notes found in the task's banks (any status: a mental model
        is named on purpose), in the configured order, and the ids that were not found."""
        found: list[RecallItem] = []
        missing: list[str] = []
        for primer_id in config.primers:
            note = await self.memory.get_note(primer_id)
            if note is None or note.namespace not in config.namespaces:
                missing.append(primer_id)
                continue
            found.append(RecallItem(f"note:{note.id}", "primer", note.namespace, None,
                                    note.body, 0.0, (), note.tags, note.created_at_ms,
                                    None, ("primer",)))
        return found, missing

    async def _warn(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        attempt: int | None,
        message: str,
        **details: Any,
    ) -> None:
        await self.runs.append_event(
            "memory.warning",
            run_id=run_id,
            node_id=node_id,
            iteration=iteration,
            attempt=attempt,
            payload={"warning": message, **details},
        )

    # -- retention ---------------------------------------------------------------------------

    def retain_in_background(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        config: MemoryConfig,
        task_prompt: str,
        output: Any,
    ) -> None:
        """After success: write the output digest as a note per configured bank, in the
        background (nothing when retain is off). :meth:`drain` waits for the writes."""
        if config.retain != "on-complete":
            return
        task = asyncio.create_task(self._retain(run_id, node_id, iteration, config, output))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        run_tasks = self._pending_by_run.setdefault(run_id, set())
        run_tasks.add(task)

        def forget(done: asyncio.Task[None]) -> None:
            run_tasks.discard(done)
            if not run_tasks and self._pending_by_run.get(run_id) is run_tasks:
                del self._pending_by_run[run_id]

        task.add_done_callback(forget)

    async def settle_retains(self, run_id: str) -> None:
        """Let this run's background retention land before a later task recalls (bounded by the
        recall timeout), so a run reads its own retained notes; completion is never delayed."""
        pending = self._pending_by_run.get(run_id)
        if pending:
            await asyncio.wait(list(pending), timeout=self.timeout_ms / 1000)

    async def _retain(
        self, run_id: str, node_id: str, iteration: int, config: MemoryConfig, output: Any
    ) -> None:
        try:
            body = retain_digest(node_id, output, self.retain_max_bytes)
            saved = []
            for namespace in config.namespaces:
                note_id = retained_note_id(run_id, node_id, iteration, namespace)
                if await self.memory.get_note(note_id) is not None:
                    continue  # written before this run was resumed (and maybe reviewed since)
                tags = write_tags_for(namespace, config.tags, (), "run")
                note = await self.memory.save_note(
                    namespace,
                    body,
                    note_id=note_id,
                    kind="retained",
                    tags=tags,
                    author=f"task:{node_id}",
                    status=config.effective_retain_status,
                    run_id=run_id,
                    node_id=node_id,
                    iteration=iteration,
                )
                saved.append(note.id)
            if not saved:
                return
            self.written()
            await self.runs.append_event(
                "memory.retained",
                run_id=run_id,
                node_id=node_id,
                iteration=iteration,
                payload={
                    "note_ids": saved,
                    "status": config.effective_retain_status,
                    "bytes": utf8_len(body),
                },
            )
        except Exception as error:  # retention is best effort: a warning, never a failure
            with contextlib.suppress(Exception):
                await self._warn(
                    run_id,
                    node_id,
                    iteration,
                    None,
                    f"memory retention failed after the task succeeded: "
                    f"{type(error).__name__}: {error}",
                )

    async def drain(self) -> None:
        """Wait until every background retention (and the embedding of what it wrote) has
        finished (used at shutdown and in tests)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        drain = getattr(self._fixed or self.semantic, "drain", None)
        if drain is not None:
            with contextlib.suppress(Exception):
                await drain()

    # -- tools -------------------------------------------------------------------------------

    def tools_for(
        self, run_id: str, node_id: str, iteration: int, config: MemoryConfig
    ) -> list[AgentTool]:
        """``remember`` and ``recall`` bound to this node iteration (empty when tools are off)."""
        if not config.tools:
            return []
        prompt = self._prompts.get((run_id, node_id, iteration), "")
        return build_memory_tools(self, run_id, node_id, iteration, config, prompt)


def _ignore(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(BaseException):
        task.exception()
