"""Pilot tests: every view and key of the dashboard on the sample workspace."""

from __future__ import annotations

from collections.abc import Callable

from sample_data import MARKUP, NOW_MS
from textual.pilot import Pilot
from textual.widgets import Static, TabbedContent

from store.clock import ManualClock
from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tests.tui_actions.pilot_support import choose_in_palette, until
from tui.app import TetherApp
from tui.screens.handoffs_view import HandoffsScreen
from tui.screens.help import HelpScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs_view import RunsScreen
from tui.screens.tokens_view import USAGE_COLUMNS, TokensScreen
from tui.widgets.filter_bar import FilterBar
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.log_view import FollowLog
from tui.widgets.status import PauseBanner

SIZE = (140, 42)


async def settle(pilot: Pilot[None], app: TetherApp) -> None:
    """Let pending polls and refreshes finish."""
    await pilot.pause()
    await app.poll_once()
    await pilot.pause()


def screen_text(app: TetherApp) -> str:
    """Everything on screen as plain text (from the SVG export)."""
    import html
    import re

    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def open_run(pilot: Pilot[None], app: TetherApp, run_id: str) -> RunDetailScreen:
    table = app.screen.query_one("#runs-table", KeyedTable)
    assert table.select_key(run_id)
    await pilot.press("enter")
    for _ in range(50):
        await pilot.pause(0.02)
        if isinstance(app.screen, RunDetailScreen):
            break
    screen = app.screen
    assert isinstance(screen, RunDetailScreen)
    await settle(pilot, app)
    return screen


