"""Every view and dialog as an SVG snapshot at 80x24 and at 200x50 (fixed clock and theme).

One app per size walks through the views and opens each dialog the way a person does (keys),
and each screen is compared with ``snapshots/layout/<size>/<name>.svg``. After an intended
change: ``TETHER_UPDATE_SNAPSHOTS=1 python -m pytest tests/tui/test_layout_snapshots.py``,
then look at the new files (``rsvg-convert x.svg -o x.png``) before committing them.

Besides the pictures, the walk checks what a small terminal must never lose: the footer's
``q Quit``, and every dialog's buttons reachable (Tab scrolls the focused field into view).
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

import pytest
from sample_data import NOW_MS, build
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Button, Input, TextArea

from store.clock import ManualClock
from store.memory.memory_store import MemoryStore
from store.workspace.layout import Workspace
from tests.tui_actions.memory_seed import seed_memory
from tui.app import TetherApp
from tui.modals import ConfirmDialog, FactEditor, LaunchRunDialog, ReasonDialog
from tui.modals.confirm import DialogBox
from tui.modals.steer_dialog import SteerDialog
from tui.screens.compare_view import CompareScreen
from tui.screens.cost_view import CostScreen
from tui.screens.fork_chain_view import ForkChainScreen
from tui.screens.help import HelpScreen
from tui.screens.memory_render import fact_row_key, note_row_key
from tui.screens.memory_view import MemoryScreen
from tui.screens.note_review import NoteReviewScreen
from tui.screens.replay_view import ReplayScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.usage_view import UsageScreen
from tui.widgets.filter_bar import FilterBar
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.run_chart import RunChart
from tui.widgets.timeline_bars import TimelineBars

SNAPSHOTS = Path(__file__).with_name("snapshots") / "layout"
UPDATE = os.environ.get("TETHER_UPDATE_SNAPSHOTS") == "1"
SIZES = [(80, 24), (200, 50)]


def normalise(svg: str) -> str:
    """Drop the per-export ids Textual puts in class names and clip paths."""
    return re.sub(r"terminal-\d+", "terminal", svg)


def plain(svg: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def until(pilot: Pilot[None], condition: Any, what: str, tries: int = 300) -> None:
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def settled(pilot: Pilot[None], app: TetherApp, name: str) -> str:
    """A screenshot once two captures in a row agree (footers and plots redraw a beat late)."""
    for widget in app.screen.query(Input):
        widget.cursor_blink = False
    for area in app.screen.query(TextArea):
        area.cursor_blink = False
    # Background work first (views warmed off screen, navigation): on a busy machine two
    # captures 150 ms apart can agree while a repaint is still queued behind it.
    await until(pilot, lambda: not background_work(app), "background work to finish", 600)
    previous, agreeing = "", 0
    for _ in range(40):
        await pilot.pause(0.15)
        svg = normalise(app.export_screenshot(title=f"tether — {name}"))
        agreeing = agreeing + 1 if svg == previous else 0
        if agreeing == 2:  # three captures in a row agree
            return svg
        previous = svg
    return previous


def background_work(app: TetherApp) -> bool:
    """True while the app warms views or navigates in a worker."""
    return any(
        worker.group in ("warm", "navigate") and not worker.is_finished for worker in app.workers
    )


class Walk:
    """Takes and compares the snapshots of one size; mismatches are collected, not raised."""

    def __init__(self, pilot: Pilot[None], app: TetherApp, size: tuple[int, int]) -> None:
        self.pilot, self.app = pilot, app
        self.folder = SNAPSHOTS / f"{size[0]}x{size[1]}"
        self.differ: list[str] = []
        self.created: list[str] = []

    async def snap(self, name: str) -> str:
        svg = await settled(self.pilot, self.app, name)
        path = self.folder / f"{name}.svg"
        if UPDATE or not path.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_text(svg, encoding="utf-8")
            if not UPDATE:
                self.created.append(name)
        else:
            expected = path.read_text(encoding="utf-8")
            # Two agreeing captures can come before a worker's last read lands on a loaded
            # machine: settle again a few times before calling it a difference.
            for _ in range(4):
                if svg == expected:
                    break
                await self.pilot.pause(0.5)
                svg = await settled(self.pilot, self.app, name)
            if svg != expected:
                self.differ.append(name)
                path.with_suffix(".actual.svg").write_text(svg, encoding="utf-8")
        return plain(svg)

    async def press(self, *keys: str) -> None:
        for key in keys:
            await self.pilot.press(key)
            await self.pilot.pause(0.05)

    async def open(self, key: str, kind: type[Screen[Any]]) -> Any:
        await self.press(key)
        await until(self.pilot, lambda: isinstance(self.app.screen, kind), kind.__name__)
        return self.app.screen

    async def close(self, key: str = "escape") -> None:
        top = self.app.screen
        await self.press(key)
        await until(self.pilot, lambda: self.app.screen is not top, "the dialog to close")




async def tab_through(walk: Walk) -> None:
    """Tab through the dialog: each focused widget is inside the box's visible region."""
    screen = walk.app.screen
    box = screen.query_one(DialogBox)
    seen = set()
    for _ in range(12):
        await walk.press("tab")
        await walk.pilot.pause(0.1)
        focused = screen.focused
        if focused is None or focused in seen:
            break
        seen.add(focused)
        visible = box.content_region
        region = focused.region
        assert region.height > 0 and visible.contains_region(region.intersection(visible)) and (
            region.intersection(visible).area > 0
        ), f"Tab focused {focused!r} outside the visible part of the dialog"
    assert any(isinstance(w, Button) for w in seen), "Tab never reached a button"


