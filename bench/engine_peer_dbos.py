"""DBOS Transact as bench/bench_engine_overhead.py's second peer: the same three shapes as one
durable workflow each, every node a step (its output checkpointed in the system database
before the workflow goes on: the promise Tether and LangGraph's ``sync`` mode make), the
system database in SQLite in WAL at the same ``synchronous`` level (set on every connection
DBOS opens and read back after the run). Layers and fan-outs run their steps with
``asyncio.gather``, at most ten at once, as the other engines do."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

WIDTH = 10
_FLOWS: dict[str, Any] = {}


def _flows() -> dict[str, Any]:
    """The workflows, registered with DBOS once per process (before it launches)."""
    if _FLOWS:
        return _FLOWS
    from dbos import DBOS

    @DBOS.step()
    async def node_step(name: str, upstream: str) -> str:
        return f"ok {name} after {upstream[:12]}"

    @DBOS.workflow()
    async def chain(n: int) -> int:
        last = ""
        for i in range(n):
            last = await node_step(f"n{i}", last)
        return n

    @DBOS.workflow()
    async def layers(n: int) -> int:
        above = [""] * WIDTH
        for layer in range(max(1, n // WIDTH)):
            above = list(await asyncio.gather(*[
                node_step(f"n{layer}_{i}", above[i] + above[(i + 1) % WIDTH])
                for i in range(WIDTH)
            ]))
        return max(1, n // WIDTH) * WIDTH

    @DBOS.workflow()
    async def fanout(n: int) -> int:
        plan = await node_step("plan", "")
        limit = asyncio.Semaphore(WIDTH)

        async def item(i: int) -> str:
            async with limit:
                return str(await node_step(f"item{i}", plan))

        answers = await asyncio.gather(*[item(i) for i in range(n - 2)])
        await node_step("join", str(len(answers)))
        return n

    _FLOWS.update(chain=chain, layers=layers, fanout=fanout)
    return _FLOWS


async def run_dbos(shape: str, sizes: tuple[int, ...], durability: str,
                   rss: Any) -> dict[str, Any]:
    """Run ``shape`` at each size in one launched DBOS (the first a warm-up); the last run's
    seconds, CPU seconds, nodes, RSS growth and the PRAGMAs read back."""
    import sqlalchemy as sa
    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    flows = _flows()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'dbos.sqlite'}"
        engine = sa.create_engine(url)

        @sa.event.listens_for(engine, "connect")
        def _configure(conn: Any, _record: Any) -> None:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {durability.upper()}")
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA foreign_keys = ON")

        DBOS(config={"name": "bench", "system_database_url": url,
                     "system_database_engine": engine, "run_admin_server": False})
        DBOS.launch()
        try:
            result: dict[str, Any] = {}
            for n in sizes:
                before = rss()
                started, cpu = time.perf_counter(), time.process_time()
                nodes = await flows[shape](n)
                result = {"seconds": time.perf_counter() - started,
                          "cpu_seconds": time.process_time() - cpu, "nodes": nodes,
                          "rss_growth": rss() - before}
            with engine.connect() as conn:
                journal = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar()).lower()
                level = int(conn.exec_driver_sql("PRAGMA synchronous").scalar() or 0)
            names = {0: "off", 1: "normal", 2: "full", 3: "extra"}
            result["pragmas"] = {"dbos": {"journal_mode": journal, "synchronous": names[level]}}
            return result
        finally:
            DBOS.destroy()
            engine.dispose()
