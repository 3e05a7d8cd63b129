"""A dashboard in its own process: the real Tether app, headless, on the workspace named by
the environment (LISTEN/NOTIFY on PostgreSQL). Prints every event it puts on screen as
``seq type run_id link-state`` and stops once it has shown ``run.status finished`` of the run
named in argv[1]; prints the workers line it showed last, then exits."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from store.clock import SYSTEM_CLOCK
from store.workspace.layout import resolve_workspace
from tui.app import TetherApp


async def follow(run_id: str) -> None:
    done = asyncio.Event()
    app: TetherApp

    def applied(batch: Any) -> None:
        for event in batch.events:
            print(event.seq, event.type, event.run_id, app.tailer.link_state, flush=True)
            payload = json.loads(event.payload_json or "{}")
            if (event.type, event.run_id, payload.get("status")) == (
                "run.status", run_id, "finished"
            ):
                done.set()

    workspace = resolve_workspace(str(Path.cwd() / ".tether"))
    # A long poll interval: what reaches the screen came by notification.
    app = TetherApp(workspace, clock=SYSTEM_CLOCK, watch=True, poll_interval=60.0,
                    after_apply=applied)
    async with app.run_test(size=(150, 40)) as pilot:
        while app.tailer.link_state != "live":
            await pilot.pause(0.05)
        print("ready", flush=True)
        while not done.is_set():
            await pilot.pause(0.05)
        workers = app.screen.query_one("#workers-line")
        print("workers", str(workers.render()).replace("\n", " "), flush=True)


if __name__ == "__main__":
    asyncio.run(follow(sys.argv[1]))
