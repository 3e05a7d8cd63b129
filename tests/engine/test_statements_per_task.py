"""What one task costs the database: the statements a run of many small tasks executes per
task, counted on SQLite's own trace (store/runs/*_log.py fold a task's writes into few
statements; the dispatch loop reads nothing per task). A regression that adds a statement to
every task fails here before it shows in a benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_test_support import ScriptedAgent, trace_sqlite

from engine.agents.agent import AgentRequest, AgentResult, ModelCall
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.db.sqlite.sqlite_database import SqliteDatabase
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

TASKS = 60


class Instant:
    """Answers at once with one call of 100 input tokens, and writes no log."""

    name = "instant"
    native_structured_output = False
    simulated = True

    async def run(self, request: AgentRequest) -> AgentResult:
        await request.on_call(ModelCall(TokenUsage(input=100), "instant"))
        return AgentResult(text="ok")
MOST_PER_TASK = {"chain": 13.5, "fanout": 7.5}
"""Statements per task at most: a task's start (node, attempt), its call (the call, both rollups
in one, usage hour, run tokens, spend day) and its end (attempt, node, progress returning the
run's requests): 10, plus its node's creation, the events of its writes and its share of the
group commits (``BEGIN`` and ``COMMIT``: one pair per task in a chain, where each task waits
for the one before; a tenth of that for ten running at once). The events of a run of such
writes in one group commit go as one statement (store.runs.event_log.HeldEvents): one per task
in a chain, a tenth of one in a fan-out (14.4 and 11.75 here; 16.4 and 14.6 when each write
appended its own). So do the rollups such a run of calls adds to (by bucket, by hour, per day:
store.runs.event_log.add_summed), one statement each per group commit: 9.05 in a fan-out (11.75
when each call ran its own three), a chain's task still 14.4. What the calls and ends of such a
run change in their run's row (tokens, progress) goes as one statement too
(store.runs.runs_sql.UPDATE_RUN_ROW): 13.4 in a chain (14.4 with a statement for the call's
tokens), 7.15 in a fan-out (8.05 with one progress statement per end). Before the writes were
folded a task in a chain cost 21 (measured with bench/bench_engine_overhead). Steers for the
next attempt cost no statement of their own while none waits: the run's steer poll reads them
with the others, an attempt's start counts them as a column of its insert (20.3 and 16.8 when
each task read them twice)."""


@pytest.mark.parametrize("shape", ["chain", "fanout"])
async def test_a_task_costs_a_bounded_number_of_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    statements = trace_sqlite(monkeypatch)
    db = await SqliteDatabase.open(Workspace(tmp_path / ".tether"))
    try:
        wf = Workflow("small", agents={"a": ScriptedAgent()}, default_agent="a", concurrency=10)
        if shape == "chain":
            for index in range(TASKS):
                wf.add_task(f"n{index}", f"step {index}",
                            depends_on=[f"n{index - 1}"] if index else [])
        else:
            wf.fan_out("item", items=list(range(TASKS)))(lambda ctx: f"do {ctx.item}")
        engine = Engine(db, config=EngineConfig(poll_interval_s=600))
        statements.clear()
        outcome = await engine.start(wf, {})
        finished = await db.fetch_value(
            "SELECT count(*) FROM attempts WHERE state = 'finished'")
    finally:
        await db.close()
    assert outcome.status == "finished", outcome.error
    assert finished == TASKS
    per_task = len(statements) / TASKS
    assert per_task <= MOST_PER_TASK[shape], (per_task, statements[:40])


async def test_on_postgresql_a_task_is_four_statements(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL, where each statement of a pipelined group is a message of its own, a
    call is one statement (its row, rollups, usage hour, run tokens, day and event), and so
    are an attempt's start (node, attempt, its events) and a finished node's end (attempt,
    node, events, progress returning the run's requests), so a fan-out task sends 4: start,
    call, end and its node's creation (counted as the connection sends them, a row of an
    ``executemany`` as one; BEGIN and COMMIT aside; the run's own reads, its steers' before
    dispatching among them, add a fraction: 4.02 in bench/bench_pg_engine.py; 9.17 before
    the start and the end were one statement each). Steers for the next attempt add nothing
    while none waits (11.15 when each task read them)."""
    if db.backend != "postgresql":
        pytest.skip("SQLite's count is the test above")
    from store.db.postgres.pg_connection import PgConnection

    sent = [0]
    execute, executemany = PgConnection.execute, PgConnection.executemany

    def counted(self: PgConnection, sql: str, parameters: Any = (), /) -> Any:
        sent[0] += 1
        return execute(self, sql, parameters)

    def counted_many(self: PgConnection, sql: str, parameters: Any, /) -> Any:
        batch = list(parameters)
        sent[0] += len(batch)
        return executemany(self, sql, batch)

    monkeypatch.setattr(PgConnection, "execute", counted)
    monkeypatch.setattr(PgConnection, "executemany", counted_many)
    # An agent that writes no log, so no artifact is mirrored into the database either.
    wf = Workflow("small", agents={"a": Instant()}, default_agent="a", concurrency=10)
    wf.fan_out("item", items=list(range(TASKS)))(lambda ctx: f"do {ctx.item}")
    engine = Engine(db, config=EngineConfig(poll_interval_s=600))
    sent[0] = 0
    outcome = await engine.start(wf, {})
    assert outcome.status == "finished", outcome.error
    per_task = sent[0] / TASKS
    assert per_task <= 4.5, per_task
    store = RunStore(db)
    assert (await store.get_run(outcome.run_id)).tokens.input == 100 * TASKS
    assert (await store.usage_by_bucket(""))["<50k"][0] == TASKS
