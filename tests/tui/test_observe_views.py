"""Pilot tests for the views that show what happened (issue 24): a run's Timeline tab, ``/``
over every run with the query language and saved filters, full-text highlights with n/N,
two runs side by side, the Usage view and a run's cost drill-down."""

from __future__ import annotations

from rich.text import Text
from test_views import open_run, screen_text, settle
from textual.widgets import Input, TabbedContent

from engine.artifact_files import stream_log_path
from store.db.backends import open_database
from store.read.timeline import flatten
from store.runs.saved_filters import saved_filters
from tests.tui_actions.pilot_support import press_for, shown_keys, until
from tui.app import TetherApp
from tui.modals.filter_dialogs import SavedFiltersDialog, SaveFilterDialog
from tui.screens.compare_view import CompareScreen
from tui.screens.cost_view import CostScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.usage_view import UsageScreen
from tui.widgets.filter_bar import FilterBar
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.timeline_bars import TimelineBars

SIZE = (140, 42)


async def search(pilot, app: TetherApp, query: str) -> None:
    """Type ``query`` into ``/`` and apply it."""
    await pilot.press("slash")
    bar = app.screen.query_one(FilterBar)
    await until(pilot, lambda: bar.has_focus, "the filter bar")
    bar.value = query
    await pilot.press("enter")
    await settle(pilot, app)


def runs_keys(app: TetherApp) -> set[str]:
    return set(app.screen.query_one("#runs-table", KeyedTable).keys)


def highlighted(text: Text) -> set[str]:
    """The words a Text marks with the search highlight."""
    return {text.plain[s.start:s.end].lower() for s in text.spans
            if "reverse" in str(s.style) or "on " in str(s.style)}


async def open_timeline(pilot, app: TetherApp, run_id: str) -> tuple[RunDetailScreen,
                                                                      TimelineBars]:
    """Open ``run_id`` and its Timeline tab, once its rows are read."""
    await settle(pilot, app)
    detail = await open_run(pilot, app, run_id)
    await pilot.press("T")
    bars = detail.query_one(TimelineBars)
    await until(pilot, lambda: bars.rows, "the timeline's rows")
    return detail, bars


async def test_timeline_tab_shows_nodes_attempts_critical_path_zoom_and_opens_attempts(
        make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        detail, bars = await open_timeline(pilot, app, "run-review-1")
        assert detail.query_one("#run-views", TabbedContent).active == "tab-timeline"
        nodes = [r.key for r in bars.rows if r.kind == "node"]
        assert nodes == ["plan#0", "review-a#0", "review-b#0", "summarize#0"]
        text = screen_text(app)
        assert "4 node iterations" in text and "critical path" in text
        # review-a finished last (review-b's retry ended before it): plan then review-a.
        assert "critical path: plan#0 → review-a#0" in text
        assert "retry wait" in text and "carried over" in text  # the legend
        assert [r.critical for r in bars.rows if r.kind == "node"] == [True, True, False, False]

        # Expand the retried node: its two attempts and their calls nest under it.
        bars.cursor = nodes.index("review-b#0") + 1  # the run's own row is first
        await pilot.press("right")
        await until(pilot, lambda: any(r.kind == "attempt" for r in bars.rows), "attempts")
        attempts = [r for r in bars.rows if r.kind == "attempt"]
        assert [r.attempt for r in attempts] == [1, 2]
        assert sum(1 for r in bars.rows if r.kind == "call") == 2
        # Folding and expanding again splice the node's rows in place: the same rows as the
        # whole timeline flattened afresh, the cursor left on the node.
        assert bars.timeline is not None
        spliced = list(bars.rows)
        assert spliced == flatten(bars.timeline, bars.expanded)
        await pilot.press("left")
        assert not any(r.kind == "attempt" for r in bars.rows)
        assert bars.rows == flatten(bars.timeline, set()) and bars.current.key == "review-b#0"
        await pilot.press("right")
        assert bars.rows == spliced and bars.current.key == "review-b#0"

        # enter on the second attempt opens it in the inspector's Attempts tab.
        bars.cursor = bars.rows.index(attempts[1])
        await pilot.press("enter")
        inspector = detail.query_one("#inspector", TabbedContent)
        await until(pilot, lambda: inspector.active == "tab-attempts", "the Attempts tab")
        await until(pilot, lambda: "retry" in screen_text(app), "the second attempt")

        # Zoom in, pan, and fit back.
        assert bars.ms_per_cell is None
        await pilot.press("plus")
        zoomed = bars.ms_per_cell
        assert zoomed is not None and zoomed < bars.scale * 4
        await pilot.press("plus")
        assert bars.ms_per_cell is not None and bars.ms_per_cell < zoomed
        await pilot.press("full_stop")
        assert bars.offset_ms > 0
        await pilot.press("0")
        assert (bars.ms_per_cell, bars.offset_ms) == (None, 0)
        # T again: back to the graph.
        await pilot.press("T")
        assert detail.query_one("#run-views", TabbedContent).active == "tab-graph"


async def test_slash_searches_every_run_and_refuses_a_bad_query_with_its_sentence(
        make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await search(pilot, app, "workflow = code-review")
        assert runs_keys(app) == {"run-review-1", "run-stale-1"}
        assert "2 match" in screen_text(app)
        await search(pilot, app, "status = finished OR generation >= 2")
        assert runs_keys(app) == {"run-review-1", "run-long-g2"}

        # A query that does not parse: one sentence, and the filter in effect stays.
        await search(pilot, app, "cost > lots")
        assert runs_keys(app) == {"run-review-1", "run-long-g2"}
        notes = [str(n.message) for n in app._notifications]
        assert any("cost" in n and n.endswith(".") for n in notes), notes
        await pilot.press("escape")

        # An input field and the error text.
        await search(pilot, app, "input.repo = demo")
        assert runs_keys(app) == {"run-review-1"}
        await search(pilot, app, 'error ~ "not JSON"')
        assert runs_keys(app) == {"run-review-1"}


async def test_saved_filters_persist_in_the_workspace_and_apply_from_F(
        make_app, sample_workspace) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await search(pilot, app, "workflow = context-handoff")
        assert runs_keys(app) == {"run-long-g0", "run-long-g1", "run-long-g2"}
        dialog = await press_for(pilot, app, "S", SaveFilterDialog)
        dialog.query_one(Input).value = "chains"
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, SaveFilterDialog), "saved")
        await settle(pilot, app)

        await search(pilot, app, "")  # clear: every run again
        assert len(runs_keys(app)) == 6
        await press_for(pilot, app, "F", SavedFiltersDialog)
        assert "chains" in screen_text(app) and "context-handoff" in screen_text(app)
        await pilot.press("enter")
        await until(pilot, lambda: len(runs_keys(app)) == 3, "the saved filter applied")
        assert runs_keys(app) == {"run-long-g0", "run-long-g1", "run-long-g2"}

    db = await open_database(sample_workspace, create=False, read_only=True)
    try:
        assert [(f.name, f.query) for f in await saved_filters(db)] == [
            ("chains", "workflow = context-handoff")]
    finally:
        await db.close()


