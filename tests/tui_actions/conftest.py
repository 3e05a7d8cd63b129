"""Fixtures for the dashboard-action tests: a seeded workspace and the real app on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from store.clock import SYSTEM_CLOCK, ManualClock
from store.memory.memory_store import MemoryStore
from store.workspace.layout import Workspace
from tests.tui_actions.memory_seed import Seeded, seed_memory
from tui.app import TetherApp


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock that starts at the real time, so TTLs agree with the ``tether`` command
    line run as a subprocess (it reads the system clock); it then moves only when told to."""
    return ManualClock(SYSTEM_CLOCK.now_ms())


@pytest.fixture
async def seeded(workspace: Workspace, clock: ManualClock) -> AsyncIterator[Seeded]:
    """A workspace with the seed written (connection closed again before the app opens)."""
    async with await MemoryStore.open(workspace, clock=clock) as memory:
        ids = await seed_memory(memory)
    yield ids


@pytest.fixture
def make_app(workspace: Workspace, clock: ManualClock):  # type: ignore[no-untyped-def]
    """Build the real dashboard on the test workspace (manual clock, no file watcher)."""

    def build() -> TetherApp:
        app = TetherApp(workspace, clock=clock, watch=False, poll_interval=0.05)
        app.animation_level = "none"
        return app

    return build
