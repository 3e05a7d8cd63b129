"""Write throughput of facts and events through Tether vs raw sqlite3 with the same durability.

Both sides write the same rows into the same Tether-migrated schema (so the same indexes and
FTS triggers fire) in WAL mode with ``synchronous=NORMAL``:

* batched: Tether's ``MemoryStore.set_facts`` / ``RunStore.append_events`` (one transaction per
  batch) vs ``sqlite3.Connection.executemany`` with one transaction per batch;
* single: one Tether call per row (``set_fact`` / ``append_event``, each its own transaction)
  vs raw sqlite3 ``BEGIN IMMEDIATE; INSERT; COMMIT`` per row.

Run:  python bench/bench_memory_writes.py [--rows N]
Prints a table and writes bench/results/bench_memory_writes.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store.database import Database
from store.memory import MemoryStore
from store.run_records import NewEvent
from store.runs import RunStore
from store.sql import memory as memory_sql
from store.workspace import Workspace

RESULTS = Path(__file__).resolve().parent / "results" / "bench_memory_writes.json"
BATCH = 500
NAMESPACE = "workflow:bench"
EVENT_SQL = (
    "INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _value(index: int) -> dict[str, Any]:
    return {"step": index, "note": "prefer pytest -x and ruff before commit", "ok": True}


def _payload(index: int) -> dict[str, Any]:
    return {"tokens": {"input": 1200 + index % 97, "output": 300}, "bucket": "<50k"}


async def _fresh(root: Path, name: str) -> Database:
    return await Database.open(Workspace(root / name))


def _raw(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def _fact_rows(indexes: range, now: int) -> list[dict[str, Any]]:
    return [
        {"namespace": NAMESPACE, "key": f"k{i}", "value_json": json.dumps(_value(i)),
         "now": now, "ttl_ms": None, "run_id": "run-1", "node_id": "n", "iteration": 0}
        for i in indexes
    ]


def _event_rows(indexes: range, now: int) -> list[tuple[Any, ...]]:
    return [(now, "call", "run-1", "n", 0, 1, json.dumps(_payload(i))) for i in indexes]


def _batches(rows: int) -> list[range]:
    return [range(start, min(rows, start + BATCH)) for start in range(0, rows, BATCH)]


def _now() -> int:
    return int(time.time() * 1000)


# Each scenario writes ``rows`` rows into a fresh workspace and returns the seconds it took.
# Building rows (JSON encoding included) is inside the timing on both sides.


async def tether_facts_batched(db: Database, rows: int) -> float:
    store = MemoryStore(db)
    started = time.perf_counter()
    for batch in _batches(rows):
        await store.set_facts(NAMESPACE, {f"k{i}": _value(i) for i in batch},
                              run_id="run-1", node_id="n", iteration=0)
    return time.perf_counter() - started


def raw_facts_batched(conn: sqlite3.Connection, rows: int) -> float:
    started = time.perf_counter()
    for batch in _batches(rows):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(memory_sql.UPSERT_FACT_QUIET, _fact_rows(batch, _now()))
        conn.execute("COMMIT")
    return time.perf_counter() - started


async def tether_facts_single(db: Database, rows: int) -> float:
    store = MemoryStore(db)
    started = time.perf_counter()
    for i in range(rows):
        await store.set_fact(NAMESPACE, f"k{i}", _value(i), run_id="run-1", node_id="n")
    return time.perf_counter() - started


def raw_facts_single(conn: sqlite3.Connection, rows: int) -> float:
    started = time.perf_counter()
    for i in range(rows):
        (row,) = _fact_rows(range(i, i + 1), _now())
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(memory_sql.UPSERT_FACT, row).fetchall()
        conn.execute("COMMIT")
    return time.perf_counter() - started


async def tether_events_batched(db: Database, rows: int) -> float:
    runs = RunStore(db)
    started = time.perf_counter()
    for batch in _batches(rows):
        await runs.append_events([NewEvent("call", "run-1", "n", 0, 1, _payload(i))
                                  for i in batch])
    return time.perf_counter() - started


def raw_events_batched(conn: sqlite3.Connection, rows: int) -> float:
    started = time.perf_counter()
    for batch in _batches(rows):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(EVENT_SQL, _event_rows(batch, _now()))
        conn.execute("COMMIT")
    return time.perf_counter() - started


async def tether_events_single(db: Database, rows: int) -> float:
    runs = RunStore(db)
    started = time.perf_counter()
    for i in range(rows):
        await runs.append_event("call", run_id="run-1", node_id="n", iteration=0, attempt=1,
                                payload=_payload(i))
    return time.perf_counter() - started


def raw_events_single(conn: sqlite3.Connection, rows: int) -> float:
    started = time.perf_counter()
    for i in range(rows):
        (row,) = _event_rows(range(i, i + 1), _now())
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(EVENT_SQL, row)
        conn.execute("COMMIT")
    return time.perf_counter() - started


TetherScenario = Callable[[Database, int], Awaitable[float]]
RawScenario = Callable[[sqlite3.Connection, int], float]


async def compare(
    root: Path, what: str, rows: int, tether: TetherScenario, raw: RawScenario, repeats: int
) -> dict[str, Any]:
    """Best of ``repeats`` runs of each side, alternating, each on a fresh workspace."""
    tether_times, raw_times = [], []
    for attempt in range(repeats):
        db = await Database.open(Workspace(root / f"{what}-tether-{attempt}"))
        try:
            tether_times.append(await tether(db, rows))
        finally:
            await db.close()
        raw_root = root / f"{what}-raw-{attempt}"
        await (await Database.open(Workspace(raw_root))).close()  # same migrated schema
        conn = _raw(raw_root / "tether.db")
        try:
            raw_times.append(raw(conn, rows))
        finally:
            conn.close()
    return _row(what, rows, min(tether_times), min(raw_times))


def _row(what: str, rows: int, tether_s: float, raw_s: float) -> dict[str, Any]:
    return {
        "what": what,
        "rows": rows,
        "tether_rows_per_s": round(rows / tether_s),
        "raw_rows_per_s": round(rows / raw_s),
        "ratio_raw_over_tether": round(tether_s / raw_s, 2),
    }


def machine() -> dict[str, Any]:
    """The machine facts docs/benchmarks/ quotes next to the figures."""
    import os

    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


async def main(rows: int, single_rows: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-bench-writes-") as folder:
        root = Path(folder)
        results = [
            await compare(root, "facts, batches of 500", rows, tether_facts_batched,
                          raw_facts_batched, repeats),
            await compare(root, "facts, one transaction each", single_rows,
                          tether_facts_single, raw_facts_single, repeats),
            await compare(root, "events, batches of 500", rows, tether_events_batched,
                          raw_events_batched, repeats),
            await compare(root, "events, one transaction each", single_rows,
                          tether_events_single, raw_events_single, repeats),
        ]
    print(f"{'write path':30} {'rows':>7} {'tether rows/s':>14} {'raw rows/s':>11} "
          f"{'tether time / raw':>18}")
    for r in results:
        print(f"{r['what']:30} {r['rows']:>7} {r['tether_rows_per_s']:>14} "
              f"{r['raw_rows_per_s']:>11} {r['ratio_raw_over_tether']:>17}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {"machine": machine(), "repeats": repeats, "results": results}
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000, help="rows per batched test")
    parser.add_argument("--single-rows", type=int, default=3_000, help="rows per single test")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rows, arguments.single_rows, arguments.repeats))
