"""Tables keep their rendered rows across view switches, still follow a change of look, leave
out their optional columns on a narrow terminal, and widen a column for a cell grown wider.

Textual re-applies every style when a view is shown, and a DataTable then drops every cell it
rendered; ``KeyedTable`` keeps them when nothing its cells depend on changed (most of a view
switch was drawing the same cells again). These tests hold both sides: nothing is drawn again
on a switch back, and a theme change is drawn in the new colours at once.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from rich.text import Text
from test_views import settle
from textual.app import App, ComposeResult
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from store.db.backends import open_database
from store.memory.memory_store import MemoryStore
from tui.widgets.keyed_table import KeyedTable

SIZE = (140, 40)


@pytest.fixture
def rendered_cells(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many cells each table (by id) rendered since the counter was last cleared."""
    counts: Counter[str] = Counter()
    render_cell = DataTable._render_cell

    def counting(self: DataTable, *args: object, **kwargs: object) -> object:
        counts[str(self.id)] += 1
        return render_cell(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(DataTable, "_render_cell", counting)
    return counts


async def test_a_view_shown_again_draws_none_of_its_cells_again(make_app, rendered_cells):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        await settle(pilot, app)
        assert rendered_cells["facts-table"] > 0 and rendered_cells["notes-table"] > 0
        await pilot.press("1")
        await settle(pilot, app)
        rendered_cells.clear()
        await pilot.press("3")
        await settle(pilot, app)
        await pilot.pause(0.1)
        assert app.current_mode == "memory"
        assert rendered_cells["facts-table"] == 0 and rendered_cells["notes-table"] == 0


def _drawn(table: KeyedTable) -> list[list[tuple[str, str]]]:
    """The table's first lines as drawn now: each segment's text and style (the header, the
    cursor row and plain rows, so every component style is in it)."""
    return [[(segment.text, str(segment.style)) for segment in table.render_line(y)]
            for y in range(min(6, table.size.height))]


async def _drawn_after(make_app, themes: list[str]) -> list[list[tuple[str, str]]]:  # type: ignore[no-untyped-def]
    app = make_app()
    app.theme = themes[0]  # the theme it starts in
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        for theme in themes[1:]:
            app.theme = theme
            await settle(pilot, app)
        await pilot.pause(0.1)
        return _drawn(app.screen.query_one("#runs-table", KeyedTable))


async def test_a_theme_change_draws_the_tables_as_a_fresh_start_in_it_would(make_app):
    changed = await _drawn_after(make_app, ["textual-dark", "textual-light"])
    fresh = await _drawn_after(make_app, ["textual-light"])
    assert changed == fresh
    assert changed != await _drawn_after(make_app, ["textual-dark"])


async def test_a_narrow_terminal_leaves_out_optional_columns_and_keeps_the_cursor(make_app):
    app = make_app()
    async with app.run_test(size=(150, 40)) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        table.select_key("run-incident-1")

        def labels() -> list[str]:
            return [str(column.label) for column in table.columns.values()]

        every = ["Status", "Run", "Workflow", "Gen", "Elapsed", "Nodes", "Tokens", "Cost",
                 "Cached", "Heartbeat"]
        assert labels() == every
        await pilot.resize_terminal(80, 24)
        await settle(pilot, app)
        await pilot.pause(0.1)
        assert labels() == ["Status", "Run", "Workflow", "Nodes", "Tokens", "Cost"]
        assert table.cursor_key == "run-incident-1"
        # What is left fits: whole workflow names, no sideways scrolling.
        assert table.virtual_size.width <= table.scrollable_content_region.width
        assert table.columns[ColumnKey("workflow")].width >= len("incident-runbook")
        await pilot.resize_terminal(150, 40)
        await settle(pilot, app)
        await pilot.pause(0.1)
        assert labels() == every and table.cursor_key == "run-incident-1"


async def test_a_cell_grown_wider_than_its_column_widens_it():
    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield KeyedTable([("status", "S"), ("name", "Name")], stretch="name")

    app = One()
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync([("a", [Text("▶ running"), Text("first")])])
        await pilot.pause()
        table.update_row("a", [Text("✓ finished"), Text("first")])
        await pilot.pause()
        assert table.columns[ColumnKey("status")].get_render_width(table) >= len("✓ finished")
        assert "✓ finished" in "".join(segment.text for segment in table.render_line(1))
        table.sync([("a", [Text("✓ finished, a while ago"), Text("first")])])
        await pilot.pause()
        assert "✓ finished, a while ago" in "".join(s.text for s in table.render_line(1))


async def _note_columns(make_app, sizes: list[tuple[int, int]]) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The Memory view's notes columns (label: width drawn) after showing it at each size."""
    app = make_app()
    async with await open_database(app.workspace) as db:
        for body in ("Check the indexes and locks of every migration", "Pin the seed"):
            await MemoryStore(db).save_note("workflow:incident-runbook-for-ingest", body,
                                            author="agent:reviewer", status="pending")
    async with app.run_test(size=sizes[0]) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        await settle(pilot, app)
        for size in sizes[1:]:
            await pilot.resize_terminal(*size)
            await settle(pilot, app)
        await pilot.pause(0.1)
        table = app.screen.query_one("#notes-table", KeyedTable)
        return {str(c.label): c.get_render_width(table) for c in table.columns.values()}


async def test_columns_narrow_again_when_the_terminal_does(make_app):
    # Seen in tmux: the Memory view at 160 columns, then 80: the notes' namespaces were cut
    # to fit 80 columns but their column kept its 160-column width, so the note bodies were
    # cut to a few letters and the Age column went off the edge.
    shrunk = await _note_columns(make_app, [(160, 48), (80, 24)])
    assert shrunk == await _note_columns(make_app, [(80, 24)])
    assert await _note_columns(make_app, [(80, 24), (160, 48)]) == await _note_columns(
        make_app, [(160, 48)])


async def test_a_fact_value_is_not_cut_beside_empty_columns(make_app):
    # Seen in tmux at 160x48: the demo's {"line_length":100,"linter":"ruff"} showed as
    # {"line_length":100,"linte… while 20 cells of the row stood empty (the width left for
    # the value assumed the widest keys and writers).
    app = make_app()
    value = '{"line_length":100,"linter":"ruff","x":1}'
    async with await open_database(app.workspace) as db:
        await MemoryStore(db).set_fact("workflow:code-review", "style", json.loads(value))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        await settle(pilot, app)
        table = app.screen.query_one("#facts-table", KeyedTable)
        cells = [c.plain for key in table.keys for c in table.get_row(key)]
        assert value in cells
        assert table.virtual_size.width <= table.scrollable_content_region.width
