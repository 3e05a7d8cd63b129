"""The dashboard against hostile data and failures: literal palette entries, a fact editor that
refuses without crashing or losing the edit, a log tail with bounded memory, and crashes that
exit non-zero with the traceback kept in a file under the workspace (the real ``tether tui``
in a pseudo-terminal)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from textual.command import CommandList, CommandPalette
from textual.widgets import Button, Input, Static, TextArea

from store.clock import ManualClock
from store.db.backends import open_database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tests.tui_actions.memory_seed import Seeded
from tests.tui_actions.pilot_support import press_for, until
from tests.tui_actions.test_memory_view import memory_view, on_fact
from tui.app import TetherApp
from tui.modals import FactEditor
from tui.screens.memory_render import fact_row_key
from tui.tailing import FileTail

REPO_ROOT = Path(__file__).resolve().parents[2]
MakeApp = Callable[[], TetherApp]
HOSTILE_NAMES = [
    "bad[/oops",
    "[@click=app.quit]quit[/]",
    "\x1b]52;c;SGVsbG8=\x07clipboard",  # OSC 52: would set the terminal's clipboard
    "\x1b]2;pwned\x07title",  # would set the terminal (tmux) title
]


# -- command palette -------------------------------------------------------------------------


async def test_the_command_palette_shows_run_names_literally(
    make_app: MakeApp, workspace: Workspace, clock: ManualClock
) -> None:
    async with await open_database(workspace, clock=clock) as db:
        runs = RunStore(db)
        for name in HOSTILE_NAMES:
            await runs.create_run(name, status="finished")
    app = make_app()
    async with app.run_test(size=(150, 42)) as pilot:
        await until(pilot, lambda: len(app.known_runs) == len(HOSTILE_NAMES), "the runs list")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"open run")
        await until(pilot, lambda: app.screen.query_one(CommandList).option_count
                    >= len(HOSTILE_NAMES), "every run in the palette")
        await pilot.pause()
        shown = app.export_screenshot()
        assert app.is_running  # no markup error
        assert "bad[/oops" in shown and "[@click=app.quit]quit[/]" in shown
        assert "\x1b" not in shown and "\x07" not in shown  # nothing reaches the terminal
        await pilot.press("escape")


# -- fact editor -----------------------------------------------------------------------------


async def test_the_fact_editor_refuses_huge_numbers_and_deep_nesting_keeping_the_text(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, fact_row_key("workflow:code-review", "answer"))
        editor = await press_for(pilot, app, "e", FactEditor)
        area = editor.query_one("#fact-value", TextArea)
        for text, reason in (
            ("1" * 5000, "digits"),
            ("[" * 300 + "]" * 300, "nested"),
            ("1e400", "too large"),
            ('"\\ud800"', "surrogate"),
        ):
            area.text = text
            await pilot.pause()
            status = str(editor.query_one("#json-status", Static).render())
            assert reason in status, (text[:20], status)
            assert editor.query_one("#fact-save", Button).disabled
            await pilot.press("ctrl+s")  # refused: the editor stays open with the text
            await pilot.pause()
            assert app.screen is editor and area.text == text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the editor to close")
        assert app.is_running
    async with await MemoryStore.open(workspace, create=False) as memory:
        fact = await memory.get_fact("workflow:code-review", "answer")
    assert fact is not None and fact.value == "use pytest -x"


async def test_a_fact_edit_whose_write_fails_reopens_with_the_typed_text(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, fact_row_key("workflow:code-review", "answer"))
        editor = await press_for(pilot, app, "e", FactEditor)
        typed = '{"edited": "by hand"}'
        editor.query_one("#fact-value", TextArea).text = typed
        editor.query_one("#fact-ttl", Input).value = ""
        await pilot.pause()
        # The workspace becomes read-only for this write: the store refuses it.
        host_db = await screen.memory()
        host_db.db.read_only = True
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, FactEditor) and app.screen is not editor,
                    "the editor to reopen")
        reopened = app.screen
        assert json.loads(reopened.query_one("#fact-value", TextArea).text) == json.loads(typed)
        host_db.db.read_only = False
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen, "the editor to close")
    async with await MemoryStore.open(workspace, create=False) as memory:
        fact = await memory.get_fact("workflow:code-review", "answer")
    assert fact is not None and fact.value == {"edited": "by hand"}


# -- log tail --------------------------------------------------------------------------------


def test_the_log_tail_reads_a_bounded_window_and_keeps_up_with_a_fast_log(tmp_path: Path) -> None:
    path = tmp_path / "stream.log"
    line = "agent output line with a few words in it {}\n"
    with path.open("w") as handle:
        handle.writelines(line.format(i) for i in range(1_000_000))
    tail = FileTail(path)
    first = tail.read_new_lines()
    assert sum(len(x) + 1 for x in first) <= 256 * 1024
    assert first[0].startswith("agent output line") and first[-1].endswith("999999")
    with path.open("a") as handle:
        handle.writelines(line.format(f"new {i}") for i in range(1_000_000))
    second = tail.read_new_lines()
    assert second[0].startswith("── ") and "bytes skipped" in second[0]
    assert sum(len(x) + 1 for x in second[1:]) <= 256 * 1024
    assert second[-1].endswith("new 999999")  # caught up with the end at once
    assert tail.read_new_lines() == []


# -- crashes ---------------------------------------------------------------------------------


def run_in_pty(argv: list[str], env: dict[str, str], *, send: bytes | None,
               ready: bytes, timeout: float = 120, cwd: Path | None = None) -> tuple[int, bytes]:
    """Run ``argv`` on a pseudo-terminal; once ``ready`` appears in its output, type ``send``.
    Returns the exit code and everything it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command on the terminal
        if cwd is not None:
            os.chdir(cwd)
        os.execve(argv[0], argv, env)
    output = b""
    sent = send is None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fd], [], [], 0.2)
            if readable:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""  # EIO: the child closed the terminal (it is exiting)
                if not chunk:
                    _, status = os.waitpid(pid, 0)
                    return os.waitstatus_to_exitcode(status), output
                output += chunk
            if not sent and ready in output:
                time.sleep(0.5)
                assert send is not None
                os.write(fd, send)
                sent = True
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError(f"timed out; output so far: {output[-2000:]!r}")
    finally:
        os.close(fd)


