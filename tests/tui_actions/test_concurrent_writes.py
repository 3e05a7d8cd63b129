"""The dashboard edits facts and reviews notes while another process writes continuously:
no "database is locked" reaches the screen and no update is lost (checked with the CLI)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from textual.message import Message
from textual.notifications import Notify
from textual.widgets import TextArea

from store.workspace.layout import Workspace
from tests.cli.memory_cli_support import REPO_ROOT, tether
from tests.tui_actions.memory_seed import Seeded
from tests.tui_actions.pilot_support import press_for, until
from tests.tui_actions.test_memory_view import MakeApp, on_fact, on_note, open_memory
from tui.modals import FactEditor, ReasonDialog
from tui.screens.memory_render import fact_row_key

WRITER = Path(__file__).with_name("busy_writer.py")


async def test_edits_and_reviews_while_another_process_writes(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(workspace.root), str(stop)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    notes: list[str] = []

    def hook(message: Message) -> None:
        if isinstance(message, Notify):
            notes.append(f"{message.notification.severity}: {message.notification.message}")

    try:
        assert writer.stdout is not None
        ready = await asyncio.to_thread(writer.stdout.readline)
        assert ready.strip() == "ready", writer.stderr.read() if writer.stderr else ""
        app = make_app()
        async with app.run_test(size=(150, 42), message_hook=hook) as pilot:
            screen = await open_memory(app, pilot)
            for round_ in range(2):
                await on_fact(screen, pilot, fact_row_key("workflow:code-review", "answer"))
                await press_for(pilot, app, "e", FactEditor)
                app.screen.query_one("#fact-value", TextArea).text = json.dumps(f"v{round_}")
                await pilot.press("ctrl+s")
                await until(pilot, lambda: app.screen is screen, "the save")
            await on_note(screen, pilot, seeded.rule)
            await pilot.press("a")
            # The decided note is shown accepted, and the cursor went on to the next pending.
            await until(pilot, lambda: getattr(screen._book.by_id(seeded.rule), "status", "")
                        == "accepted", "the accept")
            await on_note(screen, pilot, seeded.lone)
            await press_for(pilot, app, "r", ReasonDialog)
            await pilot.press(*"noise", "enter")
            await until(pilot, lambda: getattr(screen._book.by_id(seeded.lone), "status", "")
                        == "rejected", "the reject")
    finally:
        stop.touch()
        out, err = await asyncio.to_thread(writer.communicate, timeout=60)
    assert writer.returncode == 0, err
    rounds = int(out.split()[-1])
    assert rounds > 1
    assert not [n for n in notes if n.startswith("error") or "locked" in n.lower()], notes

    root = str(workspace.root)
    answer = tether("memory", "get", "workflow:code-review", "answer", "--workspace", root)
    assert json.loads(answer.stdout) == "v1"
    busy = tether("memory", "list", "workflow:busy", "--format", "json", "--limit", "100000",
                  "--workspace", root)
    facts = json.loads(busy.stdout)["items"]
    assert len(facts) == rounds  # every write of the other process is there too
    listed = tether("notes", "list", "--status", "any", "--include-superseded", "--format",
                    "json", "--workspace", root)
    decided = {
        n["id"]: (n["status"], n["status_reason"]) for n in json.loads(listed.stdout)["items"]
    }
    assert decided[seeded.rule] == ("accepted", None)
    assert decided[seeded.lone] == ("rejected", "noise")
