"""The two reads the export adds to the store, on both backends: runs created since a time,
page by page, and the newest event before a time (where the live export starts)."""

from __future__ import annotations

from engine.telemetry.otel_live import _seq_before
from store.runs.run_store import RunStore


async def test_runs_since_pages_oldest_first(db, clock):
    store = RunStore(db)
    made = []
    for index in range(5):
        clock.advance(1_000)
        made.append((await store.create_run("w", run_id=f"r-since-{index}")).run_id)
    since = (await store.get_run("r-since-1")).created_at_ms
    pages, page = [], await store.runs_since(since, limit=2)
    while page:
        pages.append([run.run_id for run in page])
        page = await store.runs_since(since, after=page[-1], limit=2)
    assert pages == [made[1:3], made[3:5]]


async def test_the_live_export_starts_after_the_last_event_before_it_opened(db, clock):
    store = RunStore(db)
    assert await _seq_before(db, clock.now_ms()) == 0
    await store.create_run("w", run_id="r-before")
    first = await store.last_event_seq()
    clock.advance(5_000)
    opened = clock.now_ms()
    await store.create_run("w", run_id="r-after")
    assert await _seq_before(db, opened) == first
    assert await _seq_before(db, clock.now_ms() + 1) == await store.last_event_seq()
