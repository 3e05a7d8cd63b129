"""Run records: the store API every process uses (store/runs/run_store.py)."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.errors import InvalidInputError, NotFoundError
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore


async def test_run_lifecycle_writes_rows_and_events(db: Database, clock: ManualClock) -> None:
    store = RunStore(db)
    run = await store.create_run("wf", input={"x": 1}, nodes_total=2, owner_id="me")
    assert run.status == "running" and run.input == {"x": 1}
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", []), ("b", 0, "pending", ["a"])])
    await store.start_attempt(run.run_id, "a", 0, 1, agent="simulated", prompt="p")
    usage = TokenUsage(input=1000, cache_read=49_000, output=10)
    await store.record_call(CallUsage(run.run_id, "a", 0, 1, "simulated", usage, simulated=True))
    await store.finish_attempt(
        run.run_id,
        "a",
        0,
        1,
        "finished",
        usage=usage,
        node_state="finished",
        node_output={"ok": True},
        set_node_output=True,
        nodes_done=1,
    )
    node = await store.get_node(run.run_id, "a")
    assert node.state == "finished" and node.output == {"ok": True} and node.attempts == 1
    (attempt,) = await store.list_attempts(run.run_id, "a")
    assert attempt.tokens == usage
    (call,) = await store.list_calls(run.run_id, "a")
    # 1000 + 49 000 = 50 000: the lower edge is inclusive.
    assert call.context_tokens == 50_000 and call.bucket == "50k–100k" and call.simulated
    run = await store.get_run(run.run_id)
    assert run.tokens == usage and run.nodes_done == 1
    for scope in (run.run_id, ""):
        assert (await store.usage_by_bucket(scope)) == {"50k–100k": (1, usage)}
    events = await store.events_since(0)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    types = [e.type for e in events]
    assert types[0] == "run.created" and "call" in types and "attempt.finished" in types
    recent = await store.recent_events(2)
    assert [e.seq for e in recent] == seqs[-2:]
    assert await store.last_event_seq() == seqs[-1]


async def test_stale_heartbeat_and_cancel(db: Database, clock: ManualClock) -> None:
    store = RunStore(db)
    run = await store.create_run("wf", owner_id="o1")
    assert not (await store.get_run(run.run_id)).is_stale(clock.now_ms())
    clock.advance(30_001)
    run = await store.get_run(run.run_id)
    assert run.display_status(clock.now_ms()) == "stale"
    assert [r.run_id for r in await store.list_runs(status="stale")] == [run.run_id]
    assert await store.heartbeat(run.run_id, "o1")
    assert not await store.heartbeat(run.run_id, "someone-else")
    assert (await store.list_runs(status="stale")) == []
    # A live run gets a request; the owner acts on it.
    live = await store.request_cancel(run.run_id)
    assert live.status == "running" and live.cancel_requested_at_ms is not None
    # A stale run is cancelled directly: nobody is polling it.
    other = await store.create_run("wf")
    clock.advance(40_000)
    cancelled = await store.request_cancel(other.run_id)
    assert cancelled.status == "cancelled"
    with pytest.raises(InvalidInputError):
        await store.request_cancel(other.run_id)
    with pytest.raises(NotFoundError):
        await store.request_cancel("nope")
    with pytest.raises(InvalidInputError):
        await store.list_runs(status="bogus")


async def test_abandoned_attempts_and_resume_claim(db: Database) -> None:
    store = RunStore(db)
    run = await store.create_run("wf", owner_id="dead")
    await store.start_attempt(run.run_id, "a", 0, 1, agent="x")
    claimed = await store.claim_run(run.run_id, "alive")
    assert claimed.owner_id == "alive"
    (attempt,) = await store.list_attempts(run.run_id, "a")
    assert attempt.state == "abandoned"
    assert (await store.get_node(run.run_id, "a")).state == "pending"


async def test_clear_handoff_and_delete(db: Database) -> None:
    store = RunStore(db)
    run = await store.create_run("wf", input={"goal": "g"})
    with pytest.raises(InvalidInputError):
        await store.request_clear(run.run_id, "  ")
    cleared = await store.request_clear(run.run_id, "context too big")
    assert cleared.clear_reason == "context too big"
    new, handoff_id = await store.continue_as_new(
        run.run_id,
        trigger="person",
        reason="context too big",
        carried_state={"goal": "g", "learnings": []},
        input={"goal": "g"},
    )
    assert new.parent_run_id == run.run_id and new.generation == 1 and new.status == "pending"
    assert (await store.get_run(run.run_id)).status == "handed-off"
    (handoff,) = await store.list_handoffs(from_run_id=run.run_id)
    assert handoff.handoff_id == handoff_id and handoff.to_run_id == new.run_id
    assert handoff.carried_bytes == len('{"goal":"g","learnings":[]}')
    block_id = await store.save_memory_block(
        new.run_id, "a", 0, text="advisory", budget_bytes=2048, bytes_used=8, items=["n1"]
    )
    block = await store.get_memory_block(new.run_id, "a", 0)
    assert block is not None and block.block_id == block_id and block.items == ["n1"]
    await store.record_call(CallUsage(new.run_id, "a", 0, 1, "sim", TokenUsage(input=5)))
    await store.set_run_status(new.run_id, "finished", output={"done": True}, set_output=True)
    folder = db.workspace.artifacts_dir / new.run_id / "a" / "1"
    folder.mkdir(parents=True)
    (folder / "stream.log").write_text("log")
    await store.delete_run(new.run_id)
    assert not (db.workspace.artifacts_dir / new.run_id).exists()
    with pytest.raises(NotFoundError):
        await store.get_run(new.run_id)
    assert (await store.usage_by_bucket(""))["<50k"][1] == TokenUsage()


async def test_a_run_whose_owner_process_died_is_cancelled_at_once(db: Database) -> None:
    import subprocess
    import sys

    from store.runs.owners import new_owner_id, owner_is_dead

    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    host = new_owner_id().split(":")[0]
    dead = f"{host}:{child.stdout.strip()}:abc"
    assert owner_is_dead(dead) and not owner_is_dead(new_owner_id())
    assert not owner_is_dead("another-host:1:abc")  # cannot tell: assume alive
    store = RunStore(db)
    run = await store.create_run("wf", owner_id=dead)
    assert (await store.request_cancel(run.run_id)).status == "cancelled"


async def test_a_call_recorded_twice_is_counted_once(db: Database) -> None:
    store = RunStore(db)
    run = await store.create_run("wf", nodes_total=1, owner_id="me")
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", [])])
    await store.start_attempt(run.run_id, "a", 0, 1, agent="sim", prompt="p")
    first = CallUsage(run.run_id, "a", 0, 1, "sim", TokenUsage(input=7), seq=1)
    # The same call again (a retried write), then the attempt's next call.
    for call in (first, first, first._replace(seq=2, usage=TokenUsage(input=5))):
        await store.record_call(call)
    calls = await store.list_calls(run.run_id, "a")
    assert [c.tokens.input for c in calls] == [7, 5]
    assert (await store.get_run(run.run_id)).tokens.input == 12
    unnumbered = CallUsage(run.run_id, "a", 0, 1, "sim", TokenUsage(input=1))
    await store.record_call(unnumbered)
    await store.record_call(unnumbered)  # no number: each is a call of its own
    assert len(await store.list_calls(run.run_id, "a")) == 4


async def test_a_queued_write_that_fails_unawaited_prints_no_traceback(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio
    import gc

    from store.errors import StorageError

    def refused(conn: object) -> None:
        raise StorageError("The write was refused.")

    awaited = db.submit(refused)
    with pytest.raises(StorageError, match="refused"):
        await awaited  # whoever awaits it still gets the error
    forgotten = db.submit(refused)  # its execution stopped before awaiting it
    await asyncio.wait([forgotten])
    del forgotten, awaited
    gc.collect()
    assert "never retrieved" not in caplog.text


async def test_a_writes_many_events_are_appended_in_order(db: Database) -> None:
    """A write's events go in as few statements as fit (up to 500 per statement): 1 234 node
    events of one write come back one each, in the order written, with rising sequence."""
    store = RunStore(db)
    run = await store.create_run("wf", owner_id="me")
    after = await store.last_event_seq()
    names = [f"n{index:04d}" for index in range(1234)]
    await store.upsert_nodes(run.run_id, [(name, 0, "pending", []) for name in names])
    events = await store.events_since(after, limit=5000)
    assert [e.node_id for e in events] == names
    assert [e.seq for e in events] == sorted({e.seq for e in events})


async def test_a_nodes_end_moves_progress_and_reads_the_requests_at_once(db: Database) -> None:
    """The end of an attempt that counts a node done returns the run's pending requests from
    the same statement that moves its progress (a cancel asked for meanwhile is seen)."""
    store = RunStore(db)
    run = await store.create_run("wf", nodes_total=2, owner_id="me")
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", []), ("b", 0, "pending", [])])
    await store.start_attempt(run.run_id, "a", 0, 1, agent="sim", prompt="p")
    quiet = await store.finish_attempt(run.run_id, "a", 0, 1, "finished", node_state="finished",
                                       nodes_done=1)
    assert quiet is not None and quiet.cancel_requested_at_ms is None
    await store.start_attempt(run.run_id, "b", 0, 1, agent="sim", prompt="p")
    await store.request_cancel(run.run_id)
    asked = await store.finish_attempt(run.run_id, "b", 0, 1, "finished", node_state="finished",
                                       nodes_done=2)
    assert asked is not None and asked.cancel_requested_at_ms is not None
    assert (await store.get_run(run.run_id)).nodes_done == 2


async def test_an_attempts_start_and_end_write_the_same_rows_and_events_on_both_backends(
    db: Database, clock: ManualClock
) -> None:
    """PostgreSQL sends a start (node, attempt, events) and a finished node's end (attempt,
    node, events, progress) as one statement each; SQLite runs them one by one. The rows,
    the events and their order, and the run's requests read back are the same."""
    from store.model.run_records import NewEvent

    store = RunStore(db)
    run = await store.create_run("wf", nodes_total=2)
    # "a" has no row yet: its attempt's start creates the node its attempt refers to.
    start_at = clock.now_ms()
    assert await store.start_attempt(run.run_id, "a", 0, 1, agent="ag", model="m",
                                     prompt="p", cached=True) == 0
    usage = TokenUsage(input=10, output=2)
    await store.record_call(CallUsage(run.run_id, "a", 0, 1, "ag", usage, model="m"))
    await store.request_cancel(run.run_id)
    clock.advance(5)
    requests = await store.finish_attempt(
        run.run_id, "a", 0, 1, "failed", usage=usage, error="boom", model="m2",
        node_state="failed", nodes_done=1, refuse_next_attempt=False,
        extra_events=[NewEvent("custom", run.run_id, "a", 0, 1, {"k": 1})],
        details={"command": "x"},
    )
    assert requests is not None and requests.cancel_requested_at_ms is not None
    node = await store.get_node(run.run_id, "a")
    assert (node.state, node.attempts, node.error) == ("failed", 1, "boom")
    assert (node.started_at_ms, node.finished_at_ms) == (start_at, start_at + 5)
    (attempt,) = await store.list_attempts(run.run_id, "a")
    assert (attempt.state, attempt.agent, attempt.model, attempt.prompt, attempt.error) == (
        "failed", "ag", "m2", "p", "boom")
    assert not attempt.cached  # the end writes the attempt's own (its start's was cached)
    assert attempt.tokens == usage and attempt.details_json == '{"command":"x"}'
    assert attempt.cost.unpriced_calls == 1  # summed from its calls
    assert attempt.finished_at_ms == start_at + 5
    assert (await store.get_run(run.run_id)).nodes_done == 1
    events = [e for e in await store.events_since(0) if e.node_id == "a"]
    assert [(e.type, e.attempt) for e in events] == [
        ("node.state", None), ("attempt.started", 1), ("call", 1), ("attempt.finished", 1),
        ("node.state", None), ("custom", 1)]
    assert [e.at_ms for e in events] == [start_at] * 3 + [start_at + 5] * 3
    assert '"failed"' in (events[3].payload_json or "") and '"boom"' in (
        events[4].payload_json or "")
