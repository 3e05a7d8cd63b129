"""What the dashboard shows first, and what it imports to show it.

The first screen must be true: the Runs view's count says "loading" until the first listing,
then the count of rows it really shows; the first listing reads only the newest
``FIRST_WINDOW`` runs and the rest of the window follows. Starting the dashboard imports the
Runs view alone: no other view, no engine (not even its config), no embedding model or numpy,
no click, none of the write side or the run search.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from textual.screen import Screen

from store.clock import ManualClock
from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tests.tui_actions.pilot_support import until
from tui.app import TetherApp
from tui.screens.live_screen import ViewTabs
from tui.screens.runs_view import FIRST_WINDOW, RUNS_SHOWN, RunsScreen
from tui.widgets.keyed_table import KeyedTable

ROOT = Path(__file__).resolve().parents[2]
RUNS = FIRST_WINDOW + 12


async def runs_workspace(root: Path, count: int) -> Workspace:
    """A workspace holding ``count`` finished runs, created one after another."""
    workspace = Workspace(root)
    db = await open_database(workspace, create=True, clock=ManualClock(1_760_000_000_000))
    try:
        store = RunStore(db)
        for n in range(count):
            await store.create_run("code-review", run_id=f"run-{n:04d}", status="finished")
    finally:
        await db.close()
    return workspace


class GatedApp(TetherApp):
    """The dashboard with its reads left out until the test opens the gate (as if the first
    read were slow: the view is on screen, nothing has been read)."""

    CSS_PATH = str(ROOT / "tui" / "app.tcss")

    def __init__(self, workspace: Workspace, **kwargs: Any) -> None:
        super().__init__(workspace, **kwargs)
        self.gate = asyncio.Event()

    async def refresh_screen(self, screen: Screen[Any]) -> None:  # type: ignore[override]
        if self.gate.is_set():
            await super().refresh_screen(screen)  # type: ignore[arg-type]


def tabs_text(app: TetherApp) -> str:
    return str(app.screen.query_one(ViewTabs).render())


async def test_the_runs_view_says_loading_until_it_has_read_then_its_true_count(
    tmp_path: Path,
) -> None:
    workspace = await runs_workspace(tmp_path / "ws", RUNS)
    app = GatedApp(workspace, watch=False, poll_interval=3600)
    async with app.run_test(size=(140, 42)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunsScreen)
                    and app.screen.is_mounted, "the Runs view")
        table = app.screen.query_one(KeyedTable)
        assert "loading runs" in tabs_text(app)
        assert "runs shown" not in tabs_text(app)  # no count before anything was read
        assert table.keys == []
        await pilot.pause()
        assert "loading runs" in tabs_text(app) and table.keys == []  # still nothing read
        app.gate.set()
        await app.refresh_screen(app.screen)  # type: ignore[arg-type]
        # The first listing is the newest FIRST_WINDOW runs, the rest of the window follows;
        # whatever the screen says on the way, its count is the rows it shows.
        await until(pilot, lambda: len(table.keys) == RUNS, "every run listed")
        await until(pilot, lambda: f"{RUNS} runs shown" in tabs_text(app), "the true count")
        assert "loading" not in tabs_text(app)
        assert table.keys[0] == f"run-{RUNS - 1:04d}"  # newest first
        assert app.screen.window == RUNS_SHOWN


async def test_the_first_listing_reads_only_the_newest_runs_a_screen_holds(
    tmp_path: Path,
) -> None:
    workspace = await runs_workspace(tmp_path / "ws", RUNS)
    app = TetherApp(workspace, watch=False, poll_interval=3600)
    counts: list[tuple[int, str]] = []

    def seen(_batch: object) -> None:
        screen = app.screen
        if isinstance(screen, RunsScreen):
            counts.append((len(screen.query_one(KeyedTable).keys), tabs_text(app)))

    app.after_apply = seen
    async with app.run_test(size=(140, 42)) as pilot:
        await until(pilot, lambda: any(n == RUNS for n, _ in counts), "the whole window")
    first_rows, first_tabs = counts[0]
    assert first_rows == FIRST_WINDOW
    assert f"{FIRST_WINDOW} runs shown, loading up to {RUNS_SHOWN}" in first_tabs
    assert all(f"{rows} runs shown" in tabs for rows, tabs in counts)


STARTUP = """
import sys
from pathlib import Path
from store.workspace.layout import Workspace
from tui.app import TetherApp

HEAVY = ("numpy", "onnxruntime", "tokenizers", "pydantic", "plotext", "engine.run.engine",
         "tui.screens.memory_view", "tui.screens.tokens_view", "tui.screens.run_detail",
         "tui.modals.launch", "tui.modals.fact_editor",
         # the write side and the engine's config: imported by the first key that needs them
         "click", "tui.run_control", "store.memory.memory_store", "store.runs.run_store",
         "engine.run.engine_config", "engine.telemetry.otel_settings", "tui.modals.confirm",
         # the query language and search: imported by the first filter
         "store.read.run_search", "store.read.run_query", "tui.modals.filter_dialogs")
loaded = []

def first_paint(batch):
    if not loaded:
        loaded.append(sorted(name for name in HEAVY if name in sys.modules))
        app.exit()

app = TetherApp(Workspace(Path(sys.argv[1])), watch=False, after_apply=first_paint)
app.run(headless=True, size=(160, 48))
print("loaded at first paint:", loaded[0] if loaded else "never painted")
"""


def test_the_first_paint_imports_neither_other_views_nor_the_engine_nor_the_model(
    tmp_path: Path,
) -> None:
    workspace = asyncio.run(runs_workspace(tmp_path / "ws", 3))
    script = tmp_path / "startup.py"
    script.write_text(STARTUP)
    # No OTEL_* variable: with no config.toml either, export is off without reading the
    # engine's config (an OTEL_* variable may turn it on, and then the config is read).
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, str(script), str(workspace.root)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "loaded at first paint: []" in done.stdout, done.stdout
