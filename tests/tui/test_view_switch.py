"""Switching views is cheap: a view built and read once is shown again as it is when nothing
it depends on changed (no commit, the same selection and filter), and read again as soon as
something did, so what it shows stays true."""

from __future__ import annotations

from typing import Any

from sample_data import NOW_MS

from store.clock import ManualClock
from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tests.tui_actions.pilot_support import until
from tui.app import TetherApp
from tui.screens.live_screen import LiveScreen
from tui.screens.tokens_view import TokensScreen
from tui.tailing import Batch
from tui.widgets.keyed_table import KeyedTable

SIZE = (140, 42)


def count_full_reads(app: TetherApp) -> dict[str, int]:
    """Count each view's full reads (first_read batches), by mode."""
    counts: dict[str, int] = {}
    original = TetherApp._apply

    async def counting(self: TetherApp, screen: LiveScreen, batch: Batch) -> None:
        if batch.first_read:
            counts[screen.MODE] = counts.get(screen.MODE, 0) + 1
        await original(self, screen, batch)

    app._apply = counting.__get__(app)  # type: ignore[method-assign]
    return counts


async def show(pilot: Any, app: TetherApp, key: str, mode: str) -> None:
    await pilot.press(key)
    await until(pilot, lambda: app.current_mode == mode and isinstance(app.screen, LiveScreen)
                and app.screen.read_with is not None, f"the {mode} view read")
    await pilot.pause()


async def test_a_view_shown_again_is_read_again_only_when_something_changed(
    make_app: Any, sample_workspace: Workspace
) -> None:
    app = make_app(poll_interval=3600)
    counts = count_full_reads(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: counts.get("runs", 0) >= 1, "the first listing")
        await show(pilot, app, "2", "tokens")
        read = counts["tokens"]
        await show(pilot, app, "1", "runs")
        await show(pilot, app, "2", "tokens")
        assert counts["tokens"] == read  # nothing changed: shown as it was

        # Another process commits a run: the Runs view (on screen) is told, the Tokens view
        # (hidden) reads everything again when it is shown.
        await show(pilot, app, "1", "runs")
        db = await open_database(sample_workspace, clock=ManualClock(NOW_MS))
        try:
            await RunStore(db).create_run("code-review", run_id="run-after-switch",
                                          status="finished")
        finally:
            await db.close()
        table = app.screen.query_one("#runs-table", KeyedTable)
        await app.poll_once()
        await until(pilot, lambda: "run-after-switch" in table.keys, "the new run listed")
        await show(pilot, app, "2", "tokens")
        assert counts["tokens"] == read + 1

        # The selection moves (the Tokens view follows the selected run): read again.
        await show(pilot, app, "1", "runs")
        assert table.select_key("run-review-1")
        await pilot.pause()
        app.token_scope = "run"
        await show(pilot, app, "2", "tokens")
        assert counts["tokens"] == read + 2
        assert isinstance(app.screen, TokensScreen)
        assert "run-review-1" in str(app.screen.crumb())
