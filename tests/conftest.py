"""Shared fixtures: temporary workspaces, a manual clock, and an open database."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store.clock import ManualClock
from store.database import Database
from store.workspace import Workspace

# `notes add` and `memory set` start a detached embedder when the semantic extra is installed;
# the suite writes thousands of records from subprocesses, so only the tests of that behaviour
# turn it back on (tests/cli/test_semantic_cli.py).
os.environ.setdefault("TETHER_NO_BACKGROUND_EMBED", "1")


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
