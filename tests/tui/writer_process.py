"""Run as a separate process by the tests: writes runs into a workspace while the app watches.

Usage: python writer_process.py WORKSPACE COUNT INTERVAL_S
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace


async def main(root: str, count: int, interval: float) -> None:
    db = await open_database(Workspace(Path(root)))
    try:
        store = RunStore(db)
        for n in range(count):
            await store.create_run("from-another-process", run_id=f"run-ext-{n}", nodes_total=1)
            await store.upsert_node(f"run-ext-{n}", "only", 0, "running")
            await asyncio.sleep(interval)
    finally:
        await db.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
