"""A dashboard's tail in its own process: follows a workspace with the dashboard's
WorkspaceTailer (LISTEN/NOTIFY on PostgreSQL) and prints every event it sees as
``seq type run_id``, until it sees ``run.status finished`` of the run named in argv[1]."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from store.workspace import resolve_workspace
from tui.tailing import WorkspaceTailer


async def follow(run_id: str) -> None:
    tailer = WorkspaceTailer(resolve_workspace(str(Path.cwd() / ".tether")))
    stop = asyncio.Event()
    wakes = tailer.wake_ups(stop)
    await tailer.poll()
    print("ready", flush=True)
    try:
        while True:
            await anext(wakes)
            batch = await tailer.poll()
            for event in batch.events if batch else ():
                print(event.seq, event.type, event.run_id, tailer.link_state, flush=True)
                payload = json.loads(event.payload_json or "{}")
                if (event.type, event.run_id, payload.get("status")) == (
                    "run.status", run_id, "finished"
                ):
                    return
    finally:
        stop.set()
        await wakes.aclose()
        await tailer.close()


if __name__ == "__main__":
    asyncio.run(follow(sys.argv[1]))
