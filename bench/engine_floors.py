"""The floors bench/bench_engine_overhead.py prints beside Tether, measured in the same run:

* the bare DAG walk: the same graph walked by asyncio tasks under the same concurrency limit,
  each node calling the same instant agent once, nothing written (what any engine costs at
  least in Python);
* one commit: a one-row INSERT and its COMMIT on a SQLite file in WAL at the same
  ``synchronous`` level, on the same file system (at ``full`` that is one ``fsync``): Tether's
  time per task over commits per task times this is how near it is to its durability floor;
* statements per task: counted on SQLite's own trace in a run that is not timed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WIDTH = 10


def layered(shape: str, n: int) -> dict[str, list[str]]:
    """node -> dependencies for ``chain``, ``layers`` and ``fanout`` (plan, items, join)."""
    graph: dict[str, list[str]] = {}
    if shape == "chain":
        for i in range(n):
            graph[f"n{i}"] = [f"n{i - 1}"] if i else []
    elif shape == "layers":
        for layer in range(max(1, n // WIDTH)):
            for i in range(WIDTH):
                deps = [] if layer == 0 else [f"n{layer - 1}_{i}",
                                              f"n{layer - 1}_{(i + 1) % WIDTH}"]
                graph[f"n{layer}_{i}"] = deps
    else:
        graph["plan"] = []
        for i in range(n - 2):
            graph[f"item{i}"] = ["plan"]
        graph["join"] = [f"item{i}" for i in range(n - 2)]
    return graph


async def bare_walk(shape: str, n: int, agent: Any, request_for: Callable[[str, str], Any]
                    ) -> dict[str, Any]:
    """Walk the graph with asyncio tasks, at most WIDTH at once, each node reading its
    dependencies' outputs and calling ``agent`` once; seconds and how many nodes ran."""
    graph = layered(shape, n)
    outputs: dict[str, str] = {}
    missing = {node: len(deps) for node, deps in graph.items()}
    dependents: dict[str, list[str]] = {node: [] for node in graph}
    for node, deps in graph.items():
        for dep in deps:
            dependents[dep].append(node)
    limit = asyncio.Semaphore(WIDTH)
    done = asyncio.Event()

    async def run(node: str) -> None:
        async with limit:
            prompt = f"do {node} after " + ",".join(outputs[d][:12] for d in graph[node][:2])
            result = await agent.run(request_for(node, prompt))
        outputs[node] = result.text
        for follower in dependents[node]:
            missing[follower] -= 1
            if missing[follower] == 0:
                tasks.add(asyncio.create_task(run(follower)))
        if len(outputs) == len(graph):
            done.set()

    tasks = {asyncio.create_task(run(node)) for node, count in missing.items() if count == 0}
    started, cpu = time.perf_counter(), time.process_time()
    await done.wait()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await asyncio.gather(*tasks)
    return {"seconds": elapsed, "cpu_seconds": cpu, "nodes": len(outputs)}


def commit_floor_ms(durability: str, rounds: int = 300) -> float:
    """Milliseconds per commit of a one-row INSERT on a WAL file at ``durability``."""
    with tempfile.TemporaryDirectory() as folder:
        conn = sqlite3.connect(Path(folder) / "floor.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {durability.upper()}")
        conn.execute("CREATE TABLE floor (n INTEGER)")
        started = time.perf_counter()
        for n in range(rounds):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO floor VALUES (?)", (n,))
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - started
        conn.close()
    return elapsed * 1000 / rounds


def count_statements() -> list[int]:
    """From now on, count every statement SQLite runs on connections opened afterwards (its
    trace); the one-element list holds the count."""
    counted = [0]
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def one(_text: str) -> None:
            counted[0] += 1

        conn.set_trace_callback(one)
        return conn

    sqlite3.connect = traced  # type: ignore[assignment]
    return counted
