"""Cancel requests from another process, and resume: finished nodes never run again,
abandoned attempts are retried, a live run is not taken over."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from engine_test_support import ScriptedAgent, fail_first, run_workflow

from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.definition import Workflow
from store.clock import ManualClock
from store.db.backends import open_database
from store.db.seam import Database
from store.errors import InvalidInputError
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace


def _chain(agent: ScriptedAgent) -> Workflow:
    wf = Workflow("chain", agents={"simulated": agent})
    wf.add_task("a", "first")
    wf.add_task("b", "second", depends_on=["a"])
    wf.add_task("c", "third", depends_on=["b"])
    return wf


async def test_cancel_written_by_another_process(workspace: Workspace) -> None:
    # Real clock: the CLI process must see a live heartbeat and only *request* the cancel.
    async with await open_database(workspace) as db:
        await _cancel_from_cli(db)


async def _cancel_from_cli(db: Database) -> None:
    agent = ScriptedAgent(delay_s=30)
    wf = _chain(agent)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    task = asyncio.create_task(engine.start(wf))
    store = RunStore(db)
    while not agent.invocations:
        await asyncio.sleep(0.01)
    (run,) = await store.list_runs()
    result = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "tui.cli.entry",
            "cancel",
            run.run_id,
            "--workspace",
            str(db.workspace.root),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Cancel requested" in result.stdout
    outcome = await asyncio.wait_for(task, 20)
    assert outcome.status == "cancelled"
    assert (await store.get_run(run.run_id)).status == "cancelled"
    (attempt,) = await store.list_attempts(run.run_id, "a")
    assert attempt.state == "cancelled"
    assert (await store.get_node(run.run_id, "a")).state == "cancelled"
    assert (await store.get_node(run.run_id, "b")).state == "pending"


async def test_resume_after_failure_never_reruns_finished_nodes(db: Database) -> None:
    broken = ScriptedAgent(behaviour=fail_first(1, node="b", retryable=False))
    outcome = await run_workflow(db, _chain(broken))
    assert outcome.status == "failed"
    assert [n for n, _, _ in broken.invocations] == ["a", "b"]
    fixed = ScriptedAgent()
    resumed = await Engine(db, config=EngineConfig(poll_interval_s=0.02)).resume(
        _chain(fixed), outcome.run_id
    )
    assert resumed.status == "finished"
    assert [n for n, _, _ in fixed.invocations] == ["b", "c"]
    store = RunStore(db)
    assert [a.attempt for a in await store.list_attempts(outcome.run_id, "b")] == [1, 2]
    run = await store.get_run(outcome.run_id)
    assert run.nodes_done == 3 and run.status == "finished"
    with pytest.raises(InvalidInputError, match="already finished"):
        await Engine(db).resume(_chain(fixed), outcome.run_id)


async def test_abandoned_attempt_of_a_dead_process_is_retried(
    db: Database, clock: ManualClock
) -> None:
    store = RunStore(db)
    agent = ScriptedAgent()
    wf = _chain(agent)
    run = await store.create_run("chain", input={}, owner_id="dead-process")
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", []), ("b", 0, "pending", ["a"])])
    await store.start_attempt(run.run_id, "a", 0, 1, agent="simulated", owner_id="dead-process")
    # While the owner's heartbeat is fresh, nobody else may take the run over.
    with pytest.raises(InvalidInputError, match="still running in another process"):
        await Engine(db).resume(wf, run.run_id)
    clock.advance(31_000)
    outcome = await Engine(db, config=EngineConfig(poll_interval_s=0.02)).resume(wf, run.run_id)
    assert outcome.status == "finished"
    attempts = await store.list_attempts(run.run_id, "a")
    assert [(a.attempt, a.state) for a in attempts] == [(1, "abandoned"), (2, "finished")]
    events = [e.type for e in await store.events_since(0, run_id=run.run_id)]
    assert "attempt.abandoned" in events and "run.resumed" in events


async def test_resume_refuses_another_workflow(db: Database) -> None:
    outcome = await run_workflow(
        db, _chain(ScriptedAgent(behaviour=fail_first(1, node="a", retryable=False)))
    )
    other = Workflow("other", agents={"simulated": ScriptedAgent()})
    other.add_task("a", "x")
    with pytest.raises(InvalidInputError, match="belongs to workflow 'chain'"):
        await Engine(db).resume(other, outcome.run_id)
