"""Run records: the one API every process uses to write and read runs, nodes, attempts, calls,
token usage, memory blocks, handoffs and the event log.

Every write is one short transaction that also appends the events describing it, so the event
log (``events.seq``, monotonic) never disagrees with the rows it reports. Typical use::

    store = RunStore(db)
    run = await store.create_run("code-review", input={"repo": "x"}, nodes_total=3)
    await store.upsert_node(run.run_id, "plan", 0, "running")
    await store.start_attempt(run.run_id, "plan", 0, 1, agent="simulated")
    await store.record_call(CallUsage(run.run_id, "plan", 0, 1, agent="simulated",
                                      usage=TokenUsage(input=1200, cache_read=300)))
    await store.finish_attempt(run.run_id, "plan", 0, 1, "finished", usage=...,
                               node_state="finished", node_output={...})

Names follow BRIEF section 2. Statuses: ``RUN_STATUSES``, ``NODE_STATES`` and
``ATTEMPT_STATES`` in :mod:`store.db.sqlite.sqlite_schema`. A running run whose heartbeat is older
than ``STALE_AFTER_MS`` is *stale*: :meth:`RunRecord.display_status` reports it so.

Event types written here (``EventRecord.type``):
``run.created``, ``run.status``, ``run.cancel-requested``, ``run.clear-requested``,
``run.resumed``, ``run.deleted``, ``node.state``, ``attempt.started``, ``attempt.finished``,
``attempt.abandoned``, ``attempt.placed``, ``executor.nodes``, ``call``, ``memory.block``,
``handoff``, ``budget.alert``, ``steer.queued``, ``steer.delivered``, ``steer.refused``,
plus whatever callers append with
:meth:`RunStore.append_events` (the engine adds ``cache.hit``, ``cache.invalid``, ``warning``
and ``executor.reaped``).

Where the parts live: value types in :mod:`store.model.run_records` and
:mod:`store.model.history_records`; runs in :mod:`store.runs.run_log`, nodes in
:mod:`store.runs.node_log`, attempts in :mod:`store.runs.attempt_log`, handoffs in
:mod:`store.runs.handoff_log`, the event log in :mod:`store.runs.event_log`, calls and usage
rollups in :mod:`store.runs.call_usage`, spend per day and budget alerts in
:mod:`store.runs.budget_log`, memory blocks in :mod:`store.memory.memory_blocks`,
process ownership in :mod:`store.runs.owners`; this module puts them together.
"""

from __future__ import annotations

from store.memory.memory_blocks import MemoryBlockLog
from store.runs.attempt_log import AttemptLog
from store.runs.budget_log import BudgetLog
from store.runs.call_usage import CallLog
from store.runs.executor_log import ExecutorLog
from store.runs.handoff_log import HandoffLog
from store.runs.steer_log import SteerLog


class RunStore(HandoffLog, AttemptLog, CallLog, BudgetLog, MemoryBlockLog, ExecutorLog,
               SteerLog):
    """Reads and writes run records on an open workspace database (:mod:`store.db.seam`):
    runs (:mod:`store.runs.run_log`), handoffs (:mod:`store.runs.handoff_log`), nodes and
    attempts (:mod:`store.runs.node_log`, :mod:`store.runs.attempt_log`), calls
    (:mod:`store.runs.call_usage`), memory blocks (:mod:`store.memory.memory_blocks`) and the
    events of each (:mod:`store.runs.event_log`)."""
