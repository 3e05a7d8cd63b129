"""Events of the writes that hold theirs (an attempt's start, its calls, its end: see
store.runs.event_log.HeldEvents): on SQLite those of a run of such writes in one group commit
are appended by one statement when the run ends. The log reads the same as when each write
appended its own: in submission order, each at its write's time, and a write that fails in
the group loses its own events only. Both backends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from store.clock import ManualClock
from store.db.seam import Database
from store.model.run_records import CallUsage, RunRequests
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore


async def _later(write: Callable[[], Awaitable[Any]]) -> Any:
    return await write()


def _together(*writes: Callable[[], Awaitable[Any]]) -> list[asyncio.Future[Any]]:
    """The writes as tasks made in this order: each submits in its first step, all before the
    group commit gathers them (so they share one)."""
    return [asyncio.ensure_future(_later(write)) for write in writes]


def _attempt_writes(store: RunStore, run_id: str, node: str) -> list[Callable[[], Any]]:
    usage = TokenUsage(input=10, output=2)
    return [
        lambda: store.start_attempt(run_id, node, 0, 1, agent="a", prompt="p"),
        lambda: store.queue_calls([CallUsage(run_id, node, 0, 1, "a", usage, simulated=True)]),
        lambda: store.finish_attempt(run_id, node, 0, 1, "finished", usage=usage,
                                     node_state="finished", node_output="ok",
                                     set_node_output=True, nodes_done=1),
    ]


async def _log(store: RunStore, since: int) -> list[tuple[str, str | None, int]]:
    return [(e.type, e.node_id, e.at_ms) for e in await store.events_since(since)]


async def test_a_write_holding_none_between_keeps_its_place(
    db: Database, clock: ManualClock
) -> None:
    store = RunStore(db)
    run = await store.create_run("wf")
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", [])])
    since = await store.last_event_seq()
    start, call, end = _attempt_writes(store, run.run_id, "a")
    now = clock.now_ms()
    writes = _together(
        start, call,
        lambda: store.append_event("note", run_id=run.run_id, payload={"n": 1}),
        end,
    )
    await asyncio.gather(*writes)
    assert await _log(store, since) == [
        ("node.state", "a", now), ("attempt.started", "a", now), ("call", "a", now),
        ("note", None, now), ("attempt.finished", "a", now), ("node.state", "a", now),
    ]


async def test_a_write_failing_in_the_group_loses_its_own_events_only(db: Database) -> None:
    store = RunStore(db)
    run = await store.create_run("wf")
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", []), ("b", 0, "pending", [])])
    since = await store.last_event_seq()
    a, b = _attempt_writes(store, run.run_id, "a"), _attempt_writes(store, run.run_id, "b")
    # A node of a run that does not exist: its start fails in the middle of the group.
    missing = _attempt_writes(store, "r-missing", "x")[0]
    writes = _together(a[0], b[0], a[1], missing, b[1], a[2], b[2])
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert [isinstance(o, Exception) for o in outcomes] == [False] * 3 + [True] + [False] * 3
    assert [(kind, node) for kind, node, _ in await _log(store, since)] == [
        ("node.state", "a"), ("attempt.started", "a"),
        ("node.state", "b"), ("attempt.started", "b"),
        ("call", "a"), ("call", "b"),
        ("attempt.finished", "a"), ("node.state", "a"),
        ("attempt.finished", "b"), ("node.state", "b"),
    ]
    assert (await store.get_run(run.run_id)).tokens == TokenUsage(input=20, output=4)


def test_what_is_held_is_the_connections_own() -> None:
    """Events appended on a connection that holds none go at once, even while another holds
    its own; closing appends the held ones in one statement, discarding forgets them."""
    import sqlite3

    from store.model.run_records import NewEvent
    from store.runs.event_log import HeldEvents, insert_events

    ddl = ("CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER, "
           "type TEXT, run_id TEXT, node_id TEXT, iteration INTEGER, attempt INTEGER, "
           "payload_json TEXT)")
    holding, other = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    statements: list[str] = []
    holding.set_trace_callback(statements.append)
    for conn in (holding, other):
        conn.execute(ddl)
    held = HeldEvents()

    def types(conn: sqlite3.Connection) -> list[str]:
        return [row[0] for row in conn.execute("SELECT type FROM events ORDER BY seq")]

    held.open(holding)
    insert_events(holding, 1, [NewEvent("a", "r1"), NewEvent("b", "r1")])
    insert_events(other, 2, [NewEvent("x", "r2")])
    insert_events(holding, 3, [NewEvent("c", "r1")])
    assert types(other) == ["x"] and types(holding) == []
    statements.clear()
    held.close(holding)
    assert [text for text in statements if "INSERT" in text] == statements[-1:]
    assert types(holding) == ["a", "b", "c"]
    assert [r[0] for r in holding.execute("SELECT at_ms FROM events ORDER BY seq")] == [1, 1, 3]
    held.open(holding)
    insert_events(holding, 4, [NewEvent("d", "r1")])
    held.discard(holding)
    insert_events(holding, 5, [NewEvent("e", "r1")])  # holding no more: at once
    assert types(holding) == ["a", "b", "c", "e"]


async def _rollup_rows(db: Database) -> list[list[tuple[Any, ...]]]:
    """Every rollup a call adds to (by bucket, by hour, per day), as stored."""
    queries = (
        "SELECT * FROM usage_rollups ORDER BY run_id, bucket",
        "SELECT * FROM usage_hours ORDER BY run_id, hour_ms, agent, model",
        "SELECT * FROM spend_days ORDER BY day",
    )
    return [[tuple(row) for row in await db.fetch_all(query)] for query in queries]


async def test_calls_of_one_group_add_up_as_one_by_one(db: Database) -> None:
    """Calls recorded in one group commit (on SQLite their rollup rows are summed and each
    written once: store.runs.event_log.add_summed) leave every rollup as recording them one
    by one does: two runs, two buckets, two hours, two days, priced and unpriced, a call
    recorded twice counted once, and the calls of a write that fails in the group left out."""
    store = RunStore(db)
    hour, day = 3_600_000, 86_400_000
    runs = [(await store.create_run("wf")).run_id for _ in range(2)]

    def call(run: int, tokens: int, at: int, cost: float | None, seq: int) -> CallUsage:
        return CallUsage(runs[run], "a", 0, 1, "agent", TokenUsage(input=tokens, output=3),
                         model="m" if cost is None else "priced", started_at_ms=at,
                         finished_at_ms=at, cost_usd=cost, seq=seq)

    calls = [
        call(0, 10, 5, 0.25, 1), call(0, 60_000, 6, None, 2), call(1, 10, 7, 0.5, 1),
        call(0, 10, hour + 8, 0.125, 3), call(1, 10, day + 9, None, 2), call(0, 10, 5, 0.25, 1),
    ]
    missing = CallUsage("r-missing", "x", 0, 1, "agent", TokenUsage(input=1), seq=1)
    for recorded in calls:
        await store.queue_calls([recorded])
    one_by_one = await _rollup_rows(db)
    for table in ("usage_rollups", "usage_hours", "spend_days", "calls", "events"):
        await db.execute(f"DELETE FROM {table}")
    writes = [lambda c=c: store.queue_calls([c]) for c in calls]
    writes.insert(3, lambda: store.start_attempt("r-missing", "x", 0, 1))
    writes.insert(5, lambda: store.queue_calls([missing, calls[0]]))
    outcomes = await asyncio.gather(*_together(*writes), return_exceptions=True)
    failed = [False] * 3 + [True, False, True] + [False] * 2
    assert [isinstance(o, Exception) for o in outcomes] == failed
    assert await _rollup_rows(db) == one_by_one


async def test_a_nodes_end_in_the_group_adds_its_runs_call_tokens(db: Database) -> None:
    """Two nodes' starts, calls (two each, one priced, one not) and ends in one group commit
    (on SQLite what the calls and ends change in their run's row, tokens and progress, goes
    as one statement when the group's held rows are written) leave the run's row as the
    same writes one by one do, and each end reads the run's requests as it does alone: a
    clear asked before, a cancel asked between two groups."""
    store = RunStore(db)
    columns = ("input_tokens", "output_tokens", "cost_usd", "unpriced_calls", "nodes_done",
               "updated_at_ms")

    def writes(run_id: str) -> list[Callable[[], Any]]:
        def call(node: str, seq: int, cost: float | None) -> Callable[[], Any]:
            usage = TokenUsage(input=10 * seq, output=seq)
            return lambda: store.queue_calls([CallUsage(
                run_id, node, 0, 1, "a", usage, cost_usd=cost, seq=seq)])

        (start_a, _, end_a), (start_b, _, end_b) = (
            _attempt_writes(store, run_id, node) for node in ("a", "b"))
        return [start_a, start_b, call("a", 1, 0.5), call("b", 1, None), call("a", 2, 0.25),
                end_a, call("b", 2, 0.125), end_b, call("a", 3, None)]

    async def run_row(together: bool) -> tuple[list[Any], list[Any]]:
        run = await store.create_run("wf")
        await store.upsert_nodes(run.run_id, [("a", 0, "pending", []), ("b", 0, "pending", [])])
        await store.request_clear(run.run_id, "start over")
        ends: list[Any] = []
        for part in (writes(run.run_id)[:6], writes(run.run_id)[6:]):
            if together:
                outcomes = await asyncio.gather(*_together(*part))
            else:
                outcomes = [await write() for write in part]
            ends += [outcome for outcome in outcomes if isinstance(outcome, RunRequests)]
            if not ends[-1].cancel_requested_at_ms:
                await store.request_cancel(run.run_id)
        row = await db.fetch_one("SELECT * FROM runs WHERE run_id = ?", (run.run_id,))
        assert row is not None
        return [row[column] for column in columns], ends

    (together, ends), (one_by_one, alone) = await run_row(True), await run_row(False)
    assert together == one_by_one
    assert [(e.cancel_requested_at_ms is None, e.clear_reason) for e in ends] == [
        (True, "start over"), (False, "start over")]
    assert [(e.cancel_requested_at_ms is None, e.clear_reason) for e in alone] == [
        (True, "start over"), (False, "start over")]
