"""Importing notes: Tether's batch API (``MemoryStore.save_notes``, what ``tether notes import``
calls) against raw ``sqlite3`` ``executemany`` into the same migrated schema (same indexes, the
same full-text triggers), at the same durability on both sides (WAL, ``synchronous=NORMAL``,
verified), building rows and encoding JSON inside the timing on both sides. Also one note per
transaction (``save_note``) against raw single-row transactions.

    python bench/bench_notes_import.py [--rows 50000] [--batch 5000] [--rounds 3]

Rounds are interleaved (Tether, raw, Tether, raw...); the best of each is kept. Writes
bench/results/bench_notes_import.json with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_memory_writes import machine

from store.db.backends import open_database
from store.db.seam import Database
from store.memory.memory_sql import INSERT_NOTE_AT
from store.memory.memory_store import MemoryStore
from store.memory.note_values import NoteInput
from store.workspace.layout import Workspace

RESULTS = Path(__file__).resolve().parent / "results" / "bench_notes_import.json"
WORDS = (
    "retry", "flaky", "fixture", "parser", "deploy", "canary", "budget", "module", "cache",
    "lint", "rollback", "queue", "schema", "migration", "index", "latency",
)


def body(index: int) -> str:
    return " ".join(WORDS[(index * k) % len(WORDS)] for k in (1, 3, 5, 7, 11, 13)) + f" #{index}"


def inputs(first: int, count: int) -> list[NoteInput]:
    return [NoteInput(f"workflow:bank{i % 10}", body(i), id=f"n{i}", tags=("source:import",),
                      author="bench") for i in range(first, first + count)]


def raw_rows(first: int, count: int, now: int) -> list[dict[str, Any]]:
    return [{"id": f"n{i}", "namespace": f"workflow:bank{i % 10}", "body": body(i),
             "kind": None, "tags_json": json.dumps(["source:import"]), "author": "bench",
             "status": "accepted", "run_id": None, "node_id": None, "iteration": None,
             "created_at_ms": now} for i in range(first, first + count)]


async def fresh(root: Path, name: str) -> Database:
    return await open_database(Workspace(root / name))


def pragmas(conn: sqlite3.Connection) -> tuple[str, int]:
    return (str(conn.execute("PRAGMA journal_mode").fetchone()[0]),
            int(conn.execute("PRAGMA synchronous").fetchone()[0]))


async def tether_batches(root: Path, name: str, rows: int, batch: int) -> tuple[float, Any]:
    db = await fresh(root, name)
    store = MemoryStore(db)
    started = time.perf_counter()
    for first in range(0, rows, batch):
        await store.save_notes(inputs(first, min(batch, rows - first)))
    elapsed = time.perf_counter() - started
    state = await db.run_read(pragmas)
    await db.close()
    return elapsed, state


async def raw_batches(root: Path, name: str, rows: int, batch: int) -> tuple[float, Any]:
    await (await fresh(root, name)).close()
    conn = sqlite3.connect(root / name / "tether.db", isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    started = time.perf_counter()
    for first in range(0, rows, batch):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT_NOTE_AT, raw_rows(first, min(batch, rows - first),
                                                  int(time.time() * 1000)))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    state = pragmas(conn)
    conn.close()
    return elapsed, state


async def tether_single(root: Path, name: str, rows: int) -> tuple[float, Any]:
    db = await fresh(root, name)
    store = MemoryStore(db)
    started = time.perf_counter()
    for note in inputs(0, rows):
        await store.save_note(note.namespace, note.body, note_id=note.id, tags=note.tags,
                              author=note.author)
    elapsed = time.perf_counter() - started
    state = await db.run_read(pragmas)
    await db.close()
    return elapsed, state


async def raw_single(root: Path, name: str, rows: int) -> tuple[float, Any]:
    await (await fresh(root, name)).close()
    conn = sqlite3.connect(root / name / "tether.db", isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    started = time.perf_counter()
    for row in raw_rows(0, rows, int(time.time() * 1000)):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT_NOTE_AT, row)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    state = pragmas(conn)
    conn.close()
    return elapsed, state


async def main(rows: int, batch: int, single_rows: int, rounds: int) -> None:
    load_before = os.getloadavg()
    best: dict[str, float] = {}
    states: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tether-bench-import-") as folder:
        root = Path(folder)
        for round_number in range(rounds):
            for label, run in (
                ("tether save_notes", lambda n: tether_batches(root, n, rows, batch)),
                ("raw executemany", lambda n: raw_batches(root, n, rows, batch)),
                ("tether save_note", lambda n: tether_single(root, n, single_rows)),
                ("raw one per transaction", lambda n: raw_single(root, n, single_rows)),
            ):
                elapsed, state = await run(f"{label.replace(' ', '-')}-{round_number}")
                best[label] = min(best.get(label, elapsed), elapsed)
                states[label] = state
    assert len({tuple(s) for s in states.values()}) == 1, states  # same durability everywhere
    table = [
        {"write path": "batches (save_notes vs executemany)", "rows": rows, "batch": batch,
         "tether rows/s": round(rows / best["tether save_notes"]),
         "raw rows/s": round(rows / best["raw executemany"]),
         "tether / raw": round(best["tether save_notes"] / best["raw executemany"], 2)},
        {"write path": "one per transaction (save_note vs raw)", "rows": single_rows, "batch": 1,
         "tether rows/s": round(single_rows / best["tether save_note"]),
         "raw rows/s": round(single_rows / best["raw one per transaction"]),
         "tether / raw": round(best["tether save_note"] / best["raw one per transaction"], 2)},
    ]
    journal, synchronous = next(iter(states.values()))
    for row in table:
        print(row)
    print(f"durability on both sides: journal_mode={journal}, synchronous={synchronous} "
          "(1 = NORMAL)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": machine(), "journal_mode": journal, "synchronous": synchronous,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "results": table,
    }, indent=2) + "\n")
    print(f"wrote {RESULTS}; load average {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--single-rows", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    a = parser.parse_args()
    asyncio.run(main(a.rows, a.batch, a.single_rows, a.rounds))