@pytest.fixture
async def full_workspace(tmp_path: Path) -> Workspace:
    """The runs of sample_data plus the memory seed (facts, accepted and pending notes)."""
    workspace = Workspace(tmp_path / ".tether")
    clock = ManualClock()
    await build(workspace, clock)
    clock.set(NOW_MS - 120_000)
    async with await MemoryStore.open(workspace, clock=clock) as memory:
        await seed_memory(memory)
    return workspace


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_view_and_dialog_matches_its_snapshot(full_workspace, size) -> None:
    app = TetherApp(full_workspace, clock=ManualClock(NOW_MS), watch=False, poll_interval=60)
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        app.theme = "textual-dark"
        walk = Walk(pilot, app, size)
        await pilot.pause(0.2)
        await app.poll_once()

        # 1 Runs: the footer keeps q Quit even at 80 columns.
        app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")
        # Draw the selection now: otherwise the panel follows it at the next clock tick (1 s),
        # and whether a tick falls before the capture is up to the machine's load.
        await app.refresh_screen(app.screen)
        if app.screen.query_one("#runs-body").has_class("-wide"):
            # The chart beside the list follows the selection within a second.
            chart = app.screen.query_one(RunChart)
            await until(pilot, lambda: chart.drawn_run_id == "run-review-1", "the run's chart")
        text = await walk.snap("runs")
        assert "q Quit" in text

        # A run: the graph tab, then the node table with the memory inspector.
        detail = await walk.open("enter", RunDetailScreen)
        await until(pilot, lambda: detail.nodes, "the run's nodes")
        text = await walk.snap("run_graph")
        assert "review-b" in text and "q Quit" in text
        await walk.press("g")
        detail.query_one("#nodes-table", KeyedTable).select_key("plan#0")
        await walk.press("right_square_bracket")  # Prompt -> Memory
        await walk.snap("run_nodes_memory")
        # Replay, part-way: the cursor on review-a's end (review-b on its second attempt).
        replay = await walk.open("r", ReplayScreen)
        await until(pilot, lambda: replay.state is not None, "the replayed run")
        await walk.press("home", "right_curly_bracket", "right_curly_bracket")
        await until(pilot, lambda: "Block of plan#0" in str(
            replay.query_one("#replay-memory").render()), "plan's recalled items")
        text = await walk.snap("replay")
        assert "Replay " in text and "q Quit" in text
        await walk.close()
        # The Timeline tab with the retried node expanded (its attempts and calls).
        await walk.press("T")
        bars = detail.query_one(TimelineBars)
        await until(pilot, lambda: bars.rows, "the timeline")
        bars.cursor = next(i for i, r in enumerate(bars.rows) if r.key == "review-b#0")
        await walk.press("right")
        await until(pilot, lambda: any(r.kind == "call" for r in bars.rows), "its calls")
        text = await walk.snap("run_timeline")
        assert "review-b#0" in text and "q Quit" in text
        await walk.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RunDetailScreen), "the runs list")

        # / with the query language, then the two runs of code-review side by side.
        await walk.press("slash")
        app.screen.query_one(FilterBar).value = "workflow = code-review"
        await walk.press("enter")
        await until(pilot, lambda: len(app.screen.query_one("#runs-table", KeyedTable).keys)
                    == 2, "the search")
        text = await walk.snap("runs_search")
        assert "2 match" in text
        table = app.screen.query_one("#runs-table", KeyedTable)
        table.select_key("run-review-1")
        await walk.press("m")
        table.select_key("run-stale-1")
        compare = await walk.open("equals_sign", CompareScreen)
        await until(pilot, lambda: compare.comparison is not None, "the comparison")
        await until(pilot, lambda: compare._shown_pair == "plan#0", "the first diff")
        await walk.snap("compare")
        await walk.close()
        await walk.press("m", "slash")  # unmark; clear the search
        app.screen.query_one(FilterBar).value = ""
        await walk.press("enter")
        await until(pilot, lambda: len(app.screen.query_one("#runs-table", KeyedTable).keys)
                    == 6, "every run again")

        # $ on a run: where its money went.
        app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")
        cost = await walk.open("dollar_sign", CostScreen)
        await until(pilot, lambda: cost.found is not None, "the breakdown")
        text = await walk.snap("cost")
        assert "Nodes by cost" in text
        await walk.close()

        # o on a run: its fork chain (a run that is no fork: the chain is the run alone).
        chain = await walk.open("o", ForkChainScreen)
        await until(pilot, lambda: chain.chain is not None, "the fork chain")
        text = await walk.snap("fork_chain")
        assert "first run" in text
        await walk.close()

        # 2 Tokens (the histogram is redrawn at most once a second).
        await walk.press("2")
        await pilot.pause(1.2)
        text = await walk.snap("tokens")
        assert "Largest calls" in text

        # 3 Memory, a pending proposal, and its review screen.
        await walk.press("3")
        memory = app.screen
        assert isinstance(memory, MemoryScreen)
        await memory.refresh_data()
        memory.notes_table.focus()
        memory.notes_table.select_key(note_row_key("rule-lint"))
        await walk.snap("memory")
        await walk.open("enter", NoteReviewScreen)
        await until(pilot, lambda: app.screen.note is not None, "the note under review")
        await walk.snap("review")
        await walk.close()

        # Bulk review: mark both pending notes, then one confirmation for both.
        memory.notes_table.select_key(note_row_key("rule-lint"))
        await walk.press("space")
        memory.notes_table.select_key(note_row_key("lone"))
        await walk.press("space")
        await walk.snap("memory_marked")
        await walk.open("a", ReasonDialog)
        await walk.snap("dialog_bulk_accept")
        await tab_through(walk)
        await walk.close()

        # Reject one note, edit a fact, add a fact.
        await walk.press("asterisk")  # all marked -> unmark all
        memory.notes_table.select_key(note_row_key("lone"))
        await walk.open("r", ReasonDialog)
        await walk.snap("dialog_reject_note")
        await walk.close()
        memory.facts_table.focus()
        memory.facts_table.select_key(fact_row_key("workflow:code-review", "limits"))
        await walk.open("e", FactEditor)
        await walk.snap("dialog_edit_fact")
        await tab_through(walk)
        await walk.close()
        await walk.open("n", FactEditor)
        await walk.snap("dialog_new_fact")
        await walk.close()

        # 5 Usage: cost and tokens per day over the last week (plots redraw a beat late).
        await walk.press("5")
        await until(pilot, lambda: isinstance(app.screen, UsageScreen), "the Usage view")
        await until(pilot, lambda: app.screen.series, "the usage series")
        await pilot.pause(1.2)
        text = await walk.snap("usage")
        assert "sim-1" in text

        # 4 Handoffs and the help overlay.
        await walk.press("4")
        await walk.snap("handoffs")
        await walk.open("question_mark", HelpScreen)
        await walk.snap("help")
        await walk.close()

        # Run dialogs: launch, clear, cancel (a running run), delete (a finished one).
        await walk.press("1")
        runs = app.screen.query_one("#runs-table", KeyedTable)
        await walk.open("n", LaunchRunDialog)
        await until(pilot, lambda: app.screen.query("#launch-input"), "the launch dialog")
        await walk.snap("dialog_launch")
        await tab_through(walk)
        await walk.close()
        runs.select_key("run-incident-1")
        await walk.open("x", ReasonDialog)
        await walk.snap("dialog_clear_run")
        await walk.close()
        dialog = await walk.open("c", ConfirmDialog)
        text = await walk.snap("dialog_cancel_run")
        assert "Stop the run (y)" in text and "Keep it running (n)" in text
        assert isinstance(dialog, ConfirmDialog)
        await walk.close("n")
        runs.select_key("run-review-1")
        await walk.open("d", ConfirmDialog)
        await walk.snap("dialog_delete_run")
        await walk.close("n")

        # m on the running node of a run: the steer dialog (now, or ctrl+n: next attempt).
        runs.select_key("run-incident-1")
        detail = await walk.open("enter", RunDetailScreen)
        await until(pilot, lambda: detail.nodes, "the run's nodes")
        await walk.press("g")
        detail.query_one("#nodes-table", KeyedTable).select_key("triage#0")
        await until(pilot, lambda: detail.selected_node is not None
                    and detail.selected_node.node_id == "triage", "the running node")
        await walk.open("m", SteerDialog)
        text = await walk.snap("dialog_steer")
        assert "next attempt" in text
        await walk.close()
    assert not walk.created, f"created missing snapshots {walk.created}; look at them and re-run"
    assert not walk.differ, (
        f"{walk.differ} differ from {walk.folder}; if intended, regenerate with "
        "TETHER_UPDATE_SNAPSHOTS=1"
    )
