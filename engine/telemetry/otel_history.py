"""Reading what a run recorded into the bundles :mod:`engine.telemetry.otel_mapping` maps: one
attempt as it ends (the live exporter) or a whole run (``tether export otlp``), through the
same :class:`~store.runs.run_store.RunStore` reads every front end uses."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from engine.telemetry.otel_mapping import AttemptBundle, RunBundle, tools_of_attempt
from store.model.history_records import EventRecord, MemoryBlockRecord
from store.model.run_records import AttemptRecord, CallRecord, RunRecord
from store.runs.event_log import MAX_READ_LIMIT
from store.runs.run_store import RunStore


async def run_bundle(store: RunStore, run: RunRecord) -> RunBundle:
    """A run with the handoff it started from and the one it ended with."""
    into = await store.list_handoffs(to_run_id=run.run_id)
    out = await store.list_handoffs(from_run_id=run.run_id)
    return RunBundle(run, into[-1] if into else None, out[-1] if out else None)


async def attempt_bundle(
    store: RunStore,
    workflow: str,
    run_id: str,
    node_id: str,
    iteration: int,
    attempt: int,
    tool_events: Sequence[EventRecord] = (),
    *,
    with_block: bool = True,
) -> AttemptBundle | None:
    """One attempt with its calls, the recall block it built (read only ``with_block``: the
    live export knows from the event log whether there is one) and the tool events of
    ``tool_events`` that happened in it; None when the attempt is not there (deleted)."""
    attempts = await store.list_attempts(run_id, node_id, iteration)
    found = next((a for a in attempts if a.attempt == attempt), None)
    if found is None:
        return None
    later = next((a for a in attempts if a.attempt > attempt), None)
    calls = await store.calls_of_attempts(run_id, node_id, iteration, attempt, attempt)
    block = await store.get_memory_block(run_id, node_id, iteration) if with_block else None
    return AttemptBundle(
        workflow,
        found,
        calls,
        block if block is not None and block.attempt == attempt else None,
        tools_of_attempt(found, tool_events, later),
    )


async def run_events(store: RunStore, run_id: str, types: Sequence[str]) -> list[EventRecord]:
    """Every event of a run of one of ``types``, oldest first (read page by page)."""
    found: list[EventRecord] = []
    seq = 0
    while True:
        page = await store.events_since(seq, run_id=run_id, limit=MAX_READ_LIMIT)
        found.extend(event for event in page if event.type in types)
        if len(page) < MAX_READ_LIMIT:
            return found
        seq = page[-1].seq


async def run_history(store: RunStore, run: RunRecord) -> tuple[RunBundle, list[AttemptBundle]]:
    """Everything a run recorded: the run and every attempt that ended, in order."""
    attempts: list[AttemptRecord] = []
    seen: set[str] = set()
    for node in await store.list_nodes(run.run_id):
        if node.node_id not in seen:
            seen.add(node.node_id)
            attempts.extend(await store.list_attempts(run.run_id, node.node_id))
    calls: dict[tuple[str, int, int], list[CallRecord]] = defaultdict(list)
    for call in await store.list_calls(run.run_id):
        calls[(call.node_id, call.iteration, call.attempt)].append(call)
    blocks: dict[tuple[str, int, int], MemoryBlockRecord] = {
        (b.node_id, b.iteration, b.attempt): b for b in await store.list_memory_blocks(run.run_id)
    }
    tools = await run_events(store, run.run_id, ("memory.tool",))
    bundles = []
    for index, attempt in enumerate(attempts):
        if attempt.state == "running":
            continue
        following = attempts[index + 1] if index + 1 < len(attempts) else None
        later = (
            following
            if following is not None
            and (following.node_id, following.iteration) == (attempt.node_id, attempt.iteration)
            else None
        )
        key = (attempt.node_id, attempt.iteration, attempt.attempt)
        bundles.append(
            AttemptBundle(
                run.workflow,
                attempt,
                calls.get(key, []),
                blocks.get(key),
                tools_of_attempt(attempt, tools, later),
            )
        )
    return await run_bundle(store, run), bundles
