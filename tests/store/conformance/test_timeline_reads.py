"""The timeline's reads: a run's node rows, then the attempts, calls and memory-tool calls of the
nodes a view shows, the same on SQLite and PostgreSQL and through the dashboard's reader."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.backends import open_reader
from store.db.seam import Database
from store.errors import NotFoundError
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.read.timeline import flatten, with_details
from store.read.timeline_reads import read_details, read_timeline
from store.runs.run_store import RunStore

T0 = 1_767_225_600_000


@pytest.fixture
async def run_id(db: Database, clock: ManualClock) -> str:
    """plan -> work (failed once, then two calls and a recall) -> report."""
    store = RunStore(db)
    clock.set(T0)
    run = await store.create_run("w", run_id="r-time", nodes_total=3)
    await store.upsert_nodes(run.run_id, [("plan", 0, "pending", []),
                                          ("work", 0, "pending", ["plan"]),
                                          ("report", 0, "pending", ["work"])])
    await store.start_attempt(run.run_id, "plan", 0, 1, agent="sim", prompt="p" * 10_000)
    clock.advance(100)
    await store.finish_attempt(run.run_id, "plan", 0, 1, "finished", node_state="finished")
    clock.advance(50)
    await store.start_attempt(run.run_id, "work", 0, 1, agent="sim")
    clock.advance(100)
    await store.finish_attempt(run.run_id, "work", 0, 1, "failed", error="boom",
                               node_state="retrying")
    clock.advance(200)
    await store.start_attempt(run.run_id, "work", 0, 2, agent="sim")
    for _ in range(2):
        start = clock.now_ms()
        clock.advance(40)
        await store.record_call(CallUsage(run.run_id, "work", 0, 2, "sim", TokenUsage(10),
                                          started_at_ms=start, finished_at_ms=clock.now_ms()))
    await store.append_event("memory.tool", run_id=run.run_id, node_id="work", iteration=0,
                             attempt=2, payload={"tool": "recall", "ok": True, "items": [1, 2]})
    clock.advance(20)
    await store.finish_attempt(run.run_id, "work", 0, 2, "finished", node_state="finished")
    await store.set_run_status(run.run_id, "finished")
    return run.run_id


async def test_bars_from_node_rows_then_details_of_the_nodes_shown(
    db: Database, clock: ManualClock, run_id: str
) -> None:
    timeline = await read_timeline(db, run_id, clock.now_ms())
    assert [bar.node.key for bar in timeline.bars] == ["plan#0", "work#0", "report#0"]
    assert timeline.critical_path == ["plan#0", "work#0"]
    assert [s.kind for s in timeline.bars[1].spans] == ["waiting", "queued", "finished"]
    details = await read_details(db, run_id, ["work#0"])
    work = details["work#0"]
    assert [(a.attempt, a.state) for a in work.attempts] == [(1, "failed"), (2, "finished")]
    assert all(a.prompt is None and a.error is None for a in work.attempts)  # not read
    assert len(work.calls) == 2 and [t.name for t in work.tools] == ["recall"]
    assert work.tools[0].detail == "2 items" and work.tools[0].exact
    rows = flatten(with_details(timeline, details), {"work#0"})
    assert [r.key for r in rows if r.node_key == "work#0"][:3] == ["work#0", "work#0/1", "work#0/2"]
    spans = next(r for r in rows if r.key == "work#0").spans
    assert [s.kind for s in spans] == ["waiting", "queued", "failed", "retrying", "finished"]
    assert spans[3].end_ms is not None and spans[3].end_ms - spans[3].start_ms == 200


async def test_the_dashboard_reader_reads_the_same_timeline(
    db: Database, clock: ManualClock, run_id: str
) -> None:
    expected = await read_timeline(db, run_id, clock.now_ms())
    reader = await open_reader(db.workspace)
    try:
        assert await read_timeline(reader, run_id, clock.now_ms()) == expected
        assert await read_details(reader, run_id, ["work#0"]) == await read_details(
            db, run_id, ["work#0"]
        )
    finally:
        await reader.close()


async def test_an_unknown_run_is_not_found(db: Database, clock: ManualClock) -> None:
    with pytest.raises(NotFoundError, match="no run 'r-nope'"):
        await read_timeline(db, "r-nope", clock.now_ms())
