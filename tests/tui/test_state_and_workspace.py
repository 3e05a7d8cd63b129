"""Issue 13 §1: keys that follow the selected run's live state, finding the workspace, and
what the dashboard says when there is none (real app with Pilot, real CLI subprocesses)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from sample_data import NOW_MS
from test_views import settle

from store.clock import ManualClock
from store.database import Database
from store.runs import RunStore
from store.workspace import resolve_workspace
from tui.modals import ConfirmDialog
from tui.widgets.keyed_table import KeyedTable

REPO_ROOT = Path(__file__).resolve().parents[2]


def footer_keys(app) -> set[str]:  # type: ignore[no-untyped-def]
    return {key for key, active in app.screen.active_bindings.items() if active.enabled}


async def test_run_keys_follow_the_selected_run_when_it_ends(make_app, sample_workspace):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one("#runs-table", KeyedTable)
        assert table.select_key("run-incident-1")
        await pilot.pause()
        assert {"c", "x"} <= footer_keys(app) and "d" not in footer_keys(app)
        # Another process finishes the run; nothing else happens on screen (no key, no move).
        db = await Database.open(sample_workspace, clock=ManualClock(NOW_MS))
        try:
            await RunStore(db).set_run_status("run-incident-1", "finished")
        finally:
            await db.close()
        await settle(pilot, app)
        keys = footer_keys(app)
        assert "d" in keys and "c" not in keys and "x" not in keys
        await pilot.press("c")  # does nothing now: no "Cancel this run?" dialog
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)


def test_workspace_is_found_inside_a_workspace_folder_and_from_a_project_folder(
    tmp_path: Path,
) -> None:
    demo = tmp_path / "tether-demo"
    (demo / "artifacts" / "r-1").mkdir(parents=True)
    (demo / "tether.db").write_bytes(b"")
    empty: dict[str, str] = {}
    assert resolve_workspace(cwd=demo, environ=empty).root == demo
    assert resolve_workspace(cwd=demo / "artifacts" / "r-1", environ=empty).root == demo
    project = tmp_path / "project"
    (project / ".tether").mkdir(parents=True)
    (project / ".tether" / "tether.db").write_bytes(b"")
    assert resolve_workspace(str(project), environ=empty).root == project / ".tether"
    assert resolve_workspace(environ={"TETHER_WORKSPACE": str(project)}).root == (
        project / ".tether"
    )
    # A folder that is a workspace stays itself; an unknown one is taken as named.
    assert resolve_workspace(str(demo), environ=empty).root == demo
    assert resolve_workspace(str(tmp_path / "new"), environ=empty).root == tmp_path / "new"


def _tether(*args: str, cwd: Path, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "tui.cli.entry", *args], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=60)


def test_dashboard_says_clearly_when_there_is_no_workspace(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    named = _tether("tui", "--workspace", str(empty), cwd=tmp_path)
    assert named.returncode == 1
    assert f"no Tether workspace at {empty}" in named.stderr
    from_env = _tether("tui", cwd=tmp_path, env={"TETHER_WORKSPACE": str(empty)})
    assert from_env.returncode == 1 and f"no Tether workspace at {empty}" in from_env.stderr
    found = _tether(cwd=empty)
    assert found.returncode == 1
    assert f"no Tether workspace found in {empty.resolve()}" in found.stderr
    assert "tether demo" in found.stderr
    assert not (empty / ".tether").exists() and not (empty / "tether.db").exists()


def _read_until(fd: int, needle: bytes, seen: bytearray, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if needle in seen:
            return True
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen.extend(os.read(fd, 65536))
            except OSError:
                return needle in seen
    return needle in seen


def test_demo_prints_its_workspace_on_start_and_on_quit(tmp_path: Path) -> None:
    workspace = tmp_path / "demo-ws"
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env.update({"TERM": "xterm-256color", "TETHER_SIM_LATENCY_MS": "50",
                "PYTHONPATH": str(REPO_ROOT)})
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", "demo", "--workspace", str(workspace)],
        stdin=follower, stdout=follower, stderr=follower, env=env, cwd=tmp_path,
        start_new_session=True,
    )
    os.close(follower)
    seen = bytearray()
    try:
        assert _read_until(leader, f"Demo workspace: {workspace}".encode(), seen,
                           time.monotonic() + 60), seen[-2000:]
        assert _read_until(leader, b"Quit", seen, time.monotonic() + 60)
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            # q quits, or asks first while the demo's runs are active; y answers that.
            os.write(leader, b"q")
            _read_until(leader, b"Open it again", seen, time.monotonic() + 1.5)
            if process.poll() is None:
                os.write(leader, b"y")
                _read_until(leader, b"Open it again", seen, time.monotonic() + 1.5)
        assert _read_until(leader, b"tether --workspace", seen, time.monotonic() + 10)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    text = seen.decode("utf-8", "replace")
    tail = text[text.rindex("Open it again"):]
    assert str(workspace) in tail
    assert process.returncode == 0


def test_warning_sign_only_for_degraded_recall() -> None:
    from store.dashboard import MemoryBlockRow, MemorySummary
    from tui.screens.run_detail_render import memory_block_text, memory_cell

    empty_bank = "no block: nothing in workflow:review matched the query"
    assert memory_cell(MemorySummary("n", 0, warning=empty_bank)).plain == "no matches"
    assert memory_cell(MemorySummary("n", 0, warning="no block: recall is off for this task")
                       ).plain == "recall off"
    assert memory_cell(MemorySummary("n", 0, 900, 2048, truncated=1)).plain == "900B/2.0kB cut"
    degraded = memory_cell(MemorySummary("n", 0, warning="recall timed out", degraded=1))
    assert degraded.plain == "⚠ degraded"
    plain = memory_block_text(MemoryBlockRow(1, "r", "n", 0, warning=empty_bank))
    assert "⚠" not in plain.plain and empty_bank in plain.plain
    timed_out = memory_block_text(MemoryBlockRow(1, "r", "n", 0, warning="recall timed out",
                                                 degraded=1))
    assert timed_out.plain.startswith("⚠ recall timed out")
