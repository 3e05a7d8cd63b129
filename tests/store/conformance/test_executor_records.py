"""Where attempts ran and the executor's nodes, on both backends: a remote attempt's placement
is recorded on it with an event, the cluster's nodes are kept (first seen, lost, back), and
the dashboard reads them back."""

from __future__ import annotations

from store.clock import ManualClock
from store.db.backends import open_reader
from store.db.seam import Database
from store.model.executor_records import NodeSighting
from store.runs.run_store import RunStore


async def test_placement_is_recorded_on_the_attempt(db: Database) -> None:
    store = RunStore(db)
    run = await store.create_run("w", owner_id="builder:12:34:ab")
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", []), ("b", 0, "pending", [])])
    await store.start_attempt(run.run_id, "a", 0, 1, agent="sim", owner_id=run.owner_id)
    await store.start_attempt(run.run_id, "b", 0, 1, agent="sim", owner_id=run.owner_id)
    await store.place_attempt(
        run.run_id, "a", 0, 1, executor="ray", host="gpu-7", executor_node="5094f00f09d2",
        address="10.0.0.7",
    )
    (placed,) = await store.list_attempts(run.run_id, "a")
    (local,) = await store.list_attempts(run.run_id, "b")
    assert (placed.executor, placed.host, placed.executor_node) == ("ray", "gpu-7", "5094f00f09d2")
    assert placed.ran_on == "gpu-7 · ray node 5094f00f"
    assert placed.as_dict()["host"] == "gpu-7"
    assert local.executor is None and local.ran_on == "builder (in-process)"
    events = [e for e in await store.events_since(0) if e.type == "attempt.placed"]
    assert len(events) == 1 and events[0].node_id == "a"
    assert events[0].payload == {
        "executor": "ray", "host": "gpu-7", "executor_node": "5094f00f09d2", "address": "10.0.0.7"
    }


async def test_cluster_nodes_kept_with_loss_and_return(db: Database, clock: ManualClock) -> None:
    store = RunStore(db)
    head = NodeSighting("n-head", "vm", "10.0.0.1", True, {"CPU": 2.0, "claude": 2.0},
                        {"CPU": 1.0, "claude": 1.0})
    second = NodeSighting("n-two", "vm2", "10.0.0.2", True, {"CPU": 1.0}, {"CPU": 1.0})
    assert await store.record_executor_nodes("ray", [head, second])
    clock.advance(1000)
    assert not await store.record_executor_nodes("ray", [head, second])  # nothing changed
    clock.advance(1000)
    assert await store.record_executor_nodes("ray", [head, second._replace(alive=False,
                                                                           available=None)])
    clock.advance(1000)
    assert not await store.record_executor_nodes("ray", [head, second._replace(
        alive=False, available=None)])
    nodes = await store.executor_nodes()
    assert [n.node_id for n in nodes] == ["n-head", "n-two"]  # alive first
    lost = nodes[1]
    assert not lost.alive and lost.lost_at_ms is not None
    assert lost.lost_at_ms < lost.updated_at_ms  # lost when first seen lost, not since
    assert nodes[0].in_use("claude") == 1.0 and nodes[0].in_use("GPU") is None
    assert lost.first_seen_ms < lost.lost_at_ms
    clock.advance(1000)
    assert await store.record_executor_nodes("ray", [second])  # came back
    back = [n for n in await store.executor_nodes() if n.node_id == "n-two"][0]
    assert back.alive and back.lost_at_ms is None
    types = [e.type for e in await store.events_since(0)]
    assert types.count("executor.nodes") == 3
    reader = await open_reader(db.workspace)
    try:
        seen = await reader.executor_nodes()
    finally:
        await reader.close()
    assert {n.node_id: n.alive for n in seen} == {"n-head": True, "n-two": True}
