"""The real dashboard in its own process, driven through Pilot by JSON commands on stdin.

Used by the torture test: the app runs with its real settings (file watcher on, 0.5 s poll, the
embedded engine on its own writable connection), and every action goes through the keys and
dialogs a person would use. One JSON reply per command on stdout:

- ``{"op": "launch", "tag": T}``: ``n`` on the Runs view, the code-review workflow, input
  ``{"change": T}``, ``ctrl+s``; replies once the run exists, with its id;
- ``{"op": "set_fact", "namespace": NS, "key": K, "value_json": V}``: ``3``, ``n`` in the
  Memory view, the new-fact form filled in, ``ctrl+s``; replies once the fact is stored;
- ``{"op": "status"}``: the event number the status line on screen shows;
- ``{"op": "quit"}``: ``q`` (and ``y`` when it asks about embedded runs); the process exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from store.workspace.layout import DATABASE_URL_ENV_VAR, Workspace
from tui.app import TetherApp
from tui.modals import ConfirmDialog, NewFactForm
from tui.modals.launch import LaunchRunDialog
from tui.run_control import host_for
from tui.screens.memory_view import MemoryScreen
from tui.screens.runs_view import RunsScreen
from tui.widgets.status import StatusLine

EVENT_NUMBER = re.compile(r"event #(\d+)")


def reply(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


async def until(pilot: Pilot[None], condition: Callable[[], Any], what: str) -> None:
    for _ in range(3000):  # generous: the machine may be busy
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def show(app: TetherApp, pilot: Pilot[None], key: str, screen_type: type) -> None:
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, screen_type), screen_type.__name__)


async def launch(app: TetherApp, pilot: Pilot[None], tag: str) -> dict[str, Any]:
    await show(app, pilot, "1", RunsScreen)
    await show(app, pilot, "n", LaunchRunDialog)
    dialog = app.screen
    dialog.query_one("#launch-input", TextArea).text = json.dumps({"change": tag})
    await pilot.pause()
    await pilot.press("ctrl+s")
    await until(pilot, lambda: isinstance(app.screen, RunsScreen), "the launch dialog to close")
    store = await host_for(app).runs()
    found: list[str] = []

    async def created() -> bool:
        runs = await store.list_runs(limit=500)
        found[:] = [r.run_id for r in runs if r.input and r.input.get("change") == tag]
        return bool(found)

    for _ in range(3000):
        if await created():
            return {"run_id": found[0]}
        await pilot.pause(0.02)
    raise AssertionError(f"the run {tag} never appeared")


async def set_fact(app: TetherApp, pilot: Pilot[None], command: dict[str, Any]) -> dict[str, Any]:
    await show(app, pilot, "3", MemoryScreen)
    await show(app, pilot, "n", NewFactForm)
    form = app.screen
    form.query_one("#fact-namespace", Input).value = command["namespace"]
    form.query_one("#fact-key", Input).value = command["key"]
    form.query_one("#fact-value", TextArea).text = command["value_json"]
    await pilot.pause()
    await pilot.press("ctrl+s")
    await until(pilot, lambda: isinstance(app.screen, MemoryScreen), "the fact form to close")
    memory = await host_for(app).memory()
    for _ in range(3000):
        fact = await memory.get_fact(command["namespace"], command["key"])
        if fact is not None and json.loads(fact.value_json) == json.loads(command["value_json"]):
            return {"stored": True}
        await pilot.pause(0.02)
    raise AssertionError(f"the fact {command['key']} was never stored")


def shown_event_number(app: TetherApp) -> int | None:
    for line in app.screen.query(StatusLine):
        match = EVENT_NUMBER.search(str(line.render()))
        if match:
            return int(match.group(1))
    return None


async def quit_app(app: TetherApp, pilot: Pilot[None]) -> None:
    await pilot.press("q")
    for _ in range(3000):
        if not app.is_running:
            return
        if isinstance(app.screen, ConfirmDialog):
            await pilot.press("y")
        await pilot.pause(0.02)
    raise AssertionError("the dashboard did not quit")


async def main(root: Path) -> int:
    # A PostgreSQL workspace when TETHER_DATABASE_URL names one (the PostgreSQL torture test).
    app = TetherApp(Workspace(root, os.environ.get(DATABASE_URL_ENV_VAR) or None))
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue[str | None] = asyncio.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(commands.put_nowait, line)
        loop.call_soon_threadsafe(commands.put_nowait, None)

    threading.Thread(target=read_stdin, daemon=True).start()
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunsScreen), "the Runs view")
        reply({"ready": True, "pid": os.getpid()})
        while True:
            line = await commands.get()
            if line is None:
                return 2
            command = json.loads(line)
            op = command["op"]
            if op == "launch":
                reply(await launch(app, pilot, command["tag"]))
            elif op == "set_fact":
                reply(await set_fact(app, pilot, command))
            elif op == "status":
                reply({"event": shown_event_number(app), "last_seq": app.tailer.last_seq,
                       "problem": app.read_problem or app.tailer.problem})
            elif op == "quit":
                await quit_app(app, pilot)
                break
    reply({"quit": True, "return_code": app.return_code})
    return 0 if not app.return_code else 3


if __name__ == "__main__":
    sys.exit(asyncio.run(main(Path(sys.argv[1]))))
