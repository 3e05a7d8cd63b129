"""Switching views is cheap: a view built and read once is shown again as it is when nothing
it depends on changed (no commit, the same selection and filter), and read again as soon as
something did, so what it shows stays true. A view built in the background is shown without
being styled or drawn again, and a table is drawn at its final column widths from its first
frame."""

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


async def test_a_view_built_in_the_background_is_shown_without_restyling_or_redrawing(
    make_app: Any, monkeypatch: Any
) -> None:
    """The views built after the first paint are styled and drawn then: showing one for the
    first time neither re-parses the CSS (Textual's refresh_css for a screen it did not
    style) nor draws its table cells again because of the Resize its layout sent."""
    from textual.css.stylesheet import Stylesheet
    from textual.widgets import DataTable

    reparsed: list[int] = []
    drawn: list[int] = []
    reparse, render_cell = Stylesheet.reparse, DataTable._render_cell

    def counting_reparse(self: Stylesheet) -> None:
        reparsed.append(1)
        reparse(self)

    def counting_render(self: DataTable[Any], *args: Any, **kwargs: Any) -> Any:
        drawn.append(1)
        return render_cell(self, *args, **kwargs)

    monkeypatch.setattr(Stylesheet, "reparse", counting_reparse)
    monkeypatch.setattr(DataTable, "_render_cell", counting_render)
    app = make_app(poll_interval=3600)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: set(app._screen_stacks) == set(app.MODES) and not [
            w for w in app.workers if w.group == "warm" and not w.is_finished],
            "every view built")
        await pilot.pause()
        handoffs = app._screen_stacks["handoffs"][0]
        table = handoffs.query_one("#handoffs-table", KeyedTable)
        drawn_before = table._update_count
        reparsed.clear()
        await show(pilot, app, "4", "handoffs")
        assert reparsed == []
        assert table._update_count == drawn_before  # the cells drawn off screen are kept
        assert drawn  # (the counter counts: the views did draw cells)


async def test_the_runs_list_is_drawn_at_its_final_widths_from_its_first_frame(
    make_app: Any, monkeypatch: Any
) -> None:
    """The main column is stretched when the layout sizes the table, before it is drawn: the
    first frame is not drawn with a narrow column and then every cell again."""
    widths: list[tuple[int, ...]] = []
    render_lines = KeyedTable.render_lines

    def recording(self: KeyedTable, crop: Any) -> Any:
        if self.id == "runs-table" and self.row_count:
            widths.append(tuple(c.get_render_width(self) for c in self.ordered_columns))
        return render_lines(self, crop)

    monkeypatch.setattr(KeyedTable, "render_lines", recording)
    app = make_app(poll_interval=3600)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(widths) >= 1, "the runs listed")
        await pilot.pause()
        table = app.screen.query_one("#runs-table", KeyedTable)
        final = tuple(c.get_render_width(table) for c in table.ordered_columns)
    assert widths and set(widths) == {final}
