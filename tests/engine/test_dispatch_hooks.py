"""Dispatch-time hooks: a person's clear request hands the run off at the next dispatch, and
DispatchGuard decisions (warn, skip, fail, handoff) are honoured."""

from __future__ import annotations

import asyncio

from engine_test_support import ScriptedAgent, run_workflow

from engine.hooks import DispatchContext, DispatchDecision, EngineHooks
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.runs.run_store import RunStore


def _chain(agent: ScriptedAgent, length: int = 4) -> Workflow:
    wf = Workflow("chain", agents={"simulated": agent})
    for i in range(length):
        wf.add_task(f"s{i}", f"step {i}", depends_on=[f"s{i - 1}"] if i else [])
    return wf


async def test_clear_request_hands_off_after_running_attempts_finish(db: Database) -> None:
    agent = ScriptedAgent(delay_s=0.1)
    wf = _chain(agent)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    task = asyncio.create_task(engine.start(wf, {"goal": "ship"}))
    store = RunStore(db)
    while not agent.invocations:
        await asyncio.sleep(0.01)
    (run,) = await store.list_runs()
    await store.request_clear(run.run_id, "context is getting large")
    outcome = await asyncio.wait_for(task, 20)
    assert outcome.status == "handed-off" and outcome.next_run_id
    assert agent.count("s0") == 1 and agent.count("s1") == 0  # s0 finished, nothing new began
    old = await store.get_run(run.run_id)
    assert old.status == "handed-off"
    assert (await store.get_node(run.run_id, "s0")).state == "finished"
    (handoff,) = await store.list_handoffs(from_run_id=run.run_id)
    assert handoff.trigger == "person" and handoff.reason == "context is getting large"
    assert handoff.carried_state["goal"] == {"goal": "ship"}
    final = await engine.run_chain(wf, outcome)
    assert final.status == "finished" and final.run_id == outcome.next_run_id
    successor = await store.get_run(final.run_id)
    assert successor.parent_run_id == run.run_id and successor.generation == 1


class Guard:
    """Decides per node id."""

    def __init__(self, decisions: dict[str, DispatchDecision]) -> None:
        self.decisions = decisions
        self.seen: list[str] = []

    async def check(self, context: DispatchContext) -> DispatchDecision:
        self.seen.append(context.node.node_id)
        return self.decisions.get(context.node.node_id, DispatchDecision())


async def test_guard_warn_skip_and_fail(db: Database) -> None:
    agent = ScriptedAgent()
    guard = Guard(
        {
            "s0": DispatchDecision("warn", "close to the ceiling"),
            "s1": DispatchDecision("skip", "over budget"),
        }
    )
    outcome = await run_workflow(db, _chain(agent, 3), hooks=EngineHooks(guards=[guard]))
    assert outcome.status == "finished"
    store = RunStore(db)
    assert (await store.get_node(outcome.run_id, "s1")).state == "skipped"
    assert agent.count("s1") == 0 and agent.count("s2") == 1
    events = await store.events_since(0, run_id=outcome.run_id)
    assert any(
        e.type == "warning" and e.payload["reason"] == "close to the ceiling" for e in events
    )
    run = await store.get_run(outcome.run_id)
    assert run.nodes_done == run.nodes_total == 3

    failing = Guard({"s1": DispatchDecision("fail", "token ceiling exceeded: 10 >= 5")})
    outcome = await run_workflow(db, _chain(agent, 3), hooks=EngineHooks(guards=[failing]))
    assert outcome.status == "failed" and outcome.error == "token ceiling exceeded: 10 >= 5"
    assert (await store.get_node(outcome.run_id, "s1")).state == "failed"
