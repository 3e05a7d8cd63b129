"""Fixtures for dashboard tests: a filled sample workspace and an app on a manual clock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sample_data import NOW_MS, build

from store.clock import ManualClock
from store.workspace.layout import Workspace
from tui.app import TetherApp


@pytest.fixture
async def sample_workspace(tmp_path: Path) -> Workspace:
    """A workspace holding the runs of :mod:`sample_data`."""
    workspace = Workspace(tmp_path / ".tether")
    await build(workspace, ManualClock())
    return workspace


@pytest.fixture
def make_app(sample_workspace: Workspace) -> Callable[..., TetherApp]:
    """Build an app on the sample workspace, on a frozen clock, without the file watcher."""

    def factory(**kwargs: object) -> TetherApp:
        options: dict[str, object] = {
            "clock": ManualClock(NOW_MS),
            "watch": False,
            "poll_interval": 0.05,
        }
        options.update(kwargs)
        app = TetherApp(sample_workspace, **options)  # type: ignore[arg-type]
        app.animation_level = "none"
        app.theme = "textual-dark"
        return app

    return factory
