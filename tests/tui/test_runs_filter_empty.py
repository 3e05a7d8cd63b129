"""A Runs filter that nothing matches: the crumb counts in words, the chart beside the list
lets go of the run it showed, and the keys that act on the selected run leave the footer.

Seen in tmux on the demo at 160x48: `/` with a query nothing matched showed "0 match", the
chart went on charting the run selected before, and `$ Why this cost`, `m`, `=` and `o`
stayed in the footer doing nothing (as on a workspace with no runs yet).
"""

from __future__ import annotations

from test_views import screen_text, settle

from tests.tui_actions.pilot_support import shown_keys, until
from tui.widgets.run_chart import RunChart

SELECTED_RUN_KEYS = {"dollar_sign", "m", "equals_sign", "o"}


async def test_a_filter_nothing_matches_leaves_no_run_selected(make_app):
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        chart = app.screen.query_one(RunChart)
        await until(pilot, lambda: chart.drawn_run_id is not None, "the selected run's chart")
        assert shown_keys(app) >= SELECTED_RUN_KEYS
        await pilot.press("slash", *"nosuchrun", "enter")
        await until(pilot, lambda: "0 matches" in screen_text(app), "the empty search")
        await until(pilot, lambda: chart.drawn_run_id is None, "the chart letting go")
        assert "Selected run — none" in screen_text(app)
        assert not SELECTED_RUN_KEYS & shown_keys(app)
        await pilot.press("slash", "ctrl+u", "enter")
        await until(pilot, lambda: chart.drawn_run_id is not None, "the chart again")
        assert shown_keys(app) >= SELECTED_RUN_KEYS


async def test_one_match_is_counted_in_the_singular(make_app):
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        await pilot.press("slash", *"run-stale-1", "enter")
        await until(pilot, lambda: "1 match " in screen_text(app), "one match")
