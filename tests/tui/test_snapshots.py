"""SVG snapshots of each view at a fixed size, clock and theme.

Compares ``app.export_screenshot()`` with the committed SVGs in ``tests/tui/snapshots/``.
To regenerate after an intended change: ``TETHER_UPDATE_SNAPSHOTS=1 pytest tests/tui`` and
look at the new files before committing them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, TabbedContent

from tui.app import TetherApp
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.keyed_table import KeyedTable

SNAPSHOTS = Path(__file__).with_name("snapshots")
SIZE = (120, 36)
UPDATE = os.environ.get("TETHER_UPDATE_SNAPSHOTS") == "1"


def normalise(svg: str) -> str:
    """Drop the per-export ids Textual puts in class names and clip paths."""
    return re.sub(r"terminal-\d+", "terminal", svg)


async def settled_screenshot(pilot: Pilot[None], app: TetherApp, name: str) -> str:
    """A screenshot taken once two in a row agree (the footer recomposes asynchronously when
    a view's key bindings change, so a single capture can catch it half drawn)."""
    for field in app.screen.query(Input):
        field.cursor_blink = False  # a blinking cursor would make every capture differ
    previous = ""
    for _ in range(10):
        await pilot.pause(0.1)
        svg = normalise(app.export_screenshot(title=f"tether — {name}"))
        if svg == previous:
            return svg
        previous = svg
    return previous


async def _runs(pilot: Pilot[None], app: TetherApp) -> None:
    app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")


async def _run_detail_memory(pilot: Pilot[None], app: TetherApp) -> None:
    app.screen.query_one("#runs-table", KeyedTable).select_key("run-review-1")
    await pilot.press("enter")
    for _ in range(50):
        await pilot.pause(0.02)
        if isinstance(app.screen, RunDetailScreen):
            break
    await pilot.pause(0.2)
    app.screen.query_one("#inspector", TabbedContent).active = "tab-memory"


async def _tokens(pilot: Pilot[None], app: TetherApp) -> None:
    await pilot.press("2")
    await pilot.pause(1.2)  # the histogram is redrawn at most once a second


async def _handoffs(pilot: Pilot[None], app: TetherApp) -> None:
    await pilot.press("4")


async def _help(pilot: Pilot[None], app: TetherApp) -> None:
    await pilot.press("question_mark")


@pytest.mark.parametrize(
    ("name", "steps"),
    [
        ("runs", _runs),
        ("run_detail_memory", _run_detail_memory),
        ("tokens", _tokens),
        ("handoffs", _handoffs),
        ("help", _help),
    ],
)
async def test_view_matches_snapshot(make_app, name, steps):
    app: TetherApp = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        await app.poll_once()
        await steps(pilot, app)
        await pilot.pause(0.3)
        await app.poll_once()
        svg = await settled_screenshot(pilot, app, name)
    path = SNAPSHOTS / f"{name}.svg"
    if UPDATE or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"created the missing snapshot {path.name}; look at it and re-run")
    assert svg == path.read_text(encoding="utf-8"), (
        f"{name} differs from {path}; if intended, regenerate with TETHER_UPDATE_SNAPSHOTS=1"
    )
