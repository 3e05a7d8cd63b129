"""Pilot tests for the polish list of issue 24 (item 6), one point each."""

from __future__ import annotations

from test_views import screen_text, settle
from textual.widgets import Static

from tests.tui_actions.pilot_support import press_for, screen_lines, shown_keys, until
from tui.screens.help import DESCRIPTION_WIDTH, KEY_WIDTH, HelpScreen, hanging
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


async def test_at_80_columns_the_breadcrumb_stays_readable(make_app) -> None:
    # Seen in tmux at 80x24: the Tokens view's top line ended "│ scope:", its scope wrapped
    # out of the one-line header. The other views' tabs now keep only their keys there.
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, TokensScreen), "the Tokens view")
        await settle(pilot, app)
        top = screen_lines(app)[0]
        assert "scope: workspace" in top and " 2 Tokens " in top and "Runs" not in top, top
        await pilot.resize_terminal(160, 48)
        await settle(pilot, app)
        top = screen_lines(app)[0]
        assert " 1 Runs " in top and " 5 Usage " in top and "scope: workspace" in top, top


def _ends(header: str, row: str, label: str, value: str) -> tuple[int, int]:
    return header.index(label) + len(label), row.index(value) + len(value)


async def test_at_240_columns_numbers_sit_next_to_their_labels(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(240, 50)) as pilot:
        await settle(pilot, app)
        lines = screen_lines(app)
        header = next(line for line in lines if "Status" in line and "Tokens" in line)
        row = next(line for line in lines if "run-review-1" in line)
        # Each number ends under the end of its heading, however wide the terminal.
        for label, value in (("Elapsed", "3.3s"), ("Nodes", "4/4"), ("Tokens", "396.9k"),
                             ("Cached", "39%")):
            label_end, value_end = _ends(header, row, label, value)
            assert abs(label_end - value_end) <= 1, (label, header, row)
        # The run's table takes the room it needs, not the whole width: the tokens column
        # sits within the first half of a 240-column terminal.
        assert header.index("Tokens") < 120, header
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, TokensScreen), "the Tokens view")
        await settle(pilot, app)
        await until(pilot, lambda: any("fresh input" in line for line in screen_lines(app)),
                    "the token lanes")
        lines = screen_lines(app)
        lane = next(line for line in lines if "fresh input" in line)
        after = lane[lane.index("fresh input") + len("fresh input"):]
        assert after.lstrip().startswith("640.0k") and len(after) - len(after.lstrip()) <= 6
        header = next(line for line in lines if "Run (newest)" in line and "Total" in line)
        row = next(line for line in lines if "code-review run-review-1" in line)
        for label, value in (("Total", "396.9k"), ("Fresh in", "240.0k"),
                             ("Cache read", "152.0k")):
            label_end, value_end = _ends(header, row, label, value)
            assert abs(label_end - value_end) <= 1, (label, header, row)


def test_a_long_key_description_wraps_under_itself_not_under_the_key() -> None:
    description = ("Delete run — a finished, failed, cancelled, handed-off or stale run, "
                   "named in the confirmation before anything is deleted")
    first, *rest = hanging(description).split("\n")
    assert rest and description.startswith(first)
    for line in rest:
        assert line.startswith(" " * (KEY_WIDTH + 2)) and not line[KEY_WIDTH + 2].isspace()
    assert all(len(line.strip()) <= DESCRIPTION_WIDTH for line in [first, *rest])
    assert " ".join(part.strip() for part in [first, *rest]) == description
