"""A fan-out on a real two-node Ray cluster of this machine: its items land on both nodes (by
the node id recorded on each attempt), the second node's raylet is killed mid-run, the lost
attempts fail with "the Ray node running it was lost" and are retried on the first node, and
every finished node ran exactly once (the command agent counts its invocations in a file)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from conftest import counting_agent
from ray_support import RayTestCluster, exited, lines_matching

from engine.artifact_files import stream_log_path
from engine.executors.ray_faults import NODE_LOST
from engine.hooks import Progress
from engine.run.engine_config import parse_config
from engine.run.wiring import open_engine
from engine.workflow.definition import Workflow
from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]  # real clusters start slowly under load
ITEMS = ["a", "b", "c", "d"]


def review_workflow() -> Workflow:
    workflow = Workflow(
        "ray-review",
        default_agent="counter",
        execution={"backend": "ray", "num_cpus": 0, "resources": {"slot": 1},
                   "scheduling_strategy": "SPREAD"},
    )
    workflow.fan_out(id="review", items=ITEMS, retries=3, backoff=0.05)("Review the item.")

    @workflow.task(id="report", depends_on=["review"], agent="simulated",
                   execution={"backend": "in-process"})
    def report(ctx: object) -> str:
        return "Summarise the reviews."

    return workflow


async def test_fan_out_spans_two_nodes_and_survives_losing_one(
    ray_cluster: RayTestCluster, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ray_cluster.start_head({"slot": 2})
    second = ray_cluster.add_node("w", "127.0.0.2", {"slot": 2})
    count, release = tmp_path / "count" / "invocations.log", tmp_path / "release"
    count.parent.mkdir()
    config = parse_config({
        "execution": {"address": ray_cluster.address},
        "agents": {"counter": counting_agent(count, release),
                   "simulated": {"type": "simulated", "latency_ms": 0}},
    })
    placed: dict[tuple[str, int], str] = {}
    lost: set[tuple[str, int]] = set()
    all_placed, second_lost = asyncio.Event(), asyncio.Event()
    on_second: set[tuple[str, int]] = set()

    def on_progress(update: Progress) -> None:
        key = (update.node_id or "", update.attempt or 0)
        if update.state == "placed":
            placed[key] = update.detail
            if len(placed) >= len(ITEMS):
                all_placed.set()
        if update.state in ("retrying", "failed") and NODE_LOST in update.detail:
            lost.add(key)
            if on_second and on_second <= lost:
                second_lost.set()

    workspace = Workspace(tmp_path / ".tether")
    db = await open_database(workspace)
    try:
        store = RunStore(db)
        engine = open_engine(db, on_progress=on_progress, config=config)
        running = asyncio.create_task(engine.start(review_workflow(), {}))
        await asyncio.wait_for(all_placed.wait(), 180)
        starts = await lines_matching(count, lambda ls: sum(x.startswith("start") for x in ls)
                                      >= len(ITEMS))
        (run,) = await store.list_runs()
        attempts = {
            item: (await store.list_attempts(run.run_id, f"review[{i}]"))[0]
            for i, item in enumerate(ITEMS)
        }
        nodes = {a.executor_node for a in attempts.values()}
        assert len(nodes) == 2, f"the items did not land on both nodes: {placed}"
        second_id = next(n for n in nodes if any(
            "127.0.0.2" in placed[(a.node_id, 1)] for a in attempts.values()
            if a.executor_node == n))
        on_second.update((a.node_id, 1) for a in attempts.values()
                         if a.executor_node == second_id)
        # The agents' output reaches the attempt's log in the workspace while they still run.
        some = next(iter(attempts.values()))
        log = stream_log_path(workspace.artifacts_dir, run.run_id, some.node_id, 0, 1)
        assert "working on" in (await lines_matching(log, bool))[0]

        os.kill(second.raylet_pid(), signal.SIGKILL)
        await asyncio.wait_for(second_lost.wait(), 180)
        pids = {line.split()[1]: int(line.split()[3]) for line in starts}
        for node_id, _attempt in on_second:
            # Nothing of a lost attempt keeps running once its node is gone.
            assert await exited(pids[node_id]), f"{node_id}'s agent outlived its node"
        release.touch()
        outcome = await asyncio.wait_for(running, 180)
        assert outcome.status == "finished", outcome.error

        done = Counter()
        for line in count.read_text().splitlines():
            kind, node_id, attempt, _pid = line.split()
            if kind == "done":
                done[node_id] += 1
        for index, _item in enumerate(ITEMS):
            node_id = f"review[{index}]"
            history = await store.list_attempts(run.run_id, node_id)
            finished = [a for a in history if a.state == "finished"]
            assert len(finished) == 1 and done[node_id] == 1  # executed exactly once
            assert all(a.executor == "ray" and a.executor_node for a in history)
            if (node_id, 1) in on_second:
                first, *rest = history
                assert first.state == "failed" and first.error.startswith(NODE_LOST)
                assert first.executor_node == second_id
                assert finished[0].executor_node != second_id  # retried on the first node
                assert finished[0].attempt > 1
            else:
                assert [a.state for a in history] == ["finished"]
        invocations = Counter(line.split()[1] for line in count.read_text().splitlines()
                              if line.startswith("start"))
        for index in range(len(ITEMS)):
            node_id = f"review[{index}]"
            # Every invocation has its recorded attempt: nothing ran behind Tether's back.
            assert invocations[node_id] == len(await store.list_attempts(run.run_id, node_id))
        (report,) = await store.list_attempts(run.run_id, "report")
        assert report.executor is None and report.state == "finished"
        cluster = {n.node_id: n.alive for n in await store.executor_nodes()}
        assert cluster.get(second_id) is False and len(cluster) == 2
        shown = capfd.readouterr()  # Ray's own report of the dead raylet went to the log
        assert "Raylet is terminated" not in shown.out + shown.err
    finally:
        await db.close()
