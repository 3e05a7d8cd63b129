"""Where attempts ran, in the dashboard: the Ray cluster's nodes with resources in use on the
Runs view, and each attempt's host and Ray node in the run's Attempts tab (data literal)."""

from __future__ import annotations

from sample_data import MARKUP, NOW_MS
from test_views import SIZE, open_run, screen_text, settle
from textual.widgets import Static, TabbedContent

from store.clock import ManualClock
from store.db.backends import open_database
from store.model.executor_records import ExecutorNodeRecord, NodeSighting
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.screens.cluster_render import cluster_text, resources_text
from tui.widgets.keyed_table import KeyedTable


def _node(**changes: object) -> ExecutorNodeRecord:
    base = ExecutorNodeRecord("n1", "ray", "vm", "10.0.0.1", True, {"CPU": 2.0, "claude": 4.0,
                              "memory": 8e9}, {"CPU": 1.5, "claude": 1.0}, 0, NOW_MS)
    return base._replace(**changes)  # type: ignore[arg-type]


def test_cluster_line_shows_use_of_each_resource_and_lost_nodes() -> None:
    assert cluster_text([], NOW_MS) is None
    assert resources_text(_node()) == "CPU 0.5/2 claude 3/4"
    assert resources_text(_node(available=None)) == "CPU ?/2 claude ?/4"
    lost = _node(node_id="n2", host=MARKUP, alive=False, available=None,
                 lost_at_ms=NOW_MS - 4_000)
    old = _node(node_id="n3", alive=False, lost_at_ms=NOW_MS - 3_600_000)
    text = cluster_text([_node(), lost, old], NOW_MS)
    assert text is not None
    assert "vm 10.0.0.1 CPU 0.5/2 claude 3/4" in text.plain
    assert "LOST 4.0s ago" in text.plain and "(+1 lost earlier)" in text.plain
    assert MARKUP[:20] in text.plain  # a host name is shown as stored, never as markup
    quiet = cluster_text([_node(updated_at_ms=NOW_MS - 120_000)], NOW_MS)
    assert quiet is not None and "no run is using it now" in quiet.plain


async def test_runs_view_and_attempts_tab_show_where_attempts_ran(
    make_app, sample_workspace: Workspace
) -> None:
    db = await open_database(sample_workspace, clock=ManualClock(NOW_MS - 2_000))
    try:
        store = RunStore(db)
        await store.place_attempt("run-review-1", "review-b", 0, 2, executor="ray",
                                  host="gpu-host-7", executor_node="5094f00f09d2aa")
        await store.record_executor_nodes("ray", [
            NodeSighting("5094f00f09d2aa", "gpu-host-7", "10.0.0.7", True,
                         {"CPU": 8.0, "claude": 2.0}, {"CPU": 7.0, "claude": 1.0}),
            NodeSighting("68fd3c87aa", "spot-2", "10.0.0.8", False, {"CPU": 4.0}),
        ])
    finally:
        await db.close()
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        line = app.screen.query_one("#cluster-line", Static)
        assert line.display
        shown = screen_text(app)
        assert "Ray cluster gpu-host-7 10.0.0.7 CPU 1/8 claude 1/2" in shown
        assert "spot-2 10.0.0.8 LOST" in shown
        detail = await open_run(pilot, app, "run-review-1")
        detail.query_one("#nodes-table").select_key("review-b#0")  # type: ignore[attr-defined]
        await pilot.pause(0.1)
        detail.query_one("#inspector", TabbedContent).active = "tab-attempts"
        await pilot.pause(0.2)
        attempts = detail.query_one("#attempts-table", KeyedTable)
        rows = {key: " ".join(c.plain for c in attempts.get_row(key)) for key in attempts.keys}
        assert "gpu-host-7 · ray node 5094f00f" in rows["2"]
        assert "(in-process)" not in rows["2"] and "–" in rows["1"]
