"""``tether``, ``tether tui`` and their ``--workspace DIR`` open the dashboard without click.

The console script reads these command lines itself (``tui.cli.entry.parse_dashboard``) so the
dashboard's first paint does not wait for click and the command groups. These tests hold that
path to the click command's behaviour where it can be seen without a terminal (the refusals:
same stderr, same exit code), check that every other command line is left to click, and that
the path really opens the dashboard without importing click.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from memory_cli_support import REPO_ROOT

from store.db.sqlite.direct import DirectDatabase, run_now
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.cli.entry import parse_dashboard


@pytest.mark.parametrize(("argv", "folder"), [
    ([], None), (["tui"], None), (["--workspace", "W"], "W"), (["--workspace=W"], "W"),
    (["--workspace", "W", "tui"], "W"), (["tui", "--workspace", "W"], "W"),
    (["tui", "--workspace=W"], "W"),
])
def test_the_dashboard_command_lines_are_read_as_click_reads_them(
    argv: list[str], folder: str | None
) -> None:
    assert parse_dashboard(argv) == (folder,)


@pytest.mark.parametrize("argv", [
    ["tui", "--help"], ["-h"], ["--help"], ["tui", "tui"], ["runs"], ["demo"], ["serve"],
    ["--workspace"], ["--workspace="], ["--workspace", "-x"], ["--workspace", "-"],
    ["--workspace", "a", "tui", "--workspace", "b"], ["--workspace", "a", "--workspace", "a"],
    ["--database-url", "postgresql://h/d"], ["tui", "--database-url", "postgresql://h/d"],
    ["--workspacex", "a"], ["tui", "extra"], ["tui", "--verbose"],
])
def test_any_other_command_line_is_left_to_click(argv: list[str]) -> None:
    assert parse_dashboard(argv) is None


def _run(module: str, args: list[str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                      "PYTHONPATH": str(REPO_ROOT)})
    return done.returncode, done.stdout, done.stderr


def test_refusals_before_the_dashboard_starts_are_the_click_commands_own(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "tether.db").write_bytes(b"not a database at all" * 10)
    cases = [[], ["tui"], ["--workspace", str(tmp_path / "none")],
             ["tui", "--workspace", str(tmp_path / "none")], ["--workspace", str(damaged)]]
    codes = set()
    for args in cases:
        fast = _run("tui.cli.entry", args, empty)
        assert fast == _run("tui.cli.main", args, empty), args
        assert fast[2].startswith("tether: ") and fast[2].count("\n") == 1, fast
        codes.add(fast[0])
    assert codes == {1, 2}  # no workspace; a file that is not a Tether database


OPENED = """
import sys
import tui.app

def recorded(workspace, **_):
    print("opened", workspace.root.name, "click" in sys.modules, "tui.cli.main" in sys.modules)
    return 0

tui.app.run_dashboard = recorded
sys.argv = ["tether", *sys.argv[1:]]
from tui.cli.entry import main
main(fast_exit=False)
"""


def test_the_dashboard_opens_on_the_named_workspace_without_click(tmp_path: Path) -> None:
    db = DirectDatabase.open_now(Workspace(tmp_path / "ws"))
    run_now(RunStore(db).create_run("code-review", run_id="run-1", status="finished"))
    run_now(db.close())
    script = tmp_path / "opened.py"
    script.write_text(OPENED)
    for args in (["--workspace", str(tmp_path / "ws")], ["tui", f"--workspace={tmp_path}/ws"]):
        done = subprocess.run([sys.executable, str(script), *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "opened ws False False\n"


@pytest.mark.parametrize("args", [
    ["--workspace", "ws"], ["tui", "--workspace", "ws"], ["demo", "--workspace", "demo"],
])
def test_without_a_terminal_the_dashboard_says_so_and_exits_2(
    tmp_path: Path, args: list[str]
) -> None:
    """``tether < /dev/null`` (a CI job, a pipe) ran forever drawing into nowhere and waiting
    for keys that never came. The dashboard, and the demo that opens it, now say in one
    sentence that they need a terminal and what to run instead, and exit 2 with nothing made."""
    db = DirectDatabase.open_now(Workspace(tmp_path / "ws"))
    run_now(RunStore(db).create_run("code-review", run_id="run-1", status="finished"))
    run_now(db.close())
    done = subprocess.run([sys.executable, "-m", "tui.cli.entry", *args], cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("tether: the dashboard needs a terminal (stdin and stdout")
    assert done.stderr.count("\n") == 1 and "tether runs" in done.stderr
    assert not (tmp_path / "demo").exists()
