"""`tether demo --headless` and `tether tui` as a person runs them (real subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from store.workspace.layout import Workspace


def tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TETHER_SIM_LATENCY_MS": "5"}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
    )


def test_headless_demo_runs_every_example_to_the_end(tmp_path: Path):
    result = tether("demo", "--headless", "--workspace", str(tmp_path / "demo"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for workflow in ("fanout-review", "code-review", "incident-runbook", "context-handoff"):
        assert workflow in out
    assert "handed-off" in out and "finished" in out
    assert " handoffs; " in out and "pending review" in out
    assert "problem:" not in out
    assert Workspace(tmp_path / "demo").database_path.exists()


def test_tui_refuses_a_file_that_is_not_a_tether_database(tmp_path: Path):
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "tether.db").write_bytes(b"not a database at all")
    result = tether("tui", "--workspace", str(folder), cwd=tmp_path)
    assert result.returncode == 2
    assert "not a SQLite database" in result.stderr
    assert (folder / "tether.db").read_bytes() == b"not a database at all"
