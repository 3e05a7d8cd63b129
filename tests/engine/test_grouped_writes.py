"""The engine's writes share group commits on both backends: a fan-out of instant tasks
commits at most half as many transactions as it queues writes (each task writes its
attempt's start, its call, its end and its node: several commits apiece were it not for
grouping), and every task's rows and events are there afterwards."""

from __future__ import annotations

from engine_test_support import ScriptedAgent, run_workflow

from engine.workflow.definition import Workflow
from store.db.seam import Database

ITEMS = 40


async def test_a_fan_out_commits_in_groups_and_loses_nothing(db: Database) -> None:
    agent = ScriptedAgent()
    flow = Workflow("grouped", agents={"scripted": agent}, default_agent="scripted",
                    concurrency=10)
    flow.fan_out("item", items=list(range(ITEMS)))(lambda ctx: f"do {ctx.item}")
    writes = db.writes  # type: ignore[attr-defined]
    groups, submitted = writes.groups, writes.submitted
    outcome = await run_workflow(db, flow)
    groups, submitted = writes.groups - groups, writes.submitted - submitted
    assert outcome.status == "finished", outcome.error
    assert len(agent.invocations) == ITEMS  # every task ran once, none twice
    # Grouped: writes queued together share commits (ungrouped, each would be one).
    assert submitted >= 3 * ITEMS and 0 < groups <= submitted // 2
    finished = await db.fetch_value(
        "SELECT count(*) FROM attempts WHERE run_id = ? AND state = 'finished'", (outcome.run_id,)
    )
    calls = await db.fetch_value("SELECT count(*) FROM calls WHERE run_id = ?", (outcome.run_id,))
    ended = await db.fetch_value(
        "SELECT count(*) FROM events WHERE run_id = ? AND type = 'attempt.finished'",
        (outcome.run_id,),
    )
    assert (finished, calls, ended) == (ITEMS, ITEMS, ITEMS)
