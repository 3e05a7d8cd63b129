"""Shared fixtures: temporary workspaces, a manual clock, and an open database.

``db`` (and ``any_workspace``) run each test twice: on a SQLite workspace and on a PostgreSQL
one (a fresh schema; see ``tests/pg_support.py``). The store's contract is the same on both.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pg_support import fresh_schema

from store.clock import ManualClock
from store.database import Database
from store.workspace import Workspace

BACKENDS = ("sqlite", "postgresql")

# `notes add` and `memory set` start a detached embedder when the semantic extra is installed;
# the suite writes thousands of records from subprocesses, so only the tests of that behaviour
# turn it back on (tests/cli/test_semantic_cli.py).
os.environ.setdefault("TETHER_NO_BACKGROUND_EMBED", "1")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A workspace folder inside the test's temporary directory (not created yet)."""
    return Workspace(tmp_path / ".tether")


@pytest.fixture(params=BACKENDS)
def any_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    """A SQLite workspace, then (second run) a PostgreSQL one in a fresh schema."""
    if request.param == "sqlite":
        yield Workspace(tmp_path / ".tether")
        return
    with fresh_schema() as url:
        # The folder still holds config.toml (agents, engine settings) on a shared workspace.
        (tmp_path / ".tether").mkdir(mode=0o700)
        yield Workspace(tmp_path / ".tether", database_url=url)


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when the test says so."""
    return ManualClock()


@pytest.fixture
async def db(any_workspace: Workspace, clock: ManualClock) -> AsyncIterator[Database]:
    """An open, migrated workspace database on the manual clock, on each backend."""
    database = await Database.open(any_workspace, clock=clock)
    try:
        yield database
    finally:
        await database.close()
