"""Pilot tests for the polish points of issue 24 about dialogs and the cursor: the launch dialog
lists each workflow once, keys typed while a dialog opens never reach the view behind it, and
the cursor stays in place after a run is deleted."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual import events
from textual.widgets import Select, Static, TextArea

from store.clock import ManualClock
from store.workspace.layout import Workspace
from tests.tui_actions.pilot_support import press_for, until
from tests.tui_actions.test_run_actions import (
    CODE_REVIEW,
    MakeApp,
    cli_runs,
    make_run,
    runs_view,
    until_run,
)
from tui.modals import ConfirmDialog, LaunchRunDialog
from tui.run_control import EXAMPLES_DIR
from tui.widgets.keyed_table import KeyedTable


def _loaded(dialog: LaunchRunDialog) -> bool:
    """The dialog has read the workspace's workflows (it opens before it has them)."""
    return "Reading" not in str(dialog.query_one("#launch-empty", Static).render())


async def test_the_launch_dialog_lists_each_workflow_once(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock, tmp_path: Path
) -> None:
    # Runs recorded the bundled file, twice, and a checkout's identical copy of it.
    copy = tmp_path / "checkout" / "code_review.py"
    copy.parent.mkdir()
    shutil.copy(CODE_REVIEW, copy)
    for _ in range(2):
        await make_run(workspace, clock, status="finished")
    from store.db.backends import open_database
    from store.runs.run_store import RunStore

    async with await open_database(workspace, clock=clock) as db:
        await RunStore(db).create_run("code-review", workflow_path=str(copy), owner_id="x:1:y")
    async with runs_view(make_app) as (app, pilot, _screen):
        dialog = await press_for(pilot, app, "n", LaunchRunDialog)
        await until(pilot, lambda: _loaded(dialog), "the workflows to be read")
        options = dialog.query_one("#launch-workflow", Select)._options
        names = [str(label).split("  ")[0] for label, value in options if value is not Select.NULL]
        assert len(names) == len(set(names)), names
        bundled = sorted(p.stem.replace("_", "-") for p in EXAMPLES_DIR.glob("*.py")
                         if not p.name.startswith("_"))
        assert sorted(names) == bundled


async def test_keys_typed_while_the_launch_dialog_opens_never_reach_the_runs_view(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    done = await make_run(workspace, clock, status="finished")
    async with runs_view(make_app, done.run_id) as (app, pilot, screen):
        # All at once, before the app handles any: `n` opens the dialog, then `d` (delete the
        # run) and `x` arrive while it is still opening.
        for key in ("n", "d", "x"):  # as a terminal delivers them: the driver's queue
            event = events.Key(key, key)
            event.set_sender(app)
            app._driver.send_message(event)  # type: ignore[union-attr]
        await until(pilot, lambda: isinstance(app.screen, LaunchRunDialog),
                    f"the dialog (stack {app.screen_stack})", tries=300)
        dialog = app.screen
        assert isinstance(dialog, LaunchRunDialog)
        await until(pilot, lambda: _loaded(dialog), "the workflows to be read")
        await pilot.pause()
        # No delete confirmation was stacked anywhere; the run is still there.
        assert not any(isinstance(s, ConfirmDialog) for s in app.screen_stack)
        assert app.screen_stack[-2:] == [screen, dialog]
        text = dialog.query_one("#launch-input", TextArea).text
        assert "dx" in text or text == dialog._current_example(), text  # typed there, or dropped
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
    assert done.run_id in cli_runs(workspace)


async def test_after_deleting_a_run_the_cursor_stays_in_its_place(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    made = []
    for _ in range(4):
        made.append(await make_run(workspace, clock, status="finished"))
        clock.advance(1_000)
    newest_first = [run.run_id for run in reversed(made)]
    async with runs_view(make_app, newest_first[2]) as (app, pilot, screen):
        table = screen.query_one("#runs-table", KeyedTable)
        assert table.cursor_row == 2
        await press_for(pilot, app, "d", ConfirmDialog)
        await pilot.press("y")
        await until_run(app, pilot, "the deletion",
                        lambda runs: all(r.run_id != newest_first[2] for r in runs))
        await until(pilot, lambda: newest_first[2] not in table.keys, "the row to go")
        # The row that followed the deleted one took its place under the cursor.
        assert table.cursor_row == 2 and table.cursor_key == newest_first[3]
        assert app.screen is screen