def pty_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env.update(PYTHONPATH=str(REPO_ROOT), TERM="xterm-256color", COLUMNS="120", LINES="40")
    return env


def test_the_real_dashboard_starts_and_quits_cleanly_in_a_terminal(
    seeded: Seeded, workspace: Workspace
) -> None:
    code, output = run_in_pty(
        [sys.executable, "-m", "tui.cli.entry", "tui", "--workspace", str(workspace.root)],
        pty_env(), send=b"q", ready=b"Runs",
    )
    assert code == 0, output[-2000:]
    assert not (workspace.root / "crashes").exists()


CRASHING = """
import sys
from pathlib import Path
import tui.app
from store.workspace.layout import Workspace
from tui.app import TetherApp, run_dashboard

class Exploding(TetherApp):
    CSS_PATH = str(Path(tui.app.__file__).with_name("app.tcss"))

    def on_mount(self):
        raise ValueError("boom while mounting postgresql://team:pw-crash-4417@db/x")

sys.exit(run_dashboard(Workspace(Path(sys.argv[1])), app_class=Exploding))
"""


def test_a_dashboard_crash_exits_3_and_keeps_the_traceback_under_the_workspace(
    seeded: Seeded, workspace: Workspace, tmp_path: Path
) -> None:
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    code, output = run_in_pty(
        [sys.executable, str(script), str(workspace.root)], pty_env(), send=None, ready=b"",
    )
    assert code == 3, output[-2000:]
    text = output.decode("utf-8", "replace")
    assert "Traceback" not in text
    assert "tether: The dashboard stopped on an internal error (ValueError: boom while mounting " \
        "postgresql://team:***@db/x)" in text
    (report,) = (workspace.root / "crashes").iterdir()
    saved = report.read_text()
    assert "boom while mounting postgresql://team:***@db/x" in saved
    assert "pw-crash-4417" not in saved + text  # secrets masked in the report and the sentence
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    assert stat.S_IMODE((workspace.root / "crashes").stat().st_mode) == 0o700


async def test_a_table_given_one_item_twice_shows_it_once() -> None:
    """Views read with several queries; another process can move an item between them (a
    note accepted between reading pending and accepted notes) so it arrives twice."""
    from rich.text import Text
    from textual.app import App, ComposeResult

    from tui.widgets.keyed_table import KeyedTable

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield KeyedTable([("name", "Name")])

    app = One()
    async with app.run_test() as pilot:
        table = app.query_one(KeyedTable)
        table.sync([("a", [Text("first a")]), ("b", [Text("b")]), ("a", [Text("second a")])])
        await pilot.pause()
        assert table.keys == ["a", "b"]
        assert str(table.get_cell("a", "name")) == "first a"
