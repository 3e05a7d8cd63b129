"""Following a PostgreSQL workspace: one notification per committed write carrying the last
event number, a listener that reconnects by itself, and a tail that never skips an event that
commits late (PostgreSQL only; skipped without a server, see tests/pg_support.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from pg_support import fresh_schema

from store.db.backends import open_database
from store.db.postgres.pg_database import PostgresDatabase, channel_for
from store.db.postgres.pg_listen import CATCH_UP, ChangeListener, application_name
from store.read.pg_dashboard_tail import PgDashboardReader, find_gaps
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.tailing import WorkspaceTailer

pytestmark = pytest.mark.postgresql

DEADLINE_S = 30.0


@pytest.fixture
async def pg(tmp_path: Path) -> AsyncIterator[PostgresDatabase]:
    with fresh_schema() as url:
        db = await open_database(Workspace(tmp_path / ".tether", database_url=url))
        assert isinstance(db, PostgresDatabase)
        try:
            yield db
        finally:
            await db.close()


async def _next(iterator: AsyncIterator[str]) -> str:
    return await asyncio.wait_for(anext(iterator), DEADLINE_S)


async def test_each_write_notifies_once_with_its_last_event(pg: PostgresDatabase) -> None:
    stop = asyncio.Event()
    listener = ChangeListener(pg.url, pg.channel)
    payloads = listener.payloads(stop)
    assert await _next(payloads) == CATCH_UP and listener.state == "live"
    store = RunStore(pg)
    run = await store.create_run("wf", nodes_total=2)
    await store.upsert_nodes(run.run_id, [("a", 0, "pending", []), ("b", 0, "pending", ["a"])])
    last = await store.last_event_seq()
    assert int(await _next(payloads)) == last - 2  # run.created
    assert int(await _next(payloads)) == last  # both node events: one notification
    from store.memory.memory_store import MemoryStore

    await MemoryStore(pg).set_fact("workflow:x", "k", 1)  # a write without events
    assert await _next(payloads) == ""
    stop.set()
    await payloads.aclose()


async def test_listener_reconnects_after_its_connection_is_killed(pg: PostgresDatabase) -> None:
    stop = asyncio.Event()
    states: list[str] = []
    listener = ChangeListener(pg.url, pg.channel, on_state=states.append)
    payloads = listener.payloads(stop)
    assert await _next(payloads) == CATCH_UP
    with psycopg.connect(pg.url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (application_name(pg.channel),),
        ).fetchall()
    assert killed == [(True,)]
    # It notices, says so, reconnects and asks for a catch-up read.
    assert await _next(payloads) == CATCH_UP
    assert states == ["live", "reconnecting", "live"] and listener.reconnects == 1
    await RunStore(pg).create_run("wf")
    assert int(await _next(payloads)) == await RunStore(pg).last_event_seq()
    stop.set()
    await payloads.aclose()


async def test_tail_never_skips_an_earlier_transaction_that_commits_late(
    pg: PostgresDatabase,
) -> None:
    reader = await PgDashboardReader.open(pg.workspace)
    try:
        start = await reader.max_event_seq()
        insert = "INSERT INTO events (at_ms, type) VALUES (0, %s) RETURNING seq"
        with psycopg.connect(pg.url) as early, psycopg.connect(pg.url) as late:
            early_seq = early.execute(insert, ("early",)).fetchone()[0]  # xid assigned first
            late_seq = late.execute(insert, ("late",)).fetchone()[0]
            late.commit()
            assert late_seq > early_seq
            # "late" is read; "early" holds a smaller number but has not committed: a plain
            # "seq > last" tail would skip it for ever. The tail remembers the gap instead.
            first = await reader.events_since(start)
            assert [e.type for e in first] == ["late"]
            assert await reader.events_since(first[-1].seq) == []
            early.commit()
        second = await reader.events_since(first[-1].seq)
        assert [(e.type, e.seq) for e in second] == [("early", early_seq)]
        assert await reader.events_since(second[-1].seq) == []
        # A number whose transaction rolled back is a gap that never fills: forgotten later.
        with psycopg.connect(pg.url) as aborted:
            aborted.execute(insert, ("never",))
            aborted.rollback()
        await RunStore(pg).append_event("after")
        third = await reader.events_since(second[-1].seq)
        assert [e.type for e in third] == ["after"] and len(reader._gaps) == 1
        assert find_gaps(3, [5, 6, 9]) == [4, 7, 8]
    finally:
        await reader.close()


async def test_dashboard_tailer_wakes_on_notifications_only(pg: PostgresDatabase) -> None:
    tailer = WorkspaceTailer(pg.workspace)
    stop = asyncio.Event()
    assert await tailer.poll() is not None  # opens the reader: the first read
    wakes = tailer.wake_ups(stop)
    await asyncio.wait_for(anext(wakes), DEADLINE_S)  # listening: catch-up
    assert tailer.link_state == "live"
    await tailer.poll()  # the catch-up read (nothing committed since the first read)
    reads = tailer.reader._db.fetch_all  # type: ignore[union-attr]
    queried: list[str] = []

    async def counting(query: str, params: object = ()) -> list[object]:
        queried.append(query)
        return await reads(query, params)  # type: ignore[arg-type]

    tailer.reader._db.fetch_all = counting  # type: ignore[union-attr,method-assign]
    assert await tailer.poll() is None and queried == []  # nothing heard: no query at all
    run = await RunStore(pg).create_run("wf")
    await asyncio.wait_for(anext(wakes), DEADLINE_S)
    batch = await tailer.poll()
    assert batch is not None and [e.run_id for e in batch.events] == [run.run_id]
    assert channel_for(pg.schema_name) == pg.channel
    stop.set()
    await wakes.aclose()
    await tailer.close()
