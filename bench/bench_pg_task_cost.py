"""Where an engine task's time goes on PostgreSQL: the group thread's wall and CPU, and the
server backend's CPU and time spent runnable but waiting for a core, per task, then the
server's CPU per statement, the first of its kind in its transaction apart from the later ones,
and the relation locks a write transaction holds.

    eval "$(.ci/postgres-up)"; python bench/bench_pg_task_cost.py [--shapes chain fanout]

The shapes are bench_pg_engine.py's, at ``normal`` (``synchronous_commit=off``). The server's
figures come from ``/proc/<backend pid>/schedstat`` (nanoseconds on a core, and waiting for
one), so the server must run on this machine. Two passes per shape: as the engine runs
(pipelined groups), then with each statement sent alone (no pipeline, so that the server's CPU
can be read around each one; the same statements, one round trip each). Results: tables and
``bench/results/bench_pg_task_cost.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pg_engine as engine_bench
import psycopg
from pg_support import machine, write_results

from store.db.postgres import pg_connection, pg_database

BACKEND = "postgresql normal (sync_commit=off)"
NODES = engine_bench.NODES


def on_core_ms(pid: int) -> tuple[float, float]:
    """Milliseconds the process ``pid`` has run on a core, and waited runnable for one."""
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
        ran, waited, _slices = stat.read().split()
    return int(ran) / 1e6, int(waited) / 1e6


def per_group(shape: str) -> dict[str, float]:
    """One run with the engine's pipelined groups, timed around each group's transaction."""
    spent: collections.Counter[str] = collections.Counter()
    pipelined = pg_database.pipelined_transaction

    def timed(conn: psycopg.Connection[Any], *args: Any) -> Any:
        pid = conn.info.backend_pid
        ran, waited = on_core_ms(pid)
        started, used = time.perf_counter(), time.thread_time()
        try:
            return pipelined(conn, *args)
        finally:
            ran_after, waited_after = on_core_ms(pid)
            spent["group wall"] += (time.perf_counter() - started) * 1000
            spent["group thread CPU"] += (time.thread_time() - used) * 1000
            spent["server CPU"] += ran_after - ran
            spent["server waiting for a core"] += waited_after - waited

    pg_database.pipelined_transaction = timed  # type: ignore[assignment]
    try:
        elapsed = asyncio.run(engine_bench.run_once(BACKEND, shape))[0]
    finally:
        pg_database.pipelined_transaction = pipelined
    figures = {name: value / NODES for name, value in spent.items()}
    return {"run": elapsed * 1000 / NODES, **figures}


LOCKS = """SELECT count(*), count(*) FILTER (WHERE NOT fastpath) FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'relation' AND relation <> 'pg_locks'::regclass"""


def per_statement(shape: str) -> tuple[list[tuple[str, int, float]], dict[str, float]]:
    """One run with every statement sent alone: (statement, count, server CPU ms each), the
    first of a kind in its transaction apart from the later ones; and the relation locks each
    write transaction holds before its commit (all, and those past the fast-path slots)."""
    spent: collections.Counter[str] = collections.Counter()
    held: list[tuple[int, int]] = []
    counts: collections.Counter[str] = collections.Counter()
    seen: set[str] = set()
    originals = {name: getattr(psycopg.Cursor, name) for name in ("execute", "executemany")}

    def measured(original: Any) -> Any:
        def run(cursor: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
            text = query.decode() if isinstance(query, bytes) else str(query)
            kind = " ".join(text.split())[:48]
            if kind == "BEGIN":
                seen.clear()
            key = ("first  " if kind not in seen else "later  ") + kind
            seen.add(kind)
            pid = cursor.connection.info.backend_pid
            ran = on_core_ms(pid)[0]
            try:
                return original(cursor, query, *args, **kwargs)
            finally:
                spent[key] += on_core_ms(pid)[0] - ran
                counts[key] += 1

        return run

    for name, original in originals.items():
        setattr(psycopg.Cursor, name, measured(original))
    commit = pg_connection.commit_knowably

    def counting(conn: psycopg.Connection[Any], *args: Any) -> Any:
        row = conn.execute(LOCKS).fetchone()
        held.append((row[0], row[1]) if row else (0, 0))
        return commit(conn, *args)

    pg_connection.commit_knowably = counting  # type: ignore[assignment]
    pipelined = pg_database.pipelined_transaction
    pg_database.pipelined_transaction = pg_connection.one_transaction  # type: ignore[assignment]
    try:
        asyncio.run(engine_bench.run_once(BACKEND, shape))
    finally:
        pg_database.pipelined_transaction = pipelined
        pg_connection.commit_knowably = commit
        for name, original in originals.items():
            setattr(psycopg.Cursor, name, original)
    busiest = [key for key, _ in spent.most_common()
               if counts[key] >= NODES // 20 and "pg_locks" not in key]
    locks = {"relation locks per transaction": statistics.mean(a for a, _ in held),
             "of them past the fast-path slots": statistics.mean(b for _, b in held)}
    return [(key, counts[key], spent[key] / counts[key]) for key in busiest[:12]], locks


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["chain", "fanout"])
    args = parser.parse_args()
    info = machine()
    results: list[dict[str, Any]] = []
    for shape in args.shapes:
        groups = per_group(shape)
        print(f"{shape}: ms per task, pipelined groups as the engine runs them")
        for name, value in groups.items():
            print(f"  {name:<28} {value:7.3f}")
        statements, locks = per_statement(shape)
        print(f"{shape}: server CPU per statement, each sent alone (ms each, count)")
        for key, count, each in statements:
            print(f"  {each:7.3f}  {count:>5}  {key}")
        for name, value in locks.items():
            print(f"  {name}: {value:.1f}")
        results.append({"shape": shape, "per_task_ms": {k: round(v, 3) for k, v in groups.items()},
                        "locks": {k: round(v, 1) for k, v in locks.items()},
                        "server_cpu_ms_per_statement": [
                            {"statement": key, "count": count, "ms_each": round(each, 3)}
                            for key, count, each in statements]})
    print(f"load at start {info['load_at_start']}, at end {os.getloadavg()}")
    print(f"wrote {write_results('bench_pg_task_cost', info, results)}")


if __name__ == "__main__":
    main()