async def test_full_text_search_highlights_the_words_in_the_inspector(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await search(pilot, app, "text ~ retry")
        assert runs_keys(app) == {"run-review-1"}
        assert "text searched" in screen_text(app)
        detail = await open_run(pilot, app, "run-review-1")
        assert detail.terms == ("retry",)
        await pilot.press("g")
        detail.query_one("#nodes-table", KeyedTable).select_key("review-b#0")
        await settle(pilot, app)
        inspector = detail.query_one("#inspector", TabbedContent)
        inspector.active = "tab-prompt"
        await until(pilot, lambda: "retry" in highlighted(detail.shown_texts.get(
            "tab-prompt", Text())), "the prompt with the word marked")
        assert "n" in shown_keys(app) and "N" in shown_keys(app)
        await pilot.press("n")
        at = detail._at_line["tab-prompt"]
        assert "retry" in detail.shown_texts["tab-prompt"].plain.splitlines()[at]


async def test_slash_on_the_log_tab_searches_the_log_and_n_N_walk_the_matches(
        make_app, sample_workspace) -> None:
    log = stream_log_path(sample_workspace.artifacts_dir, "run-review-1", "review-b", 0, 2)
    log.write_text("starting review-b\nlint done\nrunning tests\ntests done\nbye\n",
                   encoding="utf-8")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        detail = await open_run(pilot, app, "run-review-1")
        assert "n" not in shown_keys(app)  # nothing highlighted yet
        await pilot.press("g")
        detail.query_one("#nodes-table", KeyedTable).select_key("review-b#0")
        await settle(pilot, app)
        detail.query_one("#inspector", TabbedContent).active = "tab-log"
        await until(pilot, lambda: "starting review-b" in screen_text(app), "the log")
        await pilot.press("slash")
        bar = detail.query_one(FilterBar)
        await until(pilot, lambda: bar.has_focus, "the log search")
        bar.value = "done"
        await pilot.press("enter")
        await settle(pilot, app)
        assert detail.terms == ("done",)
        assert detail._at_line.get("tab-log") == 1  # the first line holding the word
        await pilot.press("n")
        assert detail._at_line["tab-log"] == 3
        await pilot.press("n")  # wraps to the first
        assert detail._at_line["tab-log"] == 1
        await pilot.press("N")
        assert detail._at_line["tab-log"] == 3
        # The node table was not filtered by the log search.
        assert len(detail.query_one("#nodes-table", KeyedTable).keys) == 4


async def test_m_and_equals_compare_two_runs_per_node_with_word_diffs(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        table.select_key("run-review-1")
        await pilot.press("m")
        table.select_key("run-stale-1")
        compare = await press_for(pilot, app, "equals_sign", CompareScreen)
        await until(pilot, lambda: compare.comparison is not None, "the comparison")
        assert (compare.run_a, compare.run_b) == ("run-review-1", "run-stale-1")
        keys = set(compare.query_one("#compare-table", KeyedTable).keys)
        assert {"plan#0", "review-a#0", "review-b#0", "summarize#0"} <= keys
        text = screen_text(app)
        assert "node iterations differ" in text and "run-stale-1" in text
        # The prompt diff of the first node: A's words struck out (B never sent one).
        await until(pilot, lambda: "Plan the review" in screen_text(app), "the prompt diff")
        await pilot.press("s")
        await until(pilot, lambda: compare.run_a == "run-stale-1", "swapped")
        await pilot.press("d")
        await settle(pilot, app)
        assert compare.only_differing
        assert set(compare.query_one("#compare-table", KeyedTable).keys) <= keys
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CompareScreen), "back")

        # = on a later generation without a mark compares it with the run it continues.
        app.screen.query_one("#runs-table", KeyedTable).select_key("run-long-g1")
        await pilot.press("m")  # unmark-free: mark g1 then compare with g1 itself is refused
        await pilot.press("m")
        compare = await press_for(pilot, app, "equals_sign", CompareScreen)
        assert (compare.run_a, compare.run_b) == ("run-long-g0", "run-long-g1")
        await until(pilot, lambda: "generation" in screen_text(app), "the relation")


