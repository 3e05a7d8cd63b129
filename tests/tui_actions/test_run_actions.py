"""Run control from the Runs view: launch, clear, cancel, resume, delete and the quit question,
in the real app with its embedded engine, checked through ``tether runs`` in a subprocess."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Select, Static, TextArea

from engine.run.wiring import open_engine
from engine.workflow.loader import load_workflow
from store.clock import ManualClock
from store.db.backends import open_database
from store.model.run_records import RunRecord
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tests.cli.memory_cli_support import tether
from tests.tui_actions.pilot_support import (
    choose_in_palette,
    dialog_target,
    press_for,
    shown_keys,
    until,
)
from tui.actions.run_actions import allowed_run_actions
from tui.app import TetherApp
from tui.modals import ConfirmDialog, LaunchRunDialog, ReasonDialog
from tui.run_control import EXAMPLES_DIR, host_for, workflow_files
from tui.screens.runs_view import RunsScreen
from tui.widgets.keyed_table import KeyedTable

SIZE = (150, 40)
CODE_REVIEW = EXAMPLES_DIR / "code_review.py"
MakeApp = Callable[[], TetherApp]


@pytest.fixture(autouse=True)
def quick_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast, never-failing simulated agent (the demo makes it slow and flaky)."""
    monkeypatch.setenv("TETHER_SIM_LATENCY_MS", "5")
    monkeypatch.setenv("TETHER_SIM_FAILURE_RATE", "0")


# -- policy ----------------------------------------------------------------------------------


def _row(status: str, heartbeat_ms: int = 0) -> RunRecord:
    return RunRecord(run_id="r", workflow="w", status=status, heartbeat_at_ms=heartbeat_ms)


@pytest.mark.parametrize(
    ("status", "now", "allowed"),
    [
        ("running", 1_000, {"launch_run", "clear_run", "cancel_run"}),
        ("running", 40_000, {"launch_run", "clear_run", "cancel_run", "resume_run",
                             "delete_run"}),
        ("pending", 1_000, {"launch_run", "clear_run", "cancel_run"}),
        ("failed", 1_000, {"launch_run", "clear_run", "resume_run", "delete_run"}),
        ("cancelled", 1_000, {"launch_run", "clear_run", "resume_run", "delete_run"}),
        ("finished", 1_000, {"launch_run", "delete_run"}),
        ("handed-off", 1_000, {"launch_run", "delete_run"}),
    ],
)
def test_which_run_keys_apply(status: str, now: int, allowed: set[str]) -> None:
    assert allowed_run_actions(_row(status), now) == allowed
    assert allowed_run_actions(None, now) == {"launch_run"}


def test_workflow_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "_private.py").write_text("")
    extra = tmp_path / "elsewhere" / "b.py"
    extra.parent.mkdir()
    extra.write_text("")
    files = workflow_files(tmp_path, [str(extra), str(tmp_path / "a.py"), None, "/nope.py"])
    assert files == [(tmp_path / "a.py").resolve(), extra.resolve()]


# -- helpers ---------------------------------------------------------------------------------


async def make_run(workspace: Workspace, clock: ManualClock, *, status: str = "running",
                   owner: str = "another-host:1:abc") -> RunRecord:
    """A code-review run written as another process would (its owner is elsewhere)."""
    async with await open_database(workspace, clock=clock) as db:
        runs = RunStore(db)
        run = await runs.create_run("code-review", input={"change": "fix the flaky test"},
                                    workflow_path=str(CODE_REVIEW), owner_id=owner)
        if status != "running":
            await runs.set_run_status(run.run_id, status)
        return await runs.get_run(run.run_id)


async def open_runs(app: TetherApp, pilot: Pilot[None], select: str | None = None) -> RunsScreen:
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, RunsScreen)
    await app.refresh_screen(screen)
    if select is not None:
        assert screen.query_one("#runs-table", KeyedTable).select_key(select)
    await pilot.pause()
    return screen




