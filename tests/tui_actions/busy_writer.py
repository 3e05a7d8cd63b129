"""Run as a separate process by the concurrency test: writes continuously, like a busy engine.

Each round is two short write transactions from another connection: a fact upsert and a batch
of 50 events, then a 50 ms pause (so the facts it adds stay within the view's window). It
prints ``ready`` after the first round and, when the stop file appears (or after
``MAX_ROUNDS``), the number of rounds it completed.

Usage: python busy_writer.py WORKSPACE STOP_FILE
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from store.db.backends import open_database
from store.memory.memory_store import MemoryStore
from store.model.run_records import NewEvent
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

MAX_ROUNDS = 1_500


async def main(root: str, stop_file: str) -> None:
    db = await open_database(Workspace(Path(root)))
    try:
        memory = MemoryStore(db)
        runs = RunStore(db)
        await runs.create_run("busy-engine", run_id="run-busy")
        rounds = 0
        stop = Path(stop_file)
        while rounds < MAX_ROUNDS and not stop.exists():
            await memory.set_fact("workflow:busy", f"k{rounds}", {"round": rounds})
            await runs.append_events(
                [NewEvent("busy.tick", "run-busy", payload={"round": rounds})] * 50
            )
            rounds += 1
            if rounds == 1:
                print("ready", flush=True)
            await asyncio.sleep(0.05)
        print(rounds, flush=True)
    finally:
        await db.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
