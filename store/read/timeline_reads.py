"""The reads behind a run's timeline (:mod:`store.read.timeline`), for the dashboard's reader
and a workspace Database alike, on both backends.

:func:`read_timeline` reads the run and its node rows only (the columns a bar needs: no
output, no error), one indexed range of the ``nodes`` primary key however many nodes the run
has. :func:`read_details` reads, for the node iterations a view shows, their attempts (no
prompt or answer), calls and memory-tool events, each one query through a primary key or
``calls_node_idx``/``events_run_idx``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from store.errors import NotFoundError
from store.model.history_records import EventRecord
from store.model.run_records import AttemptRecord, CallRecord, NodeRecord, RunRecord
from store.model.wording import plural
from store.read.dashboard_sql import RUN_COLUMNS
from store.read.off_loop import off_the_loop
from store.read.run_search import Rows
from store.read.timeline import NodeDetail, RunTimeline, SteerMark, ToolCall, build_timeline

TIMELINE_RUN = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"

TIMELINE_NODES = """
SELECT run_id, node_id, iteration, state, attempts, cached, depends_on_json,
       NULL AS output_json, NULL AS error, started_at_ms, finished_at_ms, updated_at_ms
FROM nodes WHERE run_id = ?
ORDER BY started_at_ms IS NULL, started_at_ms, node_id, iteration
"""

_NODE_SET = "run_id = :run_id AND node_id IN (SELECT value FROM json_each(:nodes))"

DETAIL_ATTEMPTS = f"""
SELECT run_id, node_id, iteration, attempt, state, agent, model, NULL AS prompt,
       NULL AS response_text, NULL AS error, cached, started_at_ms, finished_at_ms,
       input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
       cost_usd, unpriced_calls
FROM attempts WHERE {_NODE_SET}
ORDER BY node_id, iteration, attempt
"""

DETAIL_CALLS = f"""
SELECT call_id, run_id, node_id, iteration, attempt, agent, model, simulated, input_tokens,
       cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, context_tokens,
       bucket, started_at_ms, finished_at_ms, cost_usd, kind, detail_json
FROM calls WHERE {_NODE_SET}
ORDER BY node_id, iteration, attempt, call_id
"""

DETAIL_TOOL_EVENTS = f"""
SELECT seq, at_ms, type, run_id, node_id, iteration, attempt, payload_json FROM events
WHERE {_NODE_SET} AND type = 'memory.tool'
ORDER BY seq
"""

DETAIL_STEERS = f"""
SELECT node_id, iteration, attempt, decided_at_ms, state, sent_by, message, deliver FROM steers
WHERE {_NODE_SET} AND state != 'queued' ORDER BY position
"""

MAX_DETAIL_NODES = 400
"""Node iterations whose details one read fetches (a screen shows far fewer)."""


async def read_timeline(rows: Rows, run_id: str, now_ms: int) -> RunTimeline:
    """The run's timeline from its node rows (no attempt read yet). Raises NotFoundError."""
    found = await rows.fetch_all(TIMELINE_RUN, (run_id,))
    if not found:
        raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
    run = RunRecord.from_row(found[0])
    fetched = await rows.fetch_all(TIMELINE_NODES, (run_id,))
    # Off the event loop: 10 000 node rows take a while to turn into bars, and the dashboard
    # keeps drawing and taking keys meanwhile (the command line has no loop: built here).
    return await off_the_loop(_build, run, fetched, now_ms)


def _build(run: RunRecord, fetched: Sequence[Any], now_ms: int) -> RunTimeline:
    return build_timeline(run, [timeline_node(row) for row in fetched], now_ms)


def timeline_node(row: Any) -> NodeRecord:
    """A :data:`TIMELINE_NODES` row as a node record (by position: quicker than by name for
    10 000 rows, and both backends' rows index)."""
    return NodeRecord(row[0], row[1], int(row[2]), row[3], int(row[4]), bool(row[5]), row[6],
                      None, None, row[9], row[10], int(row[11]))


def memory_tool_call(event: EventRecord) -> ToolCall | None:
    """A ``memory.tool`` event as a tool call of its attempt (None without an attempt)."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    attempt = event.attempt or payload.get("attempt")
    if not isinstance(attempt, int) or event.node_id is None:
        return None
    name = str(payload.get("tool") or "memory")
    detail = ""
    items = payload.get("items")
    if isinstance(items, list):
        detail = plural(len(items), "item")
    elif payload.get("note_id"):
        detail = f"note {payload['note_id']} ({payload.get('status', '?')})"
    if payload.get("error"):
        detail = str(payload["error"])
    return ToolCall(f"{event.node_id}#{event.iteration or 0}", attempt, event.at_ms,
                    event.at_ms, name, bool(payload.get("ok", True)), detail, exact=True)


async def read_details(
    rows: Rows, run_id: str, node_keys: Iterable[str]
) -> dict[str, NodeDetail]:
    """Attempts, calls and memory-tool calls of the node iterations ``node_keys`` (at most
    :data:`MAX_DETAIL_NODES`), keyed like the keys given."""
    keys = list(dict.fromkeys(node_keys))[:MAX_DETAIL_NODES]
    if not keys:
        return {}
    wanted = set(keys)
    names = sorted({key.rsplit("#", 1)[0] for key in keys})
    params = {"run_id": run_id, "nodes": json.dumps(names)}
    attempts: dict[str, list[AttemptRecord]] = defaultdict(list)
    for row in await rows.fetch_all(DETAIL_ATTEMPTS, params):
        record = AttemptRecord.from_row(row)
        attempts[f"{record.node_id}#{record.iteration}"].append(record)
    calls: dict[str, list[CallRecord]] = defaultdict(list)
    for row in await rows.fetch_all(DETAIL_CALLS, params):
        call = CallRecord.from_row(row)
        calls[f"{call.node_id}#{call.iteration}"].append(call)
    tools: dict[str, list[ToolCall]] = defaultdict(list)
    for row in await rows.fetch_all(DETAIL_TOOL_EVENTS, params):
        tool = memory_tool_call(EventRecord.from_row(row))
        if tool is not None:
            tools[tool.node_key].append(tool)
    steers: dict[str, list[SteerMark]] = defaultdict(list)
    for node_id, iteration, attempt, at_ms, state, sent_by, message, deliver in (
        await rows.fetch_all(DETAIL_STEERS, params)
    ):
        said = message if len(message) <= 80 else message[:79] + "…"
        verb = "steer from" if state == "delivered" else "steer refused, from"
        if deliver == "next-attempt":  # read at the attempt's start, first in its prompt
            verb = verb.replace("steer", "steer for the next attempt", 1)
        steers[f"{node_id}#{iteration}"].append(
            SteerMark(int(attempt or 0), int(at_ms or 0), f"{verb} {sent_by}: {said}",
                      state == "delivered"))
    return {
        key: NodeDetail(tuple(attempts.get(key, ())), tuple(calls.get(key, ())),
                        tuple(tools.get(key, ())), tuple(steers.get(key, ())))
        for key in keys if key in wanted
    }


def merge_tools(detail: NodeDetail, extra: Sequence[ToolCall]) -> NodeDetail:
    """``detail`` with more tool calls (an agent CLI's, read from its log)."""
    if not extra:
        return detail
    return detail._replace(tools=tuple(sorted((*detail.tools, *extra), key=lambda t: t.start_ms)))
