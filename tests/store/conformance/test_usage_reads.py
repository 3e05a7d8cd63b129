"""Usage over time (``usage_hours``, kept as calls are recorded) and one run's cost breakdown,
the same on SQLite and PostgreSQL; deleting a run takes its usage with it."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.read.usage_reads import (
    DAY_MS,
    HOUR_MS,
    filled,
    run_breakdown,
    usage_over_time,
)
from store.runs.run_store import RunStore

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


async def _call(store: RunStore, run_id: str, node: str, attempt: int, at: int, *,
                agent: str = "sim", model: str | None = "m-a", cost: float | None = 0.5,
                usage: TokenUsage = TokenUsage(100, 300, 0, 10, 0)) -> None:
    await store.record_call(CallUsage(run_id, node, 0, attempt, agent, usage, model=model,
                                      cost_usd=cost, started_at_ms=at, finished_at_ms=at + 10))


@pytest.fixture
async def store(db: Database, clock: ManualClock) -> RunStore:
    """Two workflows over two days; three models (one without a price), two agents."""
    runs = RunStore(db)
    clock.set(T0)
    await runs.create_run("review", run_id="r-1")
    await runs.upsert_nodes("r-1", [("plan", 0, "pending", []), ("work", 0, "pending", [])])
    await runs.upsert_node("r-1", "work", 0, "finished", attempts=2)
    await _call(runs, "r-1", "plan", 1, T0 + 10 * 60_000)
    await _call(runs, "r-1", "work", 1, T0 + 70 * 60_000, cost=1.0)  # retried later
    await _call(runs, "r-1", "work", 2, T0 + 80 * 60_000, cost=2.0, model="m-b",
                usage=TokenUsage(50_000, 150_000, 0, 100, 0))
    await runs.create_run("nightly", run_id="r-2")
    await _call(runs, "r-2", "job", 1, T0 + DAY_MS + 5, agent="codex", model=None, cost=None)
    return runs


async def test_usage_by_hour_day_model_agent_and_workflow(
    store: RunStore, clock: ManualClock
) -> None:
    db = store.db
    until = T0 + 2 * DAY_MS

    async def by(grouping: str, since: int = T0) -> list[tuple[object, int, float | None, int]]:
        rows = await usage_over_time(db, by=grouping, since_ms=since, until_ms=until)
        return [(r.key, r.calls, r.cost.usd, r.runs) for r in rows]

    assert await by("hour") == [(T0, 1, 0.5, 1), (T0 + HOUR_MS, 2, 3.0, 1),
                                (T0 + DAY_MS, 1, 0.0, 1)]
    assert await by("day") == [(T0, 3, 3.5, 1), (T0 + DAY_MS, 1, 0.0, 1)]
    assert await by("model") == [("m-b", 1, 2.0, 1), ("m-a", 2, 1.5, 1), ("", 1, 0.0, 1)]
    assert await by("agent") == [("sim", 3, 3.5, 1), ("codex", 1, 0.0, 1)]
    assert await by("workflow") == [("review", 3, 3.5, 1), ("nightly", 1, 0.0, 1)]
    assert await by("day", since=T0 + DAY_MS + 3_600_000) == [(T0 + DAY_MS, 1, 0.0, 1)]
    nightly = (await usage_over_time(db, by="workflow", since_ms=T0, until_ms=until))[1]
    assert nightly.cost.unpriced_calls == 1
    hours = filled(await usage_over_time(db, by="hour", since_ms=T0, until_ms=T0 + 3 * HOUR_MS),
                   "hour", T0, T0 + 3 * HOUR_MS)
    assert [(r.key, r.calls) for r in hours] == [(T0, 1), (T0 + HOUR_MS, 2),
                                                 (T0 + 2 * HOUR_MS, 0)]
    day = (await usage_over_time(db, by="day", since_ms=T0, until_ms=until))[0]
    assert day.tokens.cache_read == 150_600 and round(day.cache_share, 3) == 0.75


async def test_a_runs_breakdown_names_its_costliest_node_call_and_retries(
    store: RunStore,
) -> None:
    found = await run_breakdown(store.db, "r-1")
    assert [n.key for n in found.nodes] == ["work#0", "plan#0"]
    work = found.nodes[0]
    assert (work.cost.usd, work.retried_usd, work.attempts, work.calls) == (3.0, 1.0, 2, 2)
    assert found.total.usd == 3.5 and found.retried_usd == 1.0
    assert found.top_calls[0].cost_usd == 2.0 and found.top_calls[0].model == "m-b"
    assert [m[0] for m in found.models] == ["m-b", "m-a"]


async def test_deleting_a_run_takes_its_usage_with_it(store: RunStore) -> None:
    await store.set_run_status("r-2", "finished")
    await store.delete_run("r-2")
    rows = await usage_over_time(store.db, by="day", since_ms=T0, until_ms=T0 + 2 * DAY_MS)
    assert [(r.key, r.calls) for r in rows] == [(T0, 3)]
