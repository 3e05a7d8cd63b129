"""The dashboard on a PostgreSQL workspace: it follows commits by LISTEN/NOTIFY, says
"reconnecting" (never a stale "live") while its listening connection is down, shows the
workers, and ``n`` queues a run for them instead of running it in-process."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from pg_support import fresh_schema
from textual.widgets import Button

from store.clock import SYSTEM_CLOCK
from store.db.backends import open_database
from store.db.postgres.pg_database import channel_for
from store.db.postgres.pg_listen import application_name
from store.runs.run_queue import RunQueue
from store.workspace.layout import Workspace
from tests.tui_actions.pilot_support import press_for, until
from tui.app import TetherApp
from tui.modals import LaunchRunDialog
from tui.run_control import EXAMPLES_DIR
from tui.screens.runs_view import RunsScreen

pytestmark = pytest.mark.postgresql

SIZE = (150, 40)


@pytest.fixture
async def team_workspace(tmp_path: Path) -> AsyncIterator[Workspace]:
    with fresh_schema("d") as url:
        workspace = Workspace(tmp_path / ".tether", database_url=url)
        async with await open_database(workspace) as db:
            await RunQueue(db).create_run(
                "code-review", workflow_path=str(EXAMPLES_DIR / "code_review.py")
            )
        yield workspace


def status_line(app: TetherApp) -> str:
    return app.status_text().plain


async def test_follows_by_notification_reconnects_shows_workers_and_queues(
    team_workspace: Workspace,
) -> None:
    # A long poll interval: anything seen quickly came by notification, not by the timer.
    app = TetherApp(team_workspace, clock=SYSTEM_CLOCK, watch=True, poll_interval=30.0)
    app.animation_level = "none"
    async with await open_database(team_workspace) as db, app.run_test(size=SIZE) as pilot:
        queue = RunQueue(db)
        await until(pilot, lambda: app.tailer.link_state == "live", "listening")
        assert "● live" in status_line(app)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        await queue.report_worker("build-host-7:4242:abc", 2)
        await until(pilot, lambda: screen.query_one("#workers-line").display, "workers line")
        workers = str(screen.query_one("#workers-line").render())
        assert socket.gethostname() in workers and f"pid {os.getpid()}" in workers
        assert "2 held" in workers and "GONE" not in workers
        # n queues the run (a worker will run it); nothing runs in the dashboard's process.
        dialog = await press_for(pilot, app, "n", LaunchRunDialog)
        # The dialog says it queues, not that it runs the workflow here.
        await until(pilot, lambda: "a tether worker runs" in str(
            dialog.query_one("#launch-description").render()), "the queue described")
        assert "Launch loads and runs" not in str(dialog.query_one("#launch-description").render())
        assert str(dialog.query_one("#launch-ok", Button).label) == "Queue (ctrl+s)"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.tailer.last_seq > 0 and len(screen.runs) == 2,
                    "the queued run listed")
        assert await queue.queue_depth() == 1
        queued = [r for r in screen.runs.values() if r.status == "pending"]
        assert len(queued) == 1 and queued[0].workflow == "code-review"
        # Kill the dashboard's listening connection: "reconnecting", then live again.
        reader = app.reader
        assert reader is not None
        channel = channel_for(reader.schema_name)  # type: ignore[attr-defined]
        with psycopg.connect(team_workspace.database_url or "", autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s", (application_name(channel),))
        await until(pilot, lambda: "reconnecting" in status_line(app), "reconnecting shown")
        assert "● live" not in status_line(app)
        await until(pilot, lambda: app.tailer.link_state == "live", "listening again")
        before = app.tailer.last_seq
        await queue.enqueue("code-review", workflow_path=str(EXAMPLES_DIR / "code_review.py"))
        await until(pilot, lambda: app.tailer.last_seq > before, "the new run's events")
