"""The Tokens view's tables show every column when their panels have room for them (200
columns), and leave out optional ones, never cutting a heading, when they have not (160)."""

from __future__ import annotations

import pytest
from test_views import settle

from tui.screens.tokens_view import USAGE_COLUMNS, usage_panel_width
from tui.widgets.keyed_table import KeyedTable


def headings(table: KeyedTable) -> list[str]:
    return [column.label.plain for column in table.ordered_columns]


def header_line(table: KeyedTable) -> str:
    """The table's heading row as the terminal shows it."""
    return "".join(segment.text for segment in table.render_line(0))


async def tokens_tables(make_app, width: int) -> dict[str, tuple[list[str], str, bool]]:  # type: ignore[no-untyped-def]
    """Each table's headings, its heading row as drawn, and whether it fits its panel."""
    app = make_app()
    async with app.run_test(size=(width, 50)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await settle(pilot, app)
        await pilot.pause(0.2)
        shown = {}
        for table_id in ("#usage-table", "#top-calls"):
            table = app.screen.query_one(table_id, KeyedTable)
            drawn = sum(column.get_render_width(table) for column in table.ordered_columns)
            shown[table_id] = (headings(table), header_line(table),
                               drawn <= table.scrollable_content_region.width)
        return shown


async def test_at_200_columns_the_usage_table_shows_every_column(make_app) -> None:
    # Seen in the 200x50 layout snapshot: Reasoning left out with blank cells after Output.
    # The table needed 119 cells of the 118 its panel had (3/5 of the width), one short.
    tables = await tokens_tables(make_app, 200)
    labels, drawn, fits = tables["#usage-table"]
    assert labels == ["Run (newest)", *(label for _key, label in USAGE_COLUMNS[1:])]
    assert fits and all(label in drawn for label in labels)
    labels, drawn, fits = tables["#top-calls"]
    assert fits and all(label in drawn for label in labels)
    assert "Agent" in labels  # only the cached share gives way in the largest calls


@pytest.mark.parametrize("width", [160, 200])
async def test_the_narrow_rule_keeps_the_tables_in_their_panels_with_whole_headings(
    make_app, width: int
) -> None:
    tables = await tokens_tables(make_app, width)
    for table_id, (labels, drawn, fits) in tables.items():
        assert fits, f"{table_id} is wider than its panel at {width} columns"
        assert all(label in drawn for label in labels), (table_id, drawn)
    if width == 160:  # no room for them all: the optional columns give way, in their order
        assert "Reasoning" not in tables["#usage-table"][0]


def test_the_usage_table_is_given_the_width_its_columns_need() -> None:
    # Both whole: the 3:5 share, moved only as far as either table needs.
    assert usage_panel_width(200, 118, 80, 58) == 120
    assert usage_panel_width(200, 121, 79, 58) == 121
    # Not both: the usage table whole, the largest calls with what never gives way ...
    assert usage_panel_width(200, 121, 83, 58) == 121
    # ... and when even that does not fit, the stylesheet's 3:2.
    assert usage_panel_width(160, 118, 80, 58) is None
