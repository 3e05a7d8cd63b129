"""Reads that stay cheap as history grows: a node's attempts and calls for ``tether node`` and the
dashboard's node view are read a page at a time through an index (no sort of everything), and
a fan-out's nodes through a range of the primary key."""

from __future__ import annotations

import sqlite3

import pytest

from store.db.seam import Database
from store.db.sqlite.sqlite_database import SqliteDatabase
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.read import dashboard_sql
from store.read.dashboard_reader import DashboardReader
from store.runs import calls_sql, runs_sql
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

ATTEMPTS = 300


@pytest.fixture
async def history(db: Database) -> tuple[RunStore, str]:
    """A run whose node 'busy' had 300 attempts, one call each, next to a fan-out and a
    node whose id only looks alike."""
    store = RunStore(db)
    run = await store.create_run("w")
    await store.upsert_nodes(
        run.run_id,
        [
            ("busy", 0, "pending", []),
            ("fan[a]", 0, "pending", []),
            ("fan[b]", 0, "pending", []),
            ("fan", 0, "pending", []),
            ("fanatic", 0, "pending", []),
            ("fan]", 0, "pending", []),
        ],
    )
    for attempt in range(1, ATTEMPTS + 1):
        await store.start_attempt(run.run_id, "busy", 0, attempt, agent="sim")
        await store.record_call(
            CallUsage(run.run_id, "busy", 0, attempt, "sim", TokenUsage(input=attempt))
        )
        await store.finish_attempt(
            run.run_id,
            "busy",
            0,
            attempt,
            "failed",
            usage=TokenUsage(input=attempt),
            error="again",
            node_state="retrying",
        )
    return store, run.run_id


async def test_attempt_pages_newest_first_each_read_oldest_first(
    history: tuple[RunStore, str],
) -> None:
    store, run_id = history
    assert await store.attempt_states(run_id, "busy", 0) == {"failed": ATTEMPTS}
    page = await store.attempts_page(run_id, "busy", 0, limit=10)
    assert [a.attempt for a in page] == list(range(291, 301))
    older = await store.attempts_page(run_id, "busy", 0, limit=10, offset=10)
    assert [a.attempt for a in older] == list(range(281, 291))
    calls = await store.calls_of_attempts(run_id, "busy", 0, 291, 300)
    assert [c.tokens.input for c in calls] == list(range(291, 301))


async def test_fan_out_nodes_are_a_key_range(history: tuple[RunStore, str]) -> None:
    store, run_id = history
    copies = await store.fan_out_nodes(run_id, "fan", 10)
    assert [n.node_id for n in copies] == ["fan[a]", "fan[b]"]
    assert [n.node_id for n in await store.fan_out_nodes(run_id, "fan", 1)] == ["fan[a]"]


async def test_dashboard_node_view_reads_the_newest_page(
    history: tuple[RunStore, str], workspace: Workspace
) -> None:
    store, run_id = history
    if store.db.backend != "sqlite":
        pytest.skip("the dashboard's SQLite reader (PostgreSQL has its own, same queries)")
    reader = await DashboardReader.open(workspace)
    try:
        attempts = await reader.attempts(run_id, "busy", 0, limit=100)
        assert [a.attempt for a in attempts] == list(range(201, 301))
        calls = await reader.calls(run_id, "busy", 0, limit=50)
        assert [c.attempt for c in calls] == list(range(251, 301))
    finally:
        await reader.close()


async def test_calls_per_run_come_from_the_rollups(
    history: tuple[RunStore, str], db: Database, workspace: Workspace
) -> None:
    """The Tokens view's Calls column for each run: what the histogram counts."""
    store, run_id = history
    idle = await store.create_run("w")
    if db.backend == "sqlite":
        reader = await DashboardReader.open(workspace)
    else:
        from store.read.pg_dashboard_tail import PgDashboardReader

        reader = PgDashboardReader(db, workspace)  # type: ignore[arg-type]
    try:
        made = await reader.calls_of_runs([run_id, idle.run_id, run_id, "r-gone"])
        assert made == {run_id: ATTEMPTS}
        buckets = await reader.usage_by_bucket(run_id)
        assert sum(b.calls for b in buckets) == ATTEMPTS
    finally:
        if db.backend == "sqlite":
            await reader.close()


@pytest.mark.parametrize(
    ("query", "params"),
    [
        (runs_sql.SELECT_ATTEMPTS_PAGE, ("r", "n", 0, 10, 0)),
        (calls_sql.SELECT_CALLS_OF_ATTEMPTS, ("r", "n", 0, 1, 10)),
        (runs_sql.SELECT_FAN_OUT_NODES, ("r", "n[", "n\\", 10)),
        (dashboard_sql.ATTEMPTS_OF_NODE, ("r", "n", 0, 10)),
        (dashboard_sql.CALLS_OF_NODE, ("r", "n", 0, 10)),
    ],
)
async def test_paged_reads_walk_an_index_without_sorting(
    workspace: Workspace, query: str, params: tuple[object, ...]
) -> None:
    db = await SqliteDatabase.open(workspace)  # SQLite's query planner
    plan = " ".join(
        str(tuple(row)) for row in await db.fetch_all(f"EXPLAIN QUERY PLAN {query}", params)
    )
    assert "USING" in plan and "INDEX" in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # no sort of every row before the page
    assert "SCAN" not in plan.replace("SCAN CONSTANT", ""), plan
    await db.close()


def test_counted_listing_queries_stop_at_their_limit() -> None:
    from store.db.paging import counted

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    assert conn.execute(counted("SELECT x FROM t ORDER BY x LIMIT ?"), (30,)).fetchone()[0] == 30