async def test_usage_view_charts_cost_per_day_and_hour_groups_and_draws_the_budget(
        make_app, sample_workspace) -> None:
    sample_workspace.config_path.write_text("[budget]\nday_usd = 2.5\n",
                                            encoding="utf-8")
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await until(pilot, lambda: isinstance(app.screen, UsageScreen), "the Usage view")
        usage = app.screen
        assert isinstance(usage, UsageScreen)
        await settle(pilot, app)
        text = screen_text(app)
        assert "cache" in text.lower() and "sim-1" in text
        assert "daily budget $2.50" in text
        await until(pilot, lambda: "budget $2.50" in screen_text(app), "the budget line")
        group = usage.query_one("#usage-groups", KeyedTable)
        assert usage.group == "model" and "sim-1" in group.keys
        await pilot.press("b")
        await until(pilot, lambda: "code-review" in group.keys, "by workflow")
        await pilot.press("b")
        await until(pilot, lambda: "simulated" in group.keys, "by agent")
        assert (usage.by, usage.days) == ("day", 7)
        await pilot.press("h")
        await settle(pilot, app)
        assert usage.by == "hour" and "per hour" in screen_text(app)
        assert len(usage.series) == 7 * 24 + 1 or len(usage.series) >= 7 * 24
        await pilot.press("w")
        await settle(pilot, app)
        assert usage.days == 30


async def test_dollar_explains_a_runs_cost_and_enter_opens_the_node(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")
        cost = await press_for(pilot, app, "dollar_sign", CostScreen)
        await until(pilot, lambda: cost.found is not None, "the breakdown")
        nodes = cost.query_one("#cost-nodes", KeyedTable)
        assert nodes.keys[0] == "review-b#0"  # the retried node used the most tokens
        text = screen_text(app)
        assert "retried" in text.lower() or "attempt" in text.lower()
        assert "Costliest calls" in text and "review-b#0 / 2" in text
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run view")
        detail = app.screen
        await settle(pilot, app)
        assert detail.query_one("#nodes-table", KeyedTable).cursor_key == "review-b#0"


async def test_usage_view_says_why_the_cost_chart_is_empty(
        tmp_path, monkeypatch) -> None:
    """A workspace whose every call cost $0 (the simulated agent) gets a sentence in the cost
    chart's title rather than an empty chart that looks broken."""
    from engine.run.wiring import open_engine
    from engine.workflow.loader import load_workflow
    from store.clock import ManualClock
    from store.workspace.layout import Workspace
    from tests.tui.sample_data import NOW_MS
    from tui.run_control import EXAMPLES_DIR

    monkeypatch.setenv("TETHER_SIM_LATENCY_MS", "1")
    workspace = Workspace(tmp_path / ".tether")
    async with await open_database(workspace, clock=ManualClock(NOW_MS)) as db:
        outcome = await open_engine(db).start(load_workflow(EXAMPLES_DIR / "code_review.py"),
                                             {"change": "rename the cache flag"})
    assert outcome.status == "finished"
    app = TetherApp(workspace, clock=ManualClock(NOW_MS), watch=False, poll_interval=0.05)
    app.animation_level = "none"
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await until(pilot, lambda: isinstance(app.screen, UsageScreen), "the Usage view")
        await until(pilot, lambda: "nothing spent in this window" in screen_text(app),
                    "the cost chart to say why it is empty")
        assert "sim-1" in screen_text(app)


async def test_a_run_of_one_node_counts_it_in_the_singular(make_app) -> None:
    # Seen in tmux: the demo's code-review run (one node) said "1 node iterations".
    from store.runs.run_store import RunStore

    app = make_app()
    async with await open_database(app.workspace) as db:
        store = RunStore(db)
        await store.create_run("code-review", run_id="run-one", nodes_total=1)
        await store.upsert_node("run-one", "review", 0, "running")
    async with app.run_test(size=SIZE) as pilot:
        await open_timeline(pilot, app, "run-one")
        await until(pilot, lambda: "1 node iteration ·" in screen_text(app), "the summary")
