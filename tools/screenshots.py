"""Regenerate the screenshots the README and docs/ show, from a live demo workspace.

    python -m tools.screenshots            # writes screenshots/*.svg (and *.png with rsvg-convert)

It creates a fresh demo workspace in a temporary folder, runs the demo workflows in the
embedded engine (faster than the interactive demo), and saves an SVG of each view while the
runs are moving: Runs (with the selected run's chart), a run's workflow graph, a run's
inspector on a node with a recalled memory block, the fork dialog (b) on that node, the fork
chain (o) of a fork of a fork of that run, the run replayed (r) part-way, its Timeline tab,
Tokens, Memory (on a pending proposal), the note review screen, Handoffs, Usage, Runs searched
with the query language, two runs compared, a run's cost explained. Then it serves the same
workspace with ``tether serve`` and saves ``browser.png``, ``browser_timeline.png``,
``browser_usage.png``, ``browser_search.png`` and ``browser_compare.png``: the dashboard in
headless Chromium (skipped, with a message, when Chromium or playwright is not installed). """

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import TabbedContent

from store.workspace.layout import Workspace
from tui import demo
from tui.app import TetherApp
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs_view import RunsScreen
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.run_chart import RunChart

SIZE = (160, 46)


async def _until(
    pilot: Pilot[None], check: Callable[[], Awaitable[bool]], timeout_s: float
) -> bool:
    for _ in range(int(timeout_s / 0.2)):
        if await check():
            return True
        await pilot.pause(0.2)
    return False


def _chart_follows(app: TetherApp) -> Callable[[], Awaitable[bool]]:
    """Whether the Runs view's chart shows the run under the cursor."""

    async def check() -> bool:
        screen = app.screen
        if not isinstance(screen, RunsScreen):
            return False
        chart = screen.query_one(RunChart)
        return chart.drawn_run_id is not None and chart.drawn_run_id == screen.selected_run_id

    return check


async def capture(workspace: Workspace, out: Path) -> list[Path]:
    """Run the demo under the app and save one SVG per view into ``out``."""
    db = await demo.prepare_workspace(workspace)
    await db.close()
    app = TetherApp(workspace, background=[demo.live_demo])
    saved: list[Path] = []

    async def save(name: str) -> None:
        # The footer recomposes a beat after the keys change: never capture it half drawn.
        for _ in range(30):
            if app.screen.query("FooterKey"):
                break
            await pilot.pause(0.1)
        path = out / f"{name}.svg"
        svg = app.export_screenshot(title=f"tether — {name}")
        # Rich writes each styled run as its own <text>; without xml:space="preserve" renderers
        # such as rsvg drop a run's leading spaces ("incident-runbookgen 0").
        svg = svg.replace("<svg ", '<svg xml:space="preserve" ', 1)
        path.write_text(svg, encoding="utf-8")
        saved.append(path)

    async with app.run_test(size=SIZE) as pilot:
        app.theme = "textual-dark"

        async def runs_moving() -> bool:
            reader = app.reader
            return reader is not None and len(await reader.recent_runs(10)) >= 3

        await _until(pilot, runs_moving, 30)
        await pilot.pause(3.0)
        # The cursor follows the newest run, which has just started: show the one before it.
        await pilot.press("down")
        await _until(pilot, _chart_follows(app), 5)  # the chart follows within a second
        await save("runs")

        async def has_block() -> bool:
            reader = app.reader
            return reader is not None and await reader.latest_memory_block_node() is not None

        fan_out = next((run for run in app.known_runs.values()
                        if run.workflow == "fanout-review"), None)
        if fan_out is not None:
            app.open_run(fan_out.run_id)
            await _until(pilot, _detail_ready(app), 10)
            await pilot.pause(2.0)
            await save("run_graph")
            await _timeline(app, pilot)
            await save("run_timeline")
            await pilot.press("escape")
            await pilot.pause(0.5)

        await _until(pilot, has_block, 30)
        reader = app.reader
        found = await reader.latest_memory_block_node() if reader else None
        if found is not None:
            run_id, node_key, iteration = found
            app.open_run(run_id)
            await pilot.pause(1.0)
            screen = app.screen
            if isinstance(screen, RunDetailScreen):
                screen.action_toggle_graph()  # the node table
                screen.query_one("#nodes-table", KeyedTable).select_key(f"{node_key}#{iteration}")
                await pilot.pause(0.5)
                screen.query_one("#inspector", TabbedContent).active = "tab-memory"
                await pilot.pause(0.5)
                await save("run_detail")
                await pilot.press("b")  # fork (branch) from the node: the dialog
                await pilot.pause(1.0)
                if type(app.screen).__name__ == "ForkDialog":
                    await save("fork")
                    await pilot.press("escape")
                    await pilot.pause(0.5)
                await _replay(app, pilot)
                await save("replay")
                await pilot.press("escape")
                await pilot.pause(0.5)
                app.select(run_id=run_id)
                await pilot.press("escape")
                await _fork_chain(app, pilot, run_id, node_key)
                await save("fork_chain")
                await pilot.press("escape")
        await pilot.pause(8.0)
        app.show_tokens("run")
        await pilot.pause(1.5)
        await save("tokens")
        await pilot.press("3")
        await pilot.pause(1.0)
        await _show_proposal(app, pilot)
        await save("memory")
        await pilot.press("enter")  # the review screen: the proposal beside what it supersedes
        await pilot.pause(1.0)
        await save("review")
        await pilot.press("escape")
        await pilot.pause(0.5)

        async def has_handoff() -> bool:
            reader = app.reader
            return reader is not None and bool(await reader.handoff_chains(limit=1))

        await _until(pilot, has_handoff, 40)
        await pilot.press("4")
        await pilot.pause(1.0)
        await save("handoffs")
        await pilot.press("5")
        await pilot.pause(2.5)  # the charts are redrawn at most once a second
        await save("usage")
        await pilot.press("1")
        await pilot.pause(1.0)
        await _search(app, pilot, "workflow = code-review OR status IN (failed, handed-off)")
        await save("runs_search")
        pair = _two_runs(app)
        if pair is not None:
            app.open_compare(*pair)
            await pilot.pause(1.5)
            await save("compare")
            await pilot.press("escape")
            await pilot.pause(0.5)
            app.open_cost(pair[0])
            await pilot.pause(1.5)
            await save("cost")
    return saved


