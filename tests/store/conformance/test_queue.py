"""The run queue on both backends: claims in order, one holder at a time, leases that expire,
fencing tokens that stop a worker which lost its run from writing anything."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.backends import open_database
from store.db.seam import Database
from store.errors import LeaseLost, NotFoundError
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.run_queue import RunQueue
from store.runs.run_store import RunStore

LEASE_MS = 10_000


async def test_claims_take_the_oldest_queued_run_once(db: Database, clock: ManualClock) -> None:
    queue = RunQueue(db, lease_ms=LEASE_MS)
    first = await queue.enqueue("wf", input={"n": 1}, workflow_path="/x/wf.py")
    clock.advance(1)
    second = await queue.enqueue("wf", input={"n": 2}, workflow_path="/x/wf.py")
    await RunStore(db).create_run("wf", status="pending")  # pending but not queued
    assert await queue.queue_depth() == 2
    a = await queue.claim_next("worker-a")
    b = await queue.claim_next("worker-b")
    assert a is not None and b is not None
    assert (a.run.run_id, b.run.run_id) == (first.run_id, second.run_id)
    assert a.run.status == "running" and a.run.owner_id == "worker-a" and a.token == 1
    assert await queue.claim_next("worker-c") is None
    assert await queue.queue_depth() == 0
    types = [e.type for e in await queue.events_since(0, run_id=first.run_id)]
    assert types == ["run.created", "run.queued", "run.claimed"]


async def test_an_expired_lease_is_claimed_again_and_fences_the_old_holder(
    db: Database, clock: ManualClock
) -> None:
    # Two queues over two connections stand for two workers; each registers its own tokens.
    other = await open_database(db.workspace, clock=clock)
    try:
        old, new = RunQueue(db, lease_ms=LEASE_MS), RunQueue(other, lease_ms=LEASE_MS)
        run = await old.enqueue("wf")
        held = await old.claim_next("old")
        assert held is not None
        await old.upsert_nodes(run.run_id, [("done", 0, "pending", []), ("busy", 0, "pending", [])])
        await old.start_attempt(run.run_id, "done", 0, 1, owner_id="old")
        await old.finish_attempt(run.run_id, "done", 0, 1, "finished", node_state="finished",
                                 node_output={"ok": True}, set_node_output=True, nodes_done=1)
        await old.start_attempt(run.run_id, "busy", 0, 1, owner_id="old")
        # The heartbeat renews the lease while it is held.
        clock.advance(LEASE_MS - 1)
        assert await old.heartbeat(run.run_id, "old")
        clock.advance(LEASE_MS - 1)
        assert await new.claim_next("new") is None  # renewed: still held
        clock.advance(2)  # the old worker stopped beating: its lease ran out
        taken = await new.claim_next("new")
        assert taken is not None and taken.run.run_id == run.run_id and taken.token == 2
        assert taken.run.owner_id == "new"
        # The old holder writes nothing more, whatever it tries.
        before = await old.last_event_seq()
        with pytest.raises(LeaseLost, match="claimed by another worker"):
            await old.finish_attempt(run.run_id, "busy", 0, 1, "finished",
                                     node_state="finished", set_node_output=True,
                                     node_output={"late": True})
        with pytest.raises(LeaseLost):
            await old.record_call(CallUsage(run.run_id, "busy", 0, 1, "sim", TokenUsage(5)))
        with pytest.raises(LeaseLost):
            await old.set_run_status(run.run_id, "failed", error="late")
        assert not await old.heartbeat(run.run_id, "old")
        assert await old.last_event_seq() == before
        # The finished node stays finished; the interrupted one was given back as pending.
        nodes = {n.node_id: n for n in await new.list_nodes(run.run_id)}
        assert nodes["done"].state == "finished" and nodes["done"].output == {"ok": True}
        assert nodes["busy"].state == "pending"
        attempts = await new.list_attempts(run.run_id, "busy")
        assert [a.state for a in attempts] == ["abandoned"]
        # The new holder works normally, and its attempts carry its token.
        await new.start_attempt(run.run_id, "busy", 0, 2, owner_id="new")
        await new.finish_attempt(run.run_id, "busy", 0, 2, "finished", node_state="finished",
                                 node_output={"ok": 2}, set_node_output=True, nodes_done=2)
        await new.set_run_status(run.run_id, "finished", output={}, set_output=True)
        tokens = await db.fetch_all(
            "SELECT attempt, lease_token FROM attempts WHERE node_id = 'busy' ORDER BY attempt"
        )
        assert [tuple(row) for row in tokens] == [(1, 1), (2, 2)]
        assert (await new.get_run(run.run_id)).status == "finished"
    finally:
        await other.close()


async def test_release_gives_a_run_back_at_once(db: Database) -> None:
    queue = RunQueue(db, lease_ms=LEASE_MS)
    run = await queue.enqueue("wf")
    assert await queue.claim_next("a") is not None
    assert await queue.release(run.run_id, "a")
    again = await queue.claim_next("b")
    assert again is not None and again.token == 2
    assert not await queue.release(run.run_id, "a")  # no longer held by a


async def test_only_pending_runs_can_be_queued(db: Database) -> None:
    queue = RunQueue(db)
    running = await queue.create_run("wf")
    with pytest.raises(NotFoundError, match="no pending run"):
        await queue.enqueue_existing(running.run_id)


async def test_workers_report_themselves(db: Database, clock: ManualClock) -> None:
    queue = RunQueue(db)
    await queue.report_worker("host:1:a", 2)
    clock.advance(1_000)
    await queue.report_worker("host:1:a", 1)
    await queue.report_worker("host:2:b", 0)
    workers = {w.worker_id: w for w in await queue.list_workers()}
    assert workers["host:1:a"].runs_held == 1
    assert workers["host:1:a"].heartbeat_at_ms == clock.now_ms()
    assert workers["host:1:a"].is_alive(clock.now_ms())
    await queue.stop_worker("host:2:b")
    assert not {w.worker_id: w for w in await queue.list_workers()}["host:2:b"].is_alive(
        clock.now_ms()
    )


async def test_resuming_in_process_takes_the_run_off_the_queue_and_fences_the_worker(
    db: Database, clock: ManualClock
) -> None:
    queue = RunQueue(db, lease_ms=LEASE_MS)
    run = await queue.enqueue("wf")
    held = await queue.claim_next("worker")
    assert held is not None
    other = await open_database(db.workspace, clock=clock)
    try:
        await RunStore(other).claim_run(run.run_id, "dashboard")  # a person resumed it
    finally:
        await other.close()
    with pytest.raises(LeaseLost):
        await queue.set_run_status(run.run_id, "failed", error="late")
    clock.advance(LEASE_MS + 1)
    assert await queue.claim_next("another-worker") is None  # no longer queued


async def test_a_worker_that_claims_its_own_run_again_fences_its_stale_execution(
    db: Database, clock: ManualClock
) -> None:
    from store.runs.fences import holding

    queue = RunQueue(db, lease_ms=LEASE_MS)
    run = await queue.enqueue("wf", workflow_path="/x/wf.py")
    first = await queue.claim_next("worker-a")
    assert first is not None
    clock.advance(LEASE_MS + 1)  # an outage outlasted the lease: the same worker claims again
    second = await queue.claim_next("worker-a")
    assert second is not None and second.token == first.token + 1
    store = RunStore(db)
    with holding(run.run_id, first.token), pytest.raises(LeaseLost):
        await store.set_run_status(run.run_id, "failed", error="the stale execution")
    with holding(run.run_id, second.token):
        await store.set_run_status(run.run_id, "finished")
    assert (await store.get_run(run.run_id)).status == "finished"
