"""Shared fixtures: temporary workspaces, a manual clock, and an open database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store.clock import ManualClock
from store.database import Database
from store.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A workspace folder inside the test's temporary directory (not created yet)."""
    return Workspace(tmp_path / ".tether")


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when the test says so."""
    return ManualClock()


@pytest.fixture
async def db(workspace: Workspace, clock: ManualClock) -> AsyncIterator[Database]:
    """An open, migrated workspace database on the manual clock."""
    database = await Database.open(workspace, clock=clock)
    try:
        yield database
    finally:
        await database.close()
