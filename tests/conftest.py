"""Shared fixtures: temporary workspaces, a manual clock, an open database, and the checks
every test passes through: no thread and no Database left open after it, and ``slow`` tests
only on request (``--run-slow``; ``.ci/run`` runs them as a step of their own).

``db`` (and ``any_workspace``) run each test twice: on a SQLite workspace and on a PostgreSQL
one (a fresh schema; see ``tests/pg_support.py``). The store's contract is the same on both.
Those PostgreSQL variants, and the tests marked ``postgresql``, are the PostgreSQL half: run
on request (``--postgresql`` runs that half alone; ``.ci/run`` runs it as a step of its own),
so the default command stays the embedded SQLite product and within a few minutes.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiosqlite.core
import pg_support
import pytest
from pg_support import fresh_schema

from store.clock import ManualClock
from store.db.backends import open_database
from store.db.seam import Database
from store.db.sqlite.sqlite_database import forget_database, open_databases
from store.workspace.layout import Workspace

BACKENDS = ("sqlite", "postgresql")

# `notes add` and `memory set` start a detached embedder when the semantic extra is installed;
# the suite writes thousands of records from subprocesses, so only the tests of that behaviour
# turn it back on (tests/cli/test_semantic_cli.py).
os.environ.setdefault("TETHER_NO_BACKGROUND_EMBED", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
_original_init = aiosqlite.core.Connection.__init__


def _remember_origin(self: aiosqlite.core.Connection, *args: Any, **kwargs: Any) -> None:
    """Record where each aiosqlite connection (and so its worker thread) was opened, so a leak
    report names the code that opened it."""
    _original_init(self, *args, **kwargs)
    here = [
        f"{Path(frame.filename).relative_to(REPO_ROOT)}:{frame.lineno} {frame.name}"
        for frame in traceback.extract_stack()[:-1]
        if frame.filename.startswith(str(REPO_ROOT)) and "/.venv/" not in frame.filename
    ]
    self._thread.opened_at = " <- ".join(reversed(here[-6:]))  # type: ignore[attr-defined]


aiosqlite.core.Connection.__init__ = _remember_origin  # type: ignore[method-assign]

LEAK_GRACE_S = 15.0
"""How long a test's threads get to finish stopping before they count as leaked."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow", action="store_true", default=False,
        help="also run tests marked slow (torture, kill trials, contention)",
    )
    parser.addoption(
        "--postgresql", action="store_true", default=False,
        help="run the PostgreSQL half alone (needs TETHER_TEST_DATABASE_URL; .ci/run sets it)",
    )
    parser.addoption(
        "--ray", action="store_true", default=False,
        help="run the Ray tests alone (real clusters on this machine; needs the ray extra)",
    )


def _ray_missing() -> str | None:
    """Why the Ray tests cannot run here (None: Ray is installed)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed: pip install '.[ray]' (.ci/run does)"
    return None


def _select_ray(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Ray tests start real clusters: only with --ray, and then alone. Under CI=true a
    missing Ray fails them rather than skipping them."""
    if not config.getoption("--ray"):
        skip = pytest.mark.skip(reason="Ray tests: run with --ray after pip install '.[ray]' "
                                       "(.ci/run does)")
        for item in items:
            if "ray" in item.keywords:
                item.add_marker(skip)
        return
    chosen = [item for item in items if "ray" in item.keywords]
    config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
    items[:] = chosen
    missing = _ray_missing()
    if missing is not None and os.environ.get("CI") != "true":
        for item in items:
            item.add_marker(pytest.mark.skip(reason=missing))


def _on_postgresql(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgresql" in callspec.params.values()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _on_postgresql(item):
            item.add_marker(pytest.mark.postgresql)
    _select_ray(config, items)
    if config.getoption("--postgresql"):
        chosen = [item for item in items if "postgresql" in item.keywords]
        config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
        items[:] = chosen
    else:
        skip_pg = pytest.mark.skip(reason="PostgreSQL half: run with --postgresql (.ci/run does)")
        for item in items:
            if "postgresql" in item.keywords:
                item.add_marker(skip_pg)
    if config.getoption("--run-slow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (.ci/run does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def current_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Lets ``pg_support`` refuse PostgreSQL to a test not marked ``postgresql`` (it would be
    skipped by default and never selected by --postgresql: silently never run)."""
    pg_support.CURRENT_TEST = request.node
    yield
    pg_support.CURRENT_TEST = None


def _leftovers(before: set[threading.Thread]) -> list[str]:
    threads = [
        f"{t.name} (opened at {getattr(t, 'opened_at', '?')})" for t in threading.enumerate()
        if t not in before and t.is_alive() and not t.daemon
    ]
    databases = [f"Database({db.workspace.root})" for db in open_databases()]
    return threads + databases


@pytest.fixture(autouse=True)
def no_leaked_threads_or_databases() -> Iterator[None]:
    """Fail a test that leaves a non-daemon thread running or a Database open: an aiosqlite
    connection never closed keeps its worker thread alive, and the interpreter then hangs at
    exit after pytest has printed its summary."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + LEAK_GRACE_S
    left = _leftovers(before)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)  # threads told to stop are joining; wait for that, bounded
        left = _leftovers(before)
    if left:
        for db in open_databases():
            _stop_worker(db)
        pytest.fail(f"the test left these open: {', '.join(left)}", pytrace=False)


def _stop_worker(db: Database) -> None:
    """Stop a leaked Database's worker thread (its event loop is gone, so no ``await``), so
    one failing test cannot also hang the interpreter at exit."""
    conn = db._conn  # the aiosqlite connection

    def close_and_stop() -> object:
        if conn._connection is not None:
            conn._connection.close()
            conn._connection = None
        return aiosqlite.core._STOP_RUNNING_SENTINEL

    conn._tx.put_nowait((None, close_and_stop))
    db._closed = True
    forget_database(db)


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
    database = await open_database(any_workspace, clock=clock)
    try:
        yield database
    finally:
        await database.close()
