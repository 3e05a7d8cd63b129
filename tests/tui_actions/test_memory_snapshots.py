"""SVG snapshots of the Memory view and the note review screen (fixed size, clock and theme).

Compares ``app.export_screenshot()`` with the committed SVGs in ``snapshots/`` beside this file.
To regenerate after an intended change: ``TETHER_UPDATE_SNAPSHOTS=1 pytest tests/tui_actions``
and look at the new files (``rsvg-convert x.svg -o x.png``) before committing them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.clock import ManualClock
from store.memory import MemoryStore
from store.workspace import Workspace
from tests.tui_actions.memory_seed import seed_memory
from tui.app import TetherApp
from tui.screens.memory import MemoryScreen, NoteReviewScreen
from tui.screens.memory_render import note_row_key

SNAPSHOTS = Path(__file__).with_name("snapshots")
SIZE = (130, 36)
UPDATE = os.environ.get("TETHER_UPDATE_SNAPSHOTS") == "1"


def normalise(svg: str) -> str:
    """Drop the per-export ids Textual puts in class names and clip paths."""
    return re.sub(r"terminal-\d+", "terminal", svg)


async def _memory_on_proposal(pilot: Pilot[None], screen: MemoryScreen) -> None:
    screen.notes_table.focus()
    screen.notes_table.select_key(note_row_key("rule-lint"))
    await pilot.pause()


async def _review(pilot: Pilot[None], screen: MemoryScreen) -> None:
    await _memory_on_proposal(pilot, screen)
    await pilot.press("enter")
    for _ in range(100):
        review = screen.app.screen
        if isinstance(review, NoteReviewScreen) and review.note is not None:
            break
        await pilot.pause(0.02)


@pytest.mark.parametrize(("name", "steps"), [("memory", _memory_on_proposal),
                                             ("review", _review)])
async def test_memory_views_match_snapshots(workspace: Workspace, name: str, steps) -> None:  # type: ignore[no-untyped-def]
    clock = ManualClock(1_767_225_600_000)
    async with await MemoryStore.open(workspace, clock=clock) as memory:
        await seed_memory(memory)
    clock.advance(95_000)
    app = TetherApp(workspace, clock=clock, watch=False, poll_interval=60)
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "textual-dark"
        app.animation_level = "none"
        await pilot.press("3")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        await screen.refresh_data()
        await steps(pilot, screen)
        await pilot.pause(0.1)
        svg = normalise(app.export_screenshot(title=f"tether — {name}"))
    path = SNAPSHOTS / f"{name}.svg"
    if UPDATE or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"created the missing snapshot {path.name}; look at it and re-run")
    assert svg == path.read_text(encoding="utf-8"), (
        f"{name} differs from {path}; if intended, regenerate with TETHER_UPDATE_SNAPSHOTS=1"
    )
