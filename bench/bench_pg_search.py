"""Recall and note search latency on PostgreSQL beside SQLite, on the same generated notes, in
the same run (both rank with the per-bank term index, fed by each backend's statements).

    eval "$(.ci/postgres-up)"; python bench/bench_pg_search.py [--sizes 100000 1000000]

Notes: Zipf-like words (a few occur in most notes, most are rare) plus three very common words
each, spread over 10 banks. Queries: a task-prompt sentence (recall ``auto``), rare words, and
very common words; recall reads one bank, note search the same bank. Each query runs
``--repeat`` times per backend, rounds interleaved; p50 and p95 are reported, and the answers of
the two backends are compared (top-10 overlap). Generated workspaces are kept between runs:
SQLite under /tmp/tether-bench-pg-search/, PostgreSQL in schemas ``bench_search_<size>_g<N>``
(``--fresh`` rebuilds them). Results: a table and ``bench/results/bench_pg_search.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pg_support import machine, percentile, server_url, write_results  # noqa: E402

from engine.memory.keyword_recall import KeywordRecallBackend  # noqa: E402
from engine.memory.recall_items import RecallRequest  # noqa: E402
from store.db.backends import open_database  # noqa: E402
from store.db.seam import Database  # noqa: E402
from store.memory.memory_store import MemoryStore  # noqa: E402
from store.workspace.layout import Workspace  # noqa: E402

CACHE = Path("/tmp/tether-bench-pg-search")
GENERATOR = 2
BANKS = [f"workflow:bank{i}" for i in range(10)]
COMMON = ["the", "and", "test", "run", "fix"]
VOCABULARY = [f"w{i}" for i in range(5000)]
QUERIES = {
    "task prompt": "Review the flaky test in the parser module and fix the retry budget w17 w4242",
    "rare words": "w1500 w2100",
    "common words": "the and test run fix",
}


def rows(count: int) -> list[tuple[str, str, str, int]]:
    """``(id, bank, body, created_at_ms)``: 3 common words and 12 Zipf-distributed ones."""
    rng = random.Random(count)
    out = []
    for i in range(count):
        words = rng.sample(COMMON, 3)
        while len(words) < 15:
            rank = int(rng.paretovariate(0.8)) - 1
            if rank < len(VOCABULARY):
                words.append(VOCABULARY[rank])
        out.append((f"n{i}", BANKS[i % len(BANKS)], " ".join(words), 1_700_000_000_000 + i))
    return out


async def sqlite_workspace(count: int, notes: list[tuple[str, str, str, int]] | None,
                           fresh: bool) -> Workspace:
    folder = CACHE / f"notes-{count}-g{GENERATOR}"
    workspace = Workspace(folder)
    if workspace.database_path.exists() and not fresh:
        return workspace
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    await (await open_database(workspace)).close()
    assert notes is not None
    conn = sqlite3.connect(workspace.database_path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO notes (id, namespace, body, status, created_at_ms) "
        "VALUES (?, ?, ?, 'accepted', ?)", notes,
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return workspace


async def pg_workspace(count: int, notes: list[tuple[str, str, str, int]] | None,
                       fresh: bool) -> Workspace:
    import psycopg

    schema = f"bench_search_{count}_g{GENERATOR}"
    base = server_url()
    separator = "&" if "?" in base else "?"
    url = f"{base}{separator}options={quote(f'-csearch_path={schema}')}"
    workspace = Workspace(CACHE / f"pg-{count}", url)
    with psycopg.connect(base, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = 'notes'", (schema,)).fetchone()
        if exists and not fresh:
            return workspace
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    await (await open_database(workspace)).close()
    assert notes is not None
    with psycopg.connect(url) as conn:
        with conn.cursor().copy(
            "COPY notes (id, namespace, body, status, created_at_ms) FROM STDIN"
        ) as copy:
            for note_id, bank, body, at in notes:
                copy.write_row([note_id, bank, body, "accepted", at])
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE notes")
    return workspace


async def timed(call: Any) -> tuple[float, list[str]]:
    started = time.perf_counter()
    ids = await call()
    return (time.perf_counter() - started) * 1000, ids


async def measure(count: int, repeat: int, fresh: bool) -> list[dict[str, Any]]:
    CACHE.mkdir(exist_ok=True)
    needs = fresh or not (CACHE / f"notes-{count}-g{GENERATOR}" / "tether.db").exists()
    notes = rows(count) if needs or fresh else None
    lite_ws = await sqlite_workspace(count, notes, fresh)
    try:
        pg_ws = await pg_workspace(count, notes, fresh)
    except AssertionError:
        pg_ws = await pg_workspace(count, rows(count), True)
    results = []
    async with await open_database(lite_ws, create=False) as lite, \
            await open_database(pg_ws, create=False) as pg:
        dbs = {"sqlite": lite, "postgresql": pg}
        for kind in ("recall", "notes search"):
            for label, query in QUERIES.items():
                times: dict[str, list[float]] = {name: [] for name in dbs}
                answers: dict[str, list[str]] = {}
                for _ in range(repeat):
                    for name, db in dbs.items():
                        call = _recall(db, query) if kind == "recall" else _search(db, query)
                        ms, ids = await timed(call)
                        times[name].append(ms)
                        answers[name] = ids
                overlap = len(set(answers["sqlite"]) & set(answers["postgresql"]))
                for name in dbs:
                    results.append({
                        "notes": count, "kind": kind, "query": label, "backend": name,
                        "p50_ms": round(percentile(times[name], 50), 2),
                        "p95_ms": round(percentile(times[name], 95), 2),
                        "results": len(answers[name]),
                        "overlap_with_other_backend": overlap,
                    })
    return results


def _recall(db: Database, query: str) -> Any:
    backend = KeywordRecallBackend(db)

    async def call() -> list[str]:
        found = await backend.recall(RecallRequest((BANKS[3],), query, limit=10))
        return [item.id for item in found.items]

    return call


def _search(db: Database, query: str) -> Any:
    memory = MemoryStore(db)

    async def call() -> list[str]:
        hits = await memory.search_notes(query, namespace=BANKS[3], limit=10)
        return [hit.note.id for hit in hits]

    return call


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--fresh", action="store_true")
    args = parser.parse_args()
    info = machine()
    results = []
    for size in args.sizes:
        results += asyncio.run(measure(size, args.repeat, args.fresh))
    print(f"{'notes':>8} {'kind':<13} {'query':<13} {'backend':<11} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'hits':>4} {'same':>4}")
    for r in results:
        print(f"{r['notes']:>8} {r['kind']:<13} {r['query']:<13} {r['backend']:<11} "
              f"{r['p50_ms']:>7} {r['p95_ms']:>7} {r['results']:>4} "
              f"{r['overlap_with_other_backend']:>4}")
    print(f"load at start {info['load_at_start']}")
    print(f"wrote {write_results('bench_pg_search', info, results)}")


if __name__ == "__main__":
    main()