@contextlib.asynccontextmanager
async def runs_view(
    make_app: MakeApp, select: str | None = None
) -> AsyncIterator[tuple[TetherApp, Pilot[None], RunsScreen]]:
    """The real app on the Runs view, the list read, the cursor on ``select`` when given."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        yield app, pilot, await open_runs(app, pilot, select)


async def until_run(app: TetherApp, pilot: Pilot[None], what: str,
                    condition: Callable[[list[RunRecord]], bool]) -> list[RunRecord]:
    """Poll the runs (through the app's own writable connection) until ``condition`` holds."""
    store = await host_for(app).runs()
    for _ in range(400):
        runs = await store.list_runs(limit=50)
        if condition(runs):
            return runs
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")




def cli_runs(workspace: Workspace) -> dict[str, dict[str, Any]]:
    result = tether("runs", "--format", "json", "--workspace", str(workspace.root))
    assert result.returncode == 0, result.stderr
    return {run["run_id"]: run for run in json.loads(result.stdout)["items"]}


# -- the keys --------------------------------------------------------------------------------


async def test_launch_validates_the_input_and_runs_in_the_embedded_engine(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    older = await make_run(workspace, clock, status="finished")  # the workspace exists
    clock.advance(1_000)
    await make_run(workspace, clock, status="finished")
    # The cursor is on the older run (not the first row): the launched run still gets it.
    async with runs_view(make_app, select=older.run_id) as (app, pilot, screen):
        await press_for(pilot, app, "n", LaunchRunDialog)
        dialog = app.screen
        area = dialog.query_one("#launch-input", TextArea)
        assert json.loads(area.text) == {"change": "retry flaky pytest fixtures"}
        area.text = '{"change": 3}'
        await pilot.pause()
        assert dialog.query_one("#launch-ok", Button).disabled
        assert "change" in str(dialog.query_one("#json-status", Static).render())
        area.text = '{"change": "add tests for resume"'
        await pilot.pause()
        assert "not JSON" in str(dialog.query_one("#json-status", Static).render())
        area.text = '{"change": "add tests for resume"}'
        await pilot.pause()
        await pilot.press("ctrl+s")
        runs = await until_run(app, pilot, "the launched run to finish", lambda runs: any(
            r.input == {"change": "add tests for resume", "repository": "tether"}
            and r.status == "finished" for r in runs))
        launched = next(r for r in runs
                        if r.input and r.input.get("change") == "add tests for resume")
        table = screen.query_one("#runs-table", KeyedTable)
        await until(pilot, lambda: table.cursor_key == launched.run_id, "the cursor on it")
    assert cli_runs(workspace)[launched.run_id]["status"] == "finished"


async def test_cancel_asks_naming_the_run_and_stops_it(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_SIM_LATENCY_MS", "60000")  # stays running until cancelled
    await make_run(workspace, clock, status="finished")
    async with runs_view(make_app) as (app, pilot, _screen):
        host = host_for(app)
        known, _ = await host.known_workflows()
        await host.launch(next(k for k in known if k.path == CODE_REVIEW.resolve()),
                          {"change": "slow one"})
        runs = await until_run(app, pilot, "the run to start", lambda runs: any(
            r.status == "running" and r.owner_id for r in runs))
        live = next(r for r in runs if r.status == "running")
        screen = await open_runs(app, pilot, select=live.run_id)
        assert {"c", "x"} <= shown_keys(app) and "R" not in shown_keys(app)
        await press_for(pilot, app, "c", ConfirmDialog)
        assert live.run_id in dialog_target(app)
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        assert (await (await host.runs()).get_run(live.run_id)).status == "running"
        await press_for(pilot, app, "c", ConfirmDialog)
        await pilot.press("y")
        await until_run(app, pilot, "the cancel", lambda runs: any(
            r.run_id == live.run_id and r.status == "cancelled" for r in runs))
    assert cli_runs(workspace)[live.run_id]["status"] == "cancelled"


async def test_clear_hands_a_stale_run_to_a_fresh_generation_with_the_reason(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    stale = await make_run(workspace, clock)
    clock.advance(31_000)
    async with runs_view(make_app, stale.run_id) as (app, pilot, _screen):
        assert {"x", "R", "c", "d"} <= shown_keys(app)
        await press_for(pilot, app, "x", ReasonDialog)
        assert stale.run_id in dialog_target(app)
        await pilot.press(*"context too long", "enter")
        runs = await until_run(app, pilot, "the new generation to finish", lambda runs: any(
            r.parent_run_id == stale.run_id and r.status == "finished" for r in runs))
        handoffs = await (await host_for(app).runs()).list_handoffs()
        successor_id = next(r.run_id for r in runs if r.parent_run_id == stale.run_id)
        # The new run is shown, with the cursor on it.
        table = app.screen.query_one("#runs-table", KeyedTable)
        await until(pilot, lambda: table.cursor_key == successor_id, "the cursor on the new run")
    successor = next(r for r in runs if r.parent_run_id == stale.run_id)
    assert successor.generation == 1
    assert [(h.from_run_id, h.to_run_id, h.reason, h.trigger) for h in handoffs] == [
        (stale.run_id, successor.run_id, "context too long", "person")
    ]
    listed = cli_runs(workspace)
    assert listed[stale.run_id]["status"] == "handed-off"
    assert listed[successor.run_id]["status"] == "finished"


async def test_resume_continues_a_stale_run_in_the_embedded_engine(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    stale = await make_run(workspace, clock)
    clock.advance(31_000)
    async with runs_view(make_app, stale.run_id) as (app, pilot, screen):
        # The confirmation names the workflow file the dashboard would load and run.
        dialog = await press_for(pilot, app, "R", ConfirmDialog)
        assert str(CODE_REVIEW) in " ".join(str(w.render()) for w in dialog.query(Static))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        assert (await (await host_for(app).runs()).get_run(stale.run_id)).status == "running"
        await press_for(pilot, app, "R", ConfirmDialog)
        await pilot.press("y")
        await until_run(app, pilot, "the resumed run to finish", lambda runs: any(
            r.run_id == stale.run_id and r.status == "finished" for r in runs))
    assert cli_runs(workspace)[stale.run_id]["status"] == "finished"


HOSTILE = """
import os
from pathlib import Path
from engine import Workflow
Path(os.environ["IMPORT_MARKER"]).touch()  # what a planted file would do on import
workflow = Workflow("planted", description="Looks harmless.")
workflow.add_task("only", "Do one thing.")
"""


async def test_the_launch_dialog_lists_workflow_files_without_running_them(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(HOSTILE)
    marker = tmp_path / "imported"
    monkeypatch.setenv("IMPORT_MARKER", str(marker))
    async with await open_database(workspace, clock=clock) as db:
        # Anyone who can write runs can record any path (a team workspace's teammate).
        await RunStore(db).create_run("planted", workflow_path=str(planted), owner_id="x:1:y")
    async with runs_view(make_app) as (app, pilot, _screen):
        dialog = await press_for(pilot, app, "n", LaunchRunDialog)
        select = dialog.query_one("#launch-workflow", Select)
        assert str(planted.resolve()) in [value for _label, value in select._options]
        assert not marker.exists()  # listed, not imported
        select.value = str(planted.resolve())
        await pilot.pause()
        description = str(dialog.query_one("#launch-description", Static).render())
        assert "Looks harmless." in description and f"runs {planted.resolve()}" in description
        assert not marker.exists()
        await pilot.press("ctrl+s")  # the person chose it: now it is loaded
        await until(pilot, lambda: marker.exists(), "the chosen file to be loaded")


async def test_delete_asks_first_and_removes_rows_and_artifacts(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    done = await make_run(workspace, clock, status="finished")
    folder = workspace.artifacts_dir / done.run_id / "review" / "1"
    folder.mkdir(parents=True)
    (folder / "stream.log").write_text("log line\n")
    async with runs_view(make_app, done.run_id) as (app, pilot, screen):
        keys = shown_keys(app)
        assert {"n", "d"} <= keys and not {"x", "c", "R"} & keys
        await pilot.press("c", "x", "R")  # do not apply to a finished run: nothing happens
        await pilot.pause()
        assert app.screen is screen
        await press_for(pilot, app, "d", ConfirmDialog)
        assert done.run_id in dialog_target(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        assert folder.exists()
        await press_for(pilot, app, "d", ConfirmDialog)
        await pilot.press("y")
        await until_run(app, pilot, "the deletion", lambda runs: all(
            r.run_id != done.run_id for r in runs))
    assert done.run_id not in cli_runs(workspace)
    assert not (workspace.artifacts_dir / done.run_id).exists()


async def test_quit_asks_while_embedded_runs_are_active_and_leaves_them_resumable(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_SIM_LATENCY_MS", "60000")
    await make_run(workspace, clock, status="finished")
    async with runs_view(make_app) as (app, pilot, screen):
        host = host_for(app)
        known, _ = await host.known_workflows()
        await host.launch(next(k for k in known if k.path == CODE_REVIEW.resolve()),
                          {"change": "left behind"})
        runs = await until_run(app, pilot, "the run to start", lambda runs: any(
            r.status == "running" for r in runs))
        left = next(r for r in runs if r.status == "running")
        await press_for(pilot, app, "q", ConfirmDialog)
        assert left.run_id in dialog_target(app)
        # One run is "it", not "they" (the dialog said "They stop with the dashboard").
        detail = str(app.screen.query_one("#confirm-detail", Static).render())
        assert detail.startswith("It stops with the dashboard") and "it shows as stale" in detail
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        assert app.is_running
        await choose_in_palette(pilot, app, "quit", "asks first")  # the palette's Quit asks too
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the quit question")
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        await press_for(pilot, app, "ctrl+q", ConfirmDialog)  # asks too
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, "the app to quit")
    clock.advance(31_000)
    monkeypatch.setenv("TETHER_SIM_LATENCY_MS", "5")
    async with await open_database(workspace, clock=clock) as db:
        runs_store = RunStore(db)
        record = await runs_store.get_run(left.run_id)
        assert record.status == "running" and record.is_stale(clock.now_ms())
        outcome = await open_engine(db).resume(load_workflow(CODE_REVIEW), left.run_id)
    assert outcome.status == "finished"


async def test_launch_dialog_fits_120x30_and_tab_reaches_its_buttons(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    await make_run(workspace, clock, status="finished")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await open_runs(app, pilot)
        dialog = await press_for(pilot, app, "n", LaunchRunDialog)
        await pilot.pause(0.2)
        screen_region = app.screen.region
        for button in dialog.query(Button):
            assert screen_region.contains_region(button.region), button.id
        assert dialog.query_one("#json-status").region.height > 0