async def test_runs_view_lists_runs_with_status_progress_and_stale_badge(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert isinstance(app.screen, RunsScreen)
        table = app.screen.query_one("#runs-table", KeyedTable)
        assert set(table.keys) == {
            "run-review-1", "run-incident-1", "run-stale-1",
            "run-long-g0", "run-long-g1", "run-long-g2",
        }
        stale_row = " ".join(c.plain for c in table.get_row("run-stale-1"))
        healthy_row = " ".join(c.plain for c in table.get_row("run-incident-1"))
        assert "STALE" in stale_row and "41.0s ago" in stale_row
        assert "STALE" not in healthy_row
        finished = " ".join(c.plain for c in table.get_row("run-review-1"))
        assert "finished" in finished and "4/4" in finished and "396.9k" in finished
        assert "status" in screen_text(app).lower()


async def test_enter_opens_run_with_nodes_and_inspector_tabs(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        detail = await open_run(pilot, app, "run-review-1")
        nodes = detail.query_one("#nodes-table", KeyedTable)
        assert nodes.keys == ["plan#0", "review-a#0", "review-b#0", "summarize#0"]
        review_b = " ".join(c.plain for c in nodes.get_row("review-b#0"))
        assert "2" in review_b and "43%" in review_b  # second attempt, cached share
        assert "HIT" in " ".join(c.plain for c in nodes.get_row("summarize#0"))
        assert "cut" in " ".join(c.plain for c in nodes.get_row("plan#0"))
        assert "⚠" in " ".join(c.plain for c in nodes.get_row("review-a#0"))

        text = screen_text(app)
        assert "Plan the review." in text  # prompt as sent (first tab)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert detail.query_one("#inspector", TabbedContent).active == "tab-memory"
        text = screen_text(app)
        assert "2040 of 2048 bytes used" in text and "truncated" in text
        assert "note:n1" in text and "score 0.910" in text and "matched review, pytest" in text

        nodes.select_key("review-a#0")
        await settle(pilot, app)
        await pilot.pause(0.1)
        assert "recall timed out after 2000 ms" in screen_text(app)

        nodes.select_key("review-b#0")
        await pilot.pause(0.1)
        for tab in ("tab-attempts", "tab-calls", "tab-output", "tab-log"):
            detail.query_one("#inspector", TabbedContent).active = tab
            await pilot.pause(0.1)
            text = screen_text(app)
            if tab == "tab-attempts":
                assert "agent output was not JSON" in text
            if tab == "tab-calls":
                assert "140.0k" in text and "100k–200k" in text and "(simulated)" in text
            if tab == "tab-output":
                assert '"issues": 0' in text
        await pilot.pause(0.4)  # the log poller reads the artifact
        assert "starting review-b" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)


async def test_log_tab_follows_the_end_and_counts_new_lines_when_scrolled_up(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        detail = await open_run(pilot, app, "run-review-1")
        detail.query_one("#nodes-table", KeyedTable).select_key("review-b#0")
        detail.query_one("#inspector", TabbedContent).active = "tab-log"
        await pilot.pause(0.4)
        log = detail.query_one("#node-log", FollowLog)
        path = app.workspace.artifacts_dir / "run-review-1" / "review-b" / "2" / "stream.log"
        with path.open("a", encoding="utf-8") as handle:
            handle.writelines(f"line {i}\n" for i in range(200))
        await pilot.pause(0.4)
        assert log.following and log.pending == 0 and "line 199" in log.lines[-1]
        log.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        with path.open("a", encoding="utf-8") as handle:
            handle.writelines(f"more {i}\n" for i in range(7))
        await pilot.pause(0.4)
        assert log.pending == 7
        assert "7 new lines" in screen_text(app)
        await pilot.press("f")
        await pilot.pause(0.3)
        assert log.pending == 0


async def test_tokens_view_histogram_scopes_usage_and_largest_calls(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, TokensScreen)
        assert screen.scope() == ("workspace", None, None)
        top = screen.query_one("#top-calls", KeyedTable)
        first = " ".join(c.plain for c in top.get_row(top.keys[0]))
        assert "550.0k" in first and "500k–1M" in first
        assert [b.calls for b in screen._buckets] == [1, 1, 2, 0, 1, 0]
        text = screen_text(app)
        assert "fresh input" in text and "cache read" in text and "reasoning" in text
        usage = screen.query_one("#usage-table", KeyedTable)
        assert "calls" in [key for key, _ in USAGE_COLUMNS]

        def calls_column() -> int:  # among the columns the width leaves shown
            return [column.key.value for column in usage.ordered_columns].index("calls")

        # Each run's row counts its calls (once a dash for every run).
        run_calls = usage.get_row("run-review-1")[calls_column()].plain

        app.select(run_id="run-review-1", node_id="review-b")
        await pilot.press("s")
        await pilot.pause(0.2)
        assert screen.scope() == ("run", "run-review-1", None)
        assert usage.keys == ["plan#0", "review-a#0", "review-b#0"]
        node_calls = [int(usage.get_row(key)[calls_column()].plain) for key in usage.keys]
        assert run_calls == str(sum(node_calls)) and sum(node_calls) > 0
        await pilot.press("s")
        await pilot.pause(0.2)
        assert screen.scope() == ("node", "run-review-1", "review-b")
        assert [b.calls for b in screen._buckets] == [0, 0, 2, 0, 0, 0]
        await pilot.press("s")
        await pilot.pause(0.2)
        assert screen.scope()[0] == "workspace"


async def test_tokens_view_tables_fit_their_panels_instead_of_cutting_numbers(make_app):
    """At 160 columns the usage table and the largest calls drop their optional columns rather
    than cut the last one ("1." for 1.2k) or a run id ("r-")."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await pilot.pause(0.2)
        for table_id in ("#usage-table", "#top-calls"):
            table = app.screen.query_one(table_id, KeyedTable)
            await until(pilot, lambda t=table: bool(t.keys), f"rows in {table_id}")
            widths = sum(column.get_render_width(table) for column in table.ordered_columns)
            assert widths <= table.scrollable_content_region.width, table_id
        usage = app.screen.query_one("#usage-table", KeyedTable)
        assert usage.ordered_columns[0].label.plain == "Run (newest)"  # kept on a re-add
        top = app.screen.query_one("#top-calls", KeyedTable)
        where = [column.key.value for column in top.ordered_columns].index("where")
        assert "run-long-g0" in top.get_row(top.keys[0])[where].plain


async def test_handoffs_view_shows_the_chain_with_reasons_and_carried_state(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("4")
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, HandoffsScreen)
        text = screen_text(app)
        # The trigger, then the recorded reason once (not "ceiling breached: ceiling ...").
        assert "ceiling · token ceiling 500000 exceeded" in text
        assert "person · cleared from the dashboard" in text
        assert "run-long-g0" in text and "run-long-g2" in text
        assert MARKUP in text  # carried learnings, literally
        await pilot.press("enter")
        for _ in range(50):
            await pilot.pause(0.02)
            if isinstance(app.screen, RunDetailScreen):
                break
        assert isinstance(app.screen, RunDetailScreen)
        assert app.screen.run_id == "run-long-g1"


async def test_help_filter_pause_palette_and_quit_keys(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        # ? shows this view's help and keys; typing narrows the list.
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "STALE" in screen_text(app)
        await pilot.press("p", "a", "u")
        await pilot.pause()
        keys = str(app.screen.query_one("#help-keys", Static).render())
        assert "Pause" in keys and "Handoffs" not in keys
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)

        # / filters and remembers the last value.
        await pilot.press("slash")
        await pilot.press(*"stale", "enter")
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        assert table.keys == ["run-stale-1"]
        await pilot.press("slash")
        await pilot.pause()
        assert app.screen.query_one(FilterBar).value == "stale"
        await pilot.press("escape")
        await pilot.press("2")
        await pilot.pause(0.1)
        await pilot.press("1")
        await pilot.pause(0.2)
        await pilot.press("slash")
        await pilot.pause()
        bar = app.screen.query_one(FilterBar)
        assert bar.value == "stale"
        bar.value = ""
        await pilot.press("enter")
        await settle(pilot, app)
        assert len(table.keys) == 6

        # p pauses: a banner, data still collected, the list held still.
        await pilot.press("p")
        await pilot.pause()
        assert app.paused and app.screen.query_one(PauseBanner).has_class("-visible")
        db = await open_database(app.workspace, clock=ManualClock(app.now_ms()))
        try:
            await RunStore(db).create_run("code-review", run_id="run-while-paused")
        finally:
            await db.close()
        await app.poll_once()
        await pilot.pause()
        assert "run-while-paused" not in table.keys
        assert app.held_events >= 1 and "PAUSED" in screen_text(app)
        await pilot.press("p")
        await settle(pilot, app)
        assert "run-while-paused" in table.keys
        assert not app.screen.query_one(PauseBanner).has_class("-visible")

        # ctrl+p opens the command palette.
        await pilot.press("ctrl+p")
        await until(pilot, lambda: "CommandPalette" in type(app.screen).__name__, "the palette")
        await pilot.press("escape")
        await pilot.pause()

        await pilot.press("q")
        await pilot.pause()
    assert not app.is_running


async def test_cursor_stays_on_the_same_run_when_new_runs_arrive(
    make_app: Callable[..., TetherApp], sample_workspace: Workspace
):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        table.select_key("run-incident-1")
        before = table.keys.index("run-incident-1")
        clock = ManualClock(app.now_ms())
        db = await open_database(sample_workspace, clock=clock)
        try:
            for n in range(3):
                clock.advance(10)
                await RunStore(db).create_run("code-review", run_id=f"run-new-{n}")
        finally:
            await db.close()
        await settle(pilot, app)
        assert table.keys[:3] == ["run-new-2", "run-new-1", "run-new-0"]
        assert table.keys.index("run-incident-1") == before + 3
        assert table.cursor_key == "run-incident-1"


async def test_command_palette_jumps_to_a_run_by_workflow(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await choose_in_palette(pilot, app, "run-review", "run-review-1")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run's screen")
        assert isinstance(app.screen, RunDetailScreen)
        assert app.screen.run_id == "run-review-1"


async def test_a_run_turns_stale_as_time_passes_without_any_write(make_app):
    clock = ManualClock(NOW_MS)
    app = make_app(clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        assert "STALE" not in " ".join(c.plain for c in table.get_row("run-incident-1"))
        clock.advance(31_000)  # nobody beats the heartbeat any more
        await app._tick()
        # The row is redrawn after the tick's refresh; on a loaded machine that can be a few
        # frames later, so wait for it (bounded) rather than for one pause.
        for _ in range(400):
            await pilot.pause(0.02)
            row = " ".join(c.plain for c in table.get_row("run-incident-1"))
            if "STALE" in row:
                break
        assert "STALE" in row and "31.0s ago" in row


async def test_t_in_a_run_opens_the_tokens_of_the_selected_node(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        detail = await open_run(pilot, app, "run-review-1")
        detail.query_one("#nodes-table", KeyedTable).select_key("review-b#0")
        await pilot.pause()
        await pilot.press("t")
        for _ in range(50):
            await pilot.pause(0.05)
            if isinstance(app.screen, TokensScreen):
                break
        screen = app.screen
        assert isinstance(screen, TokensScreen)
        await pilot.pause(0.2)
        assert screen.scope() == ("node", "run-review-1", "review-b")
        assert [b.calls for b in screen._buckets] == [0, 0, 2, 0, 0, 0]
        await pilot.press("1")  # back to the Runs view: the run is still open there
        await pilot.pause(0.2)
        assert isinstance(app.screen, RunDetailScreen)
