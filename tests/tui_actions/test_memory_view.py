"""The Memory view in the real dashboard app: facts, notes, editing and review from the keyboard."""

from __future__ import annotations

from store.clock import ManualClock
from store.workspace import Workspace
from tests.tui_actions.conftest import Seeded
from tui.app import TetherApp
from tui.screens.memory import MemoryScreen


def make_app(workspace: Workspace, clock: ManualClock) -> TetherApp:
    return TetherApp(workspace, clock=clock, watch=False, poll_interval=0.05)


async def open_memory(app: TetherApp, pilot) -> MemoryScreen:  # type: ignore[no-untyped-def]
    await pilot.press("3")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, MemoryScreen)
    await screen.refresh_data()
    await pilot.pause()
    return screen


async def test_memory_view_lists_facts_by_namespace_and_pending_first(
    workspace: Workspace, clock: ManualClock, seeded: Seeded
) -> None:
    app = make_app(workspace, clock)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await open_memory(app, pilot)
        keys = screen.facts_table.keys
        assert [k.split("\x1f")[1:] for k in keys] == [
            ["user:ada"], ["user:ada", "editor"],
            ["workflow:code-review"], ["workflow:code-review", "answer"],
            ["workflow:code-review", "limits"],
        ]
        notes = [k.split("\x1f")[1] for k in screen.notes_table.keys]
        assert notes[:2] == [seeded.rule, seeded.lone]
        assert set(notes[2:]) == {seeded.lesson_a, seeded.lesson_b}
