"""The live export, as it runs in the export process (:mod:`engine.telemetry.otel_process`):
a thread follows the workspace's event log (as the dashboard does: by sequence number, never
holding a transaction), and as the engines' runs record attempts and end, reads those
records, maps them (:mod:`engine.telemetry.otel_mapping`) and queues the spans and measurements
for the collector (:mod:`engine.telemetry.otel_pipeline`).

It exports the runs of the engines whose owner ids it was given, from the events written since
``since_ms`` (when the first of those engines opened) on; stopping reads what is left and
sends it within ``shutdown_timeout_s``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from engine.telemetry.otel_history import attempt_bundle, run_bundle
from engine.telemetry.otel_mapping import Options, map_attempt, map_run
from engine.telemetry.otel_pipeline import SpanQueue, SpanSender
from engine.telemetry.otel_semconv import AgentKind
from engine.telemetry.otel_settings import ExportTarget
from engine.telemetry.otel_status import ExportStatus, report
from store.model.history_records import EventRecord
from store.model.run_records import TERMINAL_RUN_STATUSES, RunRecord
from store.model.wording import plural
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

PAGE = 1000
"""Events read per step of the tail."""
MAX_TOOL_EVENTS = 256
"""Tool events kept per node iteration while its attempt runs."""
MAX_RUNS_KNOWN = 4096
"""Runs whose owner the tail remembers."""
RUN_EVENTS = ("run.created", "run.resumed", "run.status")
ATTEMPT_ENDS = ("attempt.finished", "attempt.abandoned")


class LiveExport:
    """Exports the runs of this process's engines on one workspace as they record them."""

    def __init__(self, workspace: Workspace, target: ExportTarget,
                 kinds: Mapping[str, AgentKind], since_ms: int) -> None:
        from engine.telemetry.otel_sdk import SdkBridge

        self.workspace = workspace
        self.target = target
        self.since_ms = since_ms
        self.options = Options(content=target.capture_content, kinds=dict(kinds))
        self.status = ExportStatus(
            target.shown, target.protocol, metrics_endpoint=target.metrics_shown
        )
        self.owners: set[str] = set()
        self._joining: queue.SimpleQueue[tuple[str, int]] = queue.SimpleQueue()
        """Owners announced but not yet taken in by the tail thread, each with when its engine
        opened: their events may already have gone past the cursor."""
        self.sdk = SdkBridge(target, self.status)
        self.queue = SpanQueue(target.queue_size, self.status)
        self.sender = SpanSender(self.queue, self.sdk.export_spans, target.batch_size,
                                 target.interval_s)
        self._runs: OrderedDict[str, RunRecord | None] = OrderedDict()
        self._tools: dict[tuple[str, str, int], list[EventRecord]] = {}
        self._blocks: set[tuple[str, str, int, int]] = set()
        """Attempts whose recall block the event log announced (only those are read)."""
        self._cursor: int | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="tether-otlp-tail",
                                        daemon=True)
        self.sender.start()
        self._thread.start()

    def add_owner(self, owner_id: str, since_ms: int | None = None) -> None:
        """Export the runs of the engine with this owner id too, from the events written since
        ``since_ms`` (when that engine opened; default: this export's own start)."""
        self._joining.put((owner_id, self.since_ms if since_ms is None else since_ms))

    # -- the tail thread -----------------------------------------------------------------------

    def _follow(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._follow_async())
        except Exception as error:  # the export stops; a run never notices
            self.status.unavailable(f"it stopped reading the workspace: {error}")
            report(f"telemetry: the export stopped reading the workspace ({error}).")
        finally:
            loop.close()

    async def _follow_async(self) -> None:
        from store.db.backends import open_in_thread

        db = await open_in_thread(self.workspace, create=False, read_only=True)
        try:
            store = RunStore(db)
            if self._cursor is None:
                self._cursor = await _seq_before(db, self.since_ms)
            while True:
                stopping = self._stopping.is_set()
                await self._take_in_owners(store, db)
                await self._catch_up(store)
                if stopping:
                    return
                self._stopping.wait(self.target.interval_s)
        finally:
            await db.close()

    async def _take_in_owners(self, store: RunStore, db: Any) -> None:
        """Add the owners announced since the last step. The announcement travels on a pipe
        while the engine already writes, so the tail may have passed that engine's first
        events: those are read again, for that owner only, before the owner joins."""
        while True:
            try:
                owner_id, since_ms = self._joining.get_nowait()
            except queue.Empty:
                return
            if owner_id in self.owners:
                continue
            seq = await _seq_before(db, since_ms)
            end = self._cursor or 0
            while seq < end:
                page = await store.events_since(seq, limit=PAGE)
                if not page:
                    break
                for event in page:
                    if event.seq > end:
                        break
                    await self._take(store, event, owners={owner_id})
                seq = page[-1].seq
            self.owners.add(owner_id)

    async def _catch_up(self, store: RunStore) -> None:
        while True:
            page = await store.events_since(self._cursor or 0, limit=PAGE)
            for event in page:
                await self._take(store, event, owners=self.owners)
                self._cursor = event.seq
            if len(page) < PAGE:
                return

    async def _take(self, store: RunStore, event: EventRecord, owners: set[str]) -> None:
        run_id = event.run_id
        if run_id is None:
            return
        if event.type in RUN_EVENTS or run_id not in self._runs:
            self._remember(run_id, await store.find_run(run_id))
        run = self._runs.get(run_id)
        if run is None or run.owner_id not in owners:
            return
        if event.type == "memory.block" and event.node_id is not None:
            self._blocks.add((run_id, event.node_id, event.iteration or 0, event.attempt or 0))
        elif event.type == "memory.tool" and event.node_id is not None:
            kept = self._tools.setdefault((run_id, event.node_id, event.iteration or 0), [])
            kept.append(event)
            del kept[:-MAX_TOOL_EVENTS]
        elif event.type in ATTEMPT_ENDS and event.node_id is not None:
            key = (run_id, event.node_id, event.iteration or 0)
            block = (*key, event.attempt or 0)
            bundle = await attempt_bundle(
                store, run.workflow, run_id, event.node_id, event.iteration or 0,
                event.attempt or 0, self._tools.get(key, ()), with_block=block in self._blocks,
            )
            self._blocks.discard(block)
            if bundle is not None:
                self._tools.pop(key, None)
                self._send(map_attempt(bundle, self.options))
        elif event.type == "run.status" and run.is_terminal and _ends_run(event):
            self._send(map_run(await run_bundle(store, run), self.options))
            for key in [k for k in self._tools if k[0] == run_id]:
                del self._tools[key]
            self._blocks = {k for k in self._blocks if k[0] != run_id}

    def _remember(self, run_id: str, run: RunRecord | None) -> None:
        self._runs[run_id] = run
        self._runs.move_to_end(run_id)
        while len(self._runs) > MAX_RUNS_KNOWN:
            self._runs.popitem(last=False)

    def _send(self, mapped: Any) -> None:
        self.queue.offer(mapped.spans)
        self.sdk.record(mapped.measurements)

    # -- the end ---------------------------------------------------------------------------------

    def stop(self, timeout_s: float | None = None) -> None:
        """Read what is left, send it within ``timeout_s`` (default: the target's
        ``shutdown_timeout_s``), and stop every thread of this export."""
        budget = self.target.shutdown_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + budget
        self._stopping.set()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        complete = self.sender.stop(deadline)
        self.sdk.shutdown(max(0.0, deadline - time.monotonic()))
        state = self.status.snapshot()
        if not complete or state.spans_dropped or state.spans_failed:
            lost = state.spans_dropped + state.spans_failed + len(self.queue)
            report(
                f"telemetry: {plural(lost, 'span')} did not reach {state.endpoint}; send them "
                "with: tether export otlp --since 1d"
            )


def _ends_run(event: EventRecord) -> bool:
    """True for the status event that ended the run (a tail running behind sees a run already
    ended at its earlier status events too: those must not send it again)."""
    payload = event.payload
    return isinstance(payload, dict) and payload.get("status") in TERMINAL_RUN_STATUSES


async def _seq_before(db: Any, at_ms: int) -> int:
    """The newest event written before ``at_ms`` (0 when there is none): the tail starts after
    it. Read backwards from the newest event, so only what came since is looked at."""
    from store.runs.events_sql import LAST_EVENT_BEFORE

    return int(await db.fetch_value(LAST_EVENT_BEFORE, (at_ms,)) or 0)
