"""Replay's reads: a run's events in pages, its node rows, the notes it wrote; the same on SQLite
and PostgreSQL and through the dashboard's reader; and the run as of each event, folded from
those rows (store/read/replay.py) against what the store holds when the run has ended."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.backends import open_reader
from store.db.seam import Database
from store.errors import NotFoundError
from store.memory.memory_store import MemoryStore
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.read import replay_reads
from store.read.replay_reads import notes_text, read_history, run_events, run_last_event_seq
from store.runs.run_store import RunStore

T0 = 1_767_225_600_000


@pytest.fixture
async def run_id(db: Database, clock: ManualClock) -> str:
    """plan -> work (failed once, then two calls, a recall block, a proposed note) -> report."""
    store = RunStore(db)
    clock.set(T0)
    run = await store.create_run("w", run_id="r-replay", nodes_total=3)
    await store.upsert_nodes(run.run_id, [("plan", 0, "pending", []),
                                          ("work", 0, "pending", ["plan"]),
                                          ("report", 0, "pending", ["work"])])
    await store.start_attempt(run.run_id, "plan", 0, 1, agent="sim")
    clock.advance(100)
    await store.record_call(CallUsage(run.run_id, "plan", 0, 1, "sim", TokenUsage(60_000, 5),
                                      cost_usd=0.5))
    await store.finish_attempt(run.run_id, "plan", 0, 1, "finished", node_state="finished")
    clock.advance(50)
    await store.start_attempt(run.run_id, "work", 0, 1, agent="sim")
    await store.save_memory_block(run.run_id, "work", 0, text="advice", budget_bytes=2048,
                                  bytes_used=6, items=[{"id": "n1"}])
    clock.advance(100)
    await store.finish_attempt(run.run_id, "work", 0, 1, "failed", error="boom",
                               node_state="retrying")
    clock.advance(200)
    await store.start_attempt(run.run_id, "work", 0, 2, agent="sim")
    await store.record_call(CallUsage(run.run_id, "work", 0, 2, "sim", TokenUsage(10, 0, 0, 3)))
    note = await MemoryStore(db).save_note("workflow:w", "a lesson", status="pending",
                                           run_id=run.run_id, node_id="work", iteration=0)
    await store.append_event("memory.retained", run_id=run.run_id, node_id="work",
                             iteration=0, payload={"note_ids": [note.id], "status": "pending"})
    clock.advance(20)
    await store.finish_attempt(run.run_id, "work", 0, 2, "finished", node_state="finished")
    await store.start_attempt(run.run_id, "report", 0, 1, agent="sim")
    await store.finish_attempt(run.run_id, "report", 0, 1, "finished", node_state="finished")
    await store.set_run_status(run.run_id, "finished")
    return run.run_id


async def test_the_last_event_replays_to_what_the_store_holds(db: Database, run_id: str) -> None:
    store = RunStore(db)
    history = await read_history(db, run_id)
    final = history.log.at(history.log.total)
    assert not history.cut and final.run_status == "finished"
    nodes = {n.key: n for n in await store.list_nodes(run_id)}
    assert {n.key: (n.state, n.attempts) for n in final.nodes} == {
        key: (n.state, n.attempts) for key, n in nodes.items()}
    assert {n.key: n.depends_on for n in final.nodes}["report#0"] == ["work"]
    run = await store.get_run(run_id)
    assert final.run_tokens == run.tokens and final.run_cost.usd == pytest.approx(0.5)
    assert final.run_cost.unpriced_calls == 1
    assert [(b.bucket, b.calls) for b in final.buckets if b.calls] == [
        ("<50k", 1), ("50k–100k", 1)]
    assert final.memory["work#0"].bytes_used == 6
    assert [n.status for n in final.pending_notes] == ["pending"]
    assert final.nodes_ended == 3


async def test_each_moment_on_the_way(db: Database, run_id: str) -> None:
    log = (await read_history(db, run_id)).log
    states = [log.at(p) for p in range(1, log.total + 1)]
    work = [dict((n.key, n.state) for n in s.nodes).get("work#0") for s in states]
    # work: pending, running, retrying, running again, finished; never anything else.
    assert [w for i, w in enumerate(work) if w and (i == 0 or work[i - 1] != w)] == [
        "pending", "running", "retrying", "running", "finished"]
    retrying = states[work.index("retrying")]
    assert retrying.usage["plan#0"].tokens.total == 60_005 and "work#0" not in retrying.usage
    assert retrying.memory["work#0"].bytes_used == 6 and not retrying.notes
    # { and } stop at node ends only: plan, work, report.
    ends = []
    position = 1
    while (position := log.next_end(position, 1)) not in ends:
        ends.append(position)
    assert [states[p - 1].event.node_id for p in ends] == ["plan", "work", "report"]
    assert log.next_end(ends[0], -1) == ends[0] and log.next_end(ends[2], -1) == ends[1]
    # The last event written by T0 + 100 is plan's end; nothing was written before T0.
    assert log.position_at_time(T0 + 100) == ends[0] and log.position_at_time(T0 - 1) == 0
    with pytest.raises(ValueError, match="out of range"):
        log.at(log.total + 1)


async def test_the_dashboards_reader_reads_the_same(db: Database, run_id: str) -> None:
    reader = await open_reader(db.workspace)
    try:
        seen = await run_events(reader, run_id)
        assert seen == await run_events(db, run_id)
        assert await run_last_event_seq(reader, run_id) == seen[-1].seq
        assert await run_last_event_seq(reader, "r-none") == 0
        history = await read_history(reader, run_id)
        assert history.log.events == seen
        note_id = history.log.at(history.log.total).notes[0].note_id
        found = await notes_text(reader, [note_id, "missing"])
        assert list(found) == [note_id] and found[note_id].body == "a lesson"
    finally:
        await reader.close()


async def test_paging_and_the_bound(db: Database, run_id: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_reads, "PAGE", 3)
    everything = await run_events(db, run_id)
    assert len(everything) > 9 and [e.seq for e in everything] == sorted(
        e.seq for e in everything)
    assert await run_events(db, run_id, limit=7) == everything[:7]
    assert await run_events(db, run_id, after=everything[4].seq) == everything[5:]
    monkeypatch.setattr(replay_reads, "MAX_REPLAY_EVENTS", 5)
    history = await read_history(db, run_id)
    assert history.cut and history.log.total == 5


async def test_an_unknown_run_is_one_sentence(db: Database) -> None:
    with pytest.raises(NotFoundError, match="There is no run 'r-ghost'"):
        await read_history(db, "r-ghost")
