"""Issue 13 §3/§4 with Pilot: the back stack, Home/End, the cursor following the newest run,
the workflow graph's cursor driving the inspector, ? listing keys with when they apply."""

from __future__ import annotations

from sample_data import NOW_MS
from test_views import settle

from store.clock import ManualClock
from store.db.backends import open_database
from store.runs.run_store import RunStore
from tui.screens.handoffs_view import HandoffsScreen
from tui.screens.help import HelpScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs_view import RunsScreen
from tui.screens.tokens_view import TokensScreen
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.workflow_graph import WorkflowGraph

SIZE = (140, 40)


async def wait_for(pilot, condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(200):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def open_review_run(pilot, app) -> None:  # type: ignore[no-untyped-def]
    """Open the sample's run-review-1 from the Runs list."""
    await settle(pilot, app)
    app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run")


async def test_escape_goes_back_through_t_and_to_handoffs(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert "escape" not in app.screen.active_bindings  # nowhere to go back to yet
        app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run")
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, TokensScreen), "Tokens")
        await pilot.press("escape")  # back to the run we came from, not to the list
        await wait_for(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run again")
        assert app.screen.run_id == "run-review-1"
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), "the runs list")
        await pilot.press("4")
        await wait_for(pilot, lambda: isinstance(app.screen, HandoffsScreen), "Handoffs")
        await settle(pilot, app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the next run")
        await pilot.press("escape")  # back to Handoffs, where the run was opened
        await wait_for(pilot, lambda: isinstance(app.screen, HandoffsScreen), "Handoffs again")
        await pilot.press("escape")  # and further back: the Runs view shown before
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), "Runs again")


async def test_the_views_own_key_in_a_run_shows_the_view(make_app):
    # Seen in tmux: 1 in a run opened from Runs (or from Handoffs) did nothing, although the
    # tab line and the help say 1 is the Runs list.
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_review_run(pilot, app)
        await pilot.press("1")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), "the runs list")
        assert app.screen.query_one("#runs-table", KeyedTable).cursor_key == "run-review-1"
        await pilot.press("4")
        await wait_for(pilot, lambda: isinstance(app.screen, HandoffsScreen), "Handoffs")
        await settle(pilot, app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the next run")
        await pilot.press("1")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), "the runs list")


async def test_home_end_and_the_cursor_following_the_newest_run(make_app, sample_workspace):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        table.focus()
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0 and table.cursor_key == "run-long-g2"
        # On the first row, a new run takes the cursor...
        db = await open_database(sample_workspace, clock=ManualClock(NOW_MS + 1))
        try:
            await RunStore(db).create_run("code-review", run_id="run-new-1")
            await settle(pilot, app)
            assert table.cursor_key == "run-new-1"
            # ...but not once the person moved it.
            await pilot.press("down")
            assert table.cursor_key == "run-long-g2"
            await RunStore(db).create_run("code-review", run_id="run-new-2")
            await settle(pilot, app)
            assert table.keys[0] == "run-new-2" and table.cursor_key == "run-long-g2"
        finally:
            await db.close()


async def test_graph_cursor_moves_along_the_run_and_drives_the_inspector(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_review_run(pilot, app)
        detail = app.screen
        await settle(pilot, app)
        graph = detail.query_one(WorkflowGraph)
        assert app.focused is graph
        assert [[b.key for b in c] for c in graph.graph.columns] == [
            ["plan"], ["review-a", "review-b"], ["summarize"]]
        await pilot.press("right")
        await pilot.press("down")
        await wait_for(pilot, lambda: detail.selected_node is not None
                       and detail.selected_node.key == "review-b#0", "review-b inspected")
        assert "run-review-1 › node review-b#0" in detail.crumb().plain
        await pilot.press("right")
        await wait_for(pilot, lambda: detail.selected_node.key == "summarize#0", "summarize")
        await pilot.press("home")
        await wait_for(pilot, lambda: detail.selected_node.key == "plan#0", "plan")
        await pilot.press("enter")  # the node in the table
        await wait_for(pilot, lambda: app.focused is detail.query_one("#nodes-table"),
                       "the node table")
        assert detail.query_one("#nodes-table", KeyedTable).cursor_key == "plan#0"
        await pilot.press("down")  # the table's cursor moves the graph's
        await wait_for(pilot, lambda: graph.cursor == (1, 0), "the graph to follow the table")


async def test_help_lists_keys_that_do_not_apply_now_with_when_they_do(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")  # finished
        await pilot.pause()
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        text = str(app.screen.query_one("#help-keys").render())
        assert "Cancel run — a running (or stale) or pending run" in text
        assert "Not available on the current selection" in text
