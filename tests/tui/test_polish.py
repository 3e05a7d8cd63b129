"""Pilot tests for the polish list of issue 24 (item 6), one point each."""

from __future__ import annotations

from test_views import screen_text, settle
from textual.widgets import Static

from tests.tui_actions.pilot_support import press_for, shown_keys, until
from tui.screens.help import HelpScreen
from tui.screens.tokens_view import TokensScreen
from tui.widgets.keyed_table import KeyedTable

SIZE = (140, 42)


async def test_help_lists_the_views_keys_first_and_no_generic_textual_keys(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        help_screen = await press_for(pilot, app, "question_mark", HelpScreen)
        keys = [description for _key, description in help_screen._keys]
        # The Runs view's own keys come before the dashboard's (views, pause, quit).
        assert keys.index("Open run") < keys.index("Quit")
        assert "Why this cost" in keys and "Compare" in keys
        text = str(help_screen.query_one("#help-keys", Static).render())
        for generic in ("Focus Next", "Copy", "Screenshot", "Cursor up"):
            assert generic.lower() not in text.lower(), generic


async def test_x_on_a_finished_run_is_not_offered_and_does_not_run_it_again(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        table.select_key("run-review-1")
        await settle(pilot, app)
        assert "x" not in shown_keys(app)
        screens = len(app.screen_stack)
        await pilot.press("x")
        await settle(pilot, app)
        assert len(app.screen_stack) == screens  # no dialog: nothing would be cleared
        assert len(table.keys) == 6  # and no new generation appeared


async def test_largest_calls_name_the_node_first(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, TokensScreen), "the Tokens view")
        await settle(pilot, app)
        await until(pilot, lambda: "Largest calls" in screen_text(app), "largest calls")
        assert "review-b#0" in screen_text(app)


async def test_at_80_columns_workflow_names_stay_whole(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        text = screen_text(app)
        for workflow in ("incident-runbook", "context-handoff", "code-review"):
            assert workflow in text, workflow
