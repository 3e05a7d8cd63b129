"""The dashboard stays live while a separate process writes, and never pins a read snapshot."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from store.dashboard import DashboardReader
from store.database import Database
from store.runs import RunStore
from store.workspace import Workspace
from tui.app import TetherApp
from tui.screens.runs_view import RunsScreen
from tui.tailing import FileTail, WorkspaceTailer
from tui.widgets.keyed_table import KeyedTable

WRITER = Path(__file__).with_name("writer_process.py")


async def test_runs_written_by_another_process_appear_on_screen(make_app):
    # The real path: watchfiles wake-up on the workspace folder, with a slow fallback poll.
    app: TetherApp = make_app(watch=True, poll_interval=5.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.3)
        assert isinstance(app.screen, RunsScreen)
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(WRITER), str(app.workspace.root), "5", "0.05"
        )
        assert await asyncio.wait_for(process.wait(), timeout=30) == 0
        table = app.screen.query_one("#runs-table", KeyedTable)
        for _ in range(100):
            if all(f"run-ext-{n}" in table.keys for n in range(5)):
                break
            await pilot.pause(0.05)
        assert all(f"run-ext-{n}" in table.keys for n in range(5)), table.keys
        assert app.tailer.last_seq >= 10  # the events were read incrementally


async def test_reader_sees_commits_and_never_blocks_a_checkpoint(sample_workspace: Workspace):
    reader = await DashboardReader.open(sample_workspace)
    writer = await Database.open(sample_workspace)
    try:
        assert reader.journal_mode == "wal"
        assert await reader.changed()  # first call
        assert not await reader.changed()
        before = len(await reader.recent_runs(500))
        await RunStore(writer).create_run("code-review", run_id="run-after")
        assert await reader.changed()
        assert len(await reader.recent_runs(500)) == before + 1
        # The reader keeps no snapshot open between calls: a full checkpoint succeeds.
        busy, _log, _done = (await writer.fetch_one("PRAGMA wal_checkpoint(TRUNCATE)")) or (1,)
        assert busy == 0
        # Read-only: a write through the reader is refused by SQLite.
        try:
            await reader._conn.execute("DELETE FROM runs")
        except sqlite3.OperationalError as error:
            assert "readonly" in str(error) or "read-only" in str(error)
        else:
            raise AssertionError("the dashboard's connection accepted a write")
    finally:
        await writer.close()
        await reader.close()


async def test_tailer_reads_only_new_events_in_order(sample_workspace: Workspace):
    tailer = WorkspaceTailer(sample_workspace)
    writer = await Database.open(sample_workspace)
    try:
        first = await tailer.poll()
        assert first is not None and first.first_read and first.events == []
        assert await tailer.poll() is None  # nothing committed since
        store = RunStore(writer)
        await store.create_run("w", run_id="run-x")
        await store.set_run_status("run-x", "finished")
        batch = await tailer.poll()
        assert batch is not None
        assert [e.type for e in batch.events] == ["run.created", "run.status"]
        assert batch.run_ids == {"run-x"} and batch.touches("run-x")
    finally:
        await writer.close()
        await tailer.close()


async def test_waiting_for_a_workspace_that_does_not_exist_yet(tmp_path: Path):
    tailer = WorkspaceTailer(Workspace(tmp_path / "later"))
    assert await tailer.poll() is None
    assert tailer.problem and "waiting" in tailer.problem
    db = await Database.open(Workspace(tmp_path / "later"))
    await db.close()
    batch = await tailer.poll()
    assert batch is not None and batch.first_read
    await tailer.close()


def test_file_tail_returns_whole_new_lines_only(tmp_path: Path):
    path = tmp_path / "stream.log"
    path.write_text("a\nb\npart", encoding="utf-8")
    tail = FileTail(path)
    assert tail.read_new_lines() == ["a", "b"]
    assert tail.read_new_lines() == []
    with path.open("a", encoding="utf-8") as handle:
        handle.write("ial\nc\n")
    assert tail.read_new_lines() == ["partial", "c"]
    path.write_text("new\n", encoding="utf-8")  # rewritten (shorter): start over
    assert tail.read_new_lines() == ["new"]


async def test_a_replaced_database_file_is_reopened(tmp_path: Path):
    workspace = Workspace(tmp_path / "ws")
    db = await Database.open(workspace)
    await RunStore(db).create_run("w", run_id="run-old")
    await db.close()
    tailer = WorkspaceTailer(workspace)
    try:
        assert await tailer.poll() is not None
        assert tailer.reader is not None
        assert [r.run_id for r in await tailer.reader.recent_runs()] == ["run-old"]
        other = Workspace(tmp_path / "other")
        db = await Database.open(other)
        await RunStore(db).create_run("w", run_id="run-new")
        await db.close()
        other.database_path.replace(workspace.database_path)
        batch = await tailer.poll()
        assert batch is not None and batch.first_read
        assert [r.run_id for r in await tailer.reader.recent_runs()] == ["run-new"]
    finally:
        await tailer.close()
