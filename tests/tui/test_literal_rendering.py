"""Text from the database or artifacts is shown literally: markup and escapes do nothing."""

from __future__ import annotations

from sample_data import ANSI, MARKUP
from textual.widgets import TabbedContent

from tui.format import literal, one_line, visible
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.keyed_table import KeyedTable


def test_literal_keeps_markup_as_characters_and_makes_escapes_visible():
    text = literal(MARKUP + " " + ANSI)
    assert text.spans == []  # no style came from the data
    assert MARKUP in text.plain
    assert "\x1b" not in text.plain and "\x07" not in text.plain
    assert "␛[31mred" in text.plain
    assert visible("a\tb\x9bc") == "a    b\\x9bc"
    assert one_line("x\ny", width=0).plain == "x␊y"
    assert one_line("abcdef", width=4).plain == "abc…"


async def test_markup_and_escapes_in_prompt_output_log_and_memory_render_literally(make_app):
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause(0.2)
        table = app.screen.query_one("#runs-table", KeyedTable)
        table.select_key("run-review-1")
        await pilot.press("enter")
        for _ in range(50):
            await pilot.pause(0.02)
            if isinstance(app.screen, RunDetailScreen):
                break
        detail = app.screen
        assert isinstance(detail, RunDetailScreen)
        await pilot.pause(0.2)
        nodes = detail.query_one("#nodes-table", KeyedTable)
        seen: list[str] = []
        for node, tab in (
            ("plan#0", "tab-prompt"),
            ("plan#0", "tab-memory"),
            ("plan#0", "tab-output"),
            ("review-b#0", "tab-attempts"),
            ("review-b#0", "tab-log"),
        ):
            nodes.select_key(node)
            detail.query_one("#inspector", TabbedContent).active = tab
            await pilot.pause(0.4)
            svg = app.export_screenshot()
            seen.append(svg)
            # The characters are on screen (SVG escapes & < > and uses nbsp for spaces)...
            assert "[bold&#160;red]x[/]" in svg or "[bold red]x[/]" in svg, (node, tab)
            assert "[@click=app.quit]q[/]" in svg, (node, tab)
        assert "␛[31mred" in seen[-1]
        # ...and clicking the would-be link does nothing: the app is still running.
        await pilot.click(offset=(20, 20))
        await pilot.pause()
        assert app.is_running
        assert "\x1b" not in "".join(seen)
