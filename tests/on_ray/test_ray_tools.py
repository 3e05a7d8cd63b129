"""Memory tools of an attempt on a real Ray cluster: the agent on the node calls `recall` and
`remember`, the calls stream back, the orchestrator runs them on its own tools (it is the only
writer of the workspace: the note lands here) and answers through the actor, and every model
call of the attempt is recorded as for a local one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ray_support import RayTestCluster

from engine.agents.simulated import SimulatedAgent
from engine.artifact_files import stream_log_path
from engine.memory.memory_config import MemoryConfig
from engine.run.engine_config import parse_config
from engine.run.wiring import open_engine
from engine.workflow.definition import Workflow
from store.db.backends import open_database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]  # real clusters start slowly under load


async def test_memory_tools_are_answered_by_the_orchestrator(
    ray_cluster: RayTestCluster, tmp_path: Path
) -> None:
    ray_cluster.start_head({})
    agent = SimulatedAgent(name="sim", latency_ms=0)
    workflow = Workflow("ray-tools", agents={"sim": agent}, default_agent="sim",
                        execution={"backend": "ray", "num_cpus": 0},
                        memory=MemoryConfig(bank="team", tools=True, recall="off"))
    workflow.add_task("learn", "Find what slows the queue consumer down and remember it.")
    workspace = Workspace(tmp_path / ".tether")
    db = await open_database(workspace)
    try:
        engine = open_engine(db, config=parse_config({"execution": {
            "address": ray_cluster.address}}))
        outcome = await asyncio.wait_for(engine.start(workflow, {}), 300)
        assert outcome.status == "finished", outcome.error
        store = RunStore(db)
        (run,) = await store.list_runs()
        (attempt,) = await store.list_attempts(run.run_id, "learn")
        assert attempt.executor == "ray" and attempt.executor_node
        calls = await store.list_calls(run.run_id, "learn")
        assert len(calls) == 3  # recall, remember, the answer: each recorded here
        notes = await MemoryStore(db).list_notes("workflow:team", status="any")
        assert len(notes) == 1  # written by the orchestrator's remember tool
        log = stream_log_path(workspace.artifacts_dir, run.run_id, "learn", 0, 1).read_text()
        assert "→ remember(" in log and "tool error" not in log
        assert notes[0].id in log  # the tool's answer reached the agent on the node
    finally:
        await db.close()