async def _fork_chain(app: TetherApp, pilot: Pilot[None], run_id: str, node_id: str) -> None:
    """Fork ``run_id`` from ``node_id`` (an edited prompt), fork that fork from the same node
    (an edited memory block) once its node has run, and open the chain of the second."""
    from engine.fork import ForkEdit
    from tui.run_control import host_for

    host = host_for(app)
    first = await host.fork(run_id, node_id, ForkEdit(prompt="Answer in three bullet points."))
    store = await host.runs()

    async def ran() -> bool:
        return any(n.node_id == node_id and n.state == "finished"
                   for n in await store.list_nodes(first))

    await _until(pilot, ran, 30)
    second = await host.fork(first, node_id, ForkEdit(
        memory_block="Remember: the on-call team is new to this service."))
    await pilot.pause(1.5)
    app.open_fork_chain(second)
    await pilot.pause(1.5)


async def _timeline(app: TetherApp, pilot: Pilot[None]) -> None:
    """Open the run's Timeline tab and expand the first node that has attempts."""
    from tui.widgets.timeline_bars import TimelineBars

    await pilot.press("T")
    await pilot.pause(1.5)
    bars = app.screen.query_one(TimelineBars)
    for index, row in enumerate(bars.rows):
        if row.kind == "node" and row.expandable:
            bars.cursor = index
            await pilot.press("right")
            break
    await pilot.pause(1.0)


async def _replay(app: TetherApp, pilot: Pilot[None]) -> None:
    """Replay the run (``r``) with the cursor just before its last node end: the last node
    still running, its memory block and proposed note already there."""
    from tui.screens.replay_view import ReplayScreen

    await pilot.press("r")
    await pilot.pause(1.0)
    screen = app.screen
    if isinstance(screen, ReplayScreen):
        await _until(pilot, _replayed(screen), 10)
        await pilot.press("end", "left_curly_bracket", "left_square_bracket")
        blocks = screen.state.blocks if screen.state is not None else []
        recalled = [seen.summary for seen in blocks if seen.items]
        if recalled:  # the node under the cursor lists what its block recalled
            key = f"{recalled[-1].node_id}#{recalled[-1].iteration}"
            screen.query_one("#replay-nodes", KeyedTable).select_key(key)
        await pilot.pause(1.0)


def _replayed(screen: object) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return getattr(screen, "state", None) is not None

    return check


async def _search(app: TetherApp, pilot: Pilot[None], query: str) -> None:
    """Search every run with ``query`` (``/`` in Runs)."""
    from tui.widgets.filter_bar import FilterBar

    await pilot.press("slash")
    await pilot.pause(0.3)
    app.screen.query_one(FilterBar).value = query
    await pilot.press("enter")
    await pilot.pause(1.0)


def _two_runs(app: TetherApp) -> tuple[str, str] | None:
    """Two finished runs of the same workflow (the older first), to compare."""
    by_workflow: dict[str, list[str]] = {}
    for run in sorted(app.known_runs.values(), key=lambda r: r.created_at_ms):
        if run.status == "finished" and run.nodes_total:
            by_workflow.setdefault(run.workflow, []).append(run.run_id)
    pairs = [runs[-2:] for runs in by_workflow.values() if len(runs) >= 2]
    return (pairs[0][0], pairs[0][1]) if pairs else None


def _detail_ready(app: TetherApp) -> Callable[[], Awaitable[bool]]:
    async def ready() -> bool:
        screen = app.screen
        return isinstance(screen, RunDetailScreen) and bool(screen.nodes)

    return ready


async def browser_screenshot(workspace: Workspace, out: Path) -> Path | None:
    """``browser.png``: the dashboard served by ``tether serve`` in headless Chromium."""
    from tools.browser import Step, chromium_path, drive, served

    try:
        import playwright  # noqa: F401
    except ImportError:
        print("browser.png skipped: playwright is not installed (pip install '.[test]')")
        return None
    if chromium_path() is None:
        print("browser.png skipped: Chromium is not installed (apt-get install chromium)")
        return None
    path = out / "browser.png"
    async with served(workspace.root) as url:
        await drive(url, [Step(None, "runs shown"), Step("ArrowDown", "Selected run")], path,
                    viewport=(1800, 960))
        # The views of issue 24 in the browser: the timeline of the selected run, Usage.
        await drive(url, [Step(None, "runs shown"), Step("ArrowDown", "Selected run"),
                          Step("Enter", "Graph"), Step("T", "node iterations")],
                    out / "browser_timeline.png", viewport=(1800, 960))
        await drive(url, [Step(None, "runs shown"), Step("5", "cost per day")],
                    out / "browser_usage.png", viewport=(1800, 960))
        # Runs searched with the query language, then the two newest code reviews compared.
        search = [Step(None, "runs shown"), Step("/", "Filter"),
                  Step("Enter", "match", typed="workflow = code-review")]
        await drive(url, search, out / "browser_search.png", viewport=(1800, 960))
        await drive(url, [*search, Step("m", "marked"), Step("ArrowDown", "Selected run"),
                          Step("=", "node iterations differ")],
                    out / "browser_compare.png", viewport=(1800, 960))
    return path


async def _show_proposal(app: TetherApp, pilot: Pilot[None]) -> None:
    """Put the Memory view's cursor on the demo's pending proposal that supersedes two notes."""
    from tui.screens.memory_render import note_row_key
    from tui.screens.memory_view import MemoryScreen

    screen = app.screen
    if isinstance(screen, MemoryScreen):
        screen.notes_table.focus()
        screen.notes_table.select_key(note_row_key("demo-p1"))
        await pilot.pause(0.5)


def to_png(paths: list[Path]) -> list[Path]:
    """Convert SVGs to PNGs with rsvg-convert when it is installed (for looking at them)."""
    tool = shutil.which("rsvg-convert")
    if tool is None:
        return []
    pngs = []
    for path in paths:
        png = path.with_suffix(".png")
        subprocess.run([tool, str(path), "-o", str(png)], check=True)
        pngs.append(png)
    return pngs


def main() -> None:
    """Command-line entry: ``python -m tools.screenshots [--out DIR] [--png]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="screenshots", help="folder for the SVGs")
    parser.add_argument("--png", action="store_true", help="also write PNGs (rsvg-convert)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TETHER_SIM_LATENCY_MS", "300")
    demo.tune_agents(live=True)
    with tempfile.TemporaryDirectory(prefix="tether-shots-") as folder:
        workspace = Workspace(Path(folder) / "demo")
        saved = asyncio.run(capture(workspace, out))
        browser = asyncio.run(browser_screenshot(workspace, out))
    for path in saved + (to_png(saved) if args.png else []) + ([browser] if browser else []):
        print(path)


if __name__ == "__main__":
    main()
