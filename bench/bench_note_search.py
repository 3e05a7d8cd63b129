"""Note search latency at 100k and 1M notes: Tether's BM25 search vs full-scan keyword matching.

Notes are generated with a Zipf-like word distribution (a few words occur in most notes, most
words are rare), spread over 50 namespaces, with some pending/rejected notes and accepted
superseders, so the read contract has work to do. Queries are grouped by how common their words
are: rare, mid-frequency, very common, and two-word mixes (including all-common pairs).

The baseline is what the reference system's local recall does: read every accepted note, count
query words occurring as substrings, sort by count then recency. Both run in this process on
the same database.

Generated databases are cached under /tmp/tether-bench-notes/ (generation uses raw sqlite3
``executemany`` into a Tether-migrated database; the FTS index is built by the schema's own
triggers).

Run:  python bench/bench_note_search.py [--sizes 100000 1000000]
Prints a table and writes bench/results/bench_note_search.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_memory_writes import machine

from store.clock import SYSTEM_CLOCK
from store.database import Database
from store.memory import MemoryStore
from store.schema import SCHEMA_VERSION
from store.search_policy import COMMON_DF, RANK_POOL, RECENT_POOL
from store.workspace import Workspace

CACHE = Path("/tmp/tether-bench-notes")
RESULTS = Path(__file__).resolve().parent / "results" / "bench_note_search.json"
GENERATOR_VERSION = 2
VOCABULARY = 30_000
NAMESPACES = 50
# Query groups whose label ends in "1 namespace" search only this one (queries are prefixed).
SCOPED = "workflow:project-7"
LIMIT = 10

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]


def word(rank: int) -> str:
    """A distinct pronounceable word for each rank (letters only, so it tokenizes as one)."""
    parts = []
    value = rank
    while True:
        value, digit = divmod(value, len(_SYLLABLES))
        parts.append(_SYLLABLES[digit])
        if value == 0:
            break
    return "".join(parts) + "n"


async def generate(path: Path, count: int) -> None:
    """Write ``count`` notes into a fresh Tether database at ``path`` (seeded, reproducible)."""
    await (await Database.open(Workspace(path.parent))).close()
    rng = random.Random(count)
    words = [word(rank) for rank in range(VOCABULARY)]
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(VOCABULARY)))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    start_ms = 1_700_000_000_000
    chunk = 50_000
    for first in range(0, count, chunk):
        notes, edges = [], []
        for index in range(first, min(count, first + chunk)):
            length = rng.randint(8, 24)
            body = " ".join(rng.choices(words, cum_weights=weights, k=length))
            roll = rng.random()
            status = "pending" if roll < 0.06 else "rejected" if roll < 0.09 else "accepted"
            notes.append((f"n{index}", f"workflow:project-{index % NAMESPACES}", body, status,
                          start_ms + index * 1000))
            # About 1 in 50 notes supersedes an older note of its namespace.
            if index >= 10 * NAMESPACES and rng.random() < 0.02:
                target = index - NAMESPACES * rng.randint(1, 10)
                edges.append((f"n{index}", f"n{target}", start_ms + index * 1000))
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO notes (id, namespace, body, status, created_at_ms) VALUES (?,?,?,?,?)",
            notes,
        )
        conn.executemany(
            "INSERT INTO note_supersessions (note_id, supersedes_id, created_at_ms) "
            "VALUES (?,?,?)",
            edges,
        )
        conn.execute("COMMIT")
    conn.execute("INSERT INTO notes_fts (notes_fts) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def database_for(count: int) -> Path:
    """The cached generated database for ``count`` notes (generated on first use)."""
    folder = CACHE / f"notes-{count}-g{GENERATOR_VERSION}-s{SCHEMA_VERSION}"
    if not folder.exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        started = time.perf_counter()
        print(f"generating {count:,} notes into {folder} ...", flush=True)
        await generate(partial / "tether.db", count)
        partial.rename(folder)  # only a complete database is ever cached
        print(f"  done in {time.perf_counter() - started:.1f}s", flush=True)
    return folder / "tether.db"


def pick_queries(path: Path) -> dict[str, list[str]]:
    """Query words by class, chosen by their real document counts in this database."""
    conn = sqlite3.connect(path)
    total = conn.execute("SELECT count(*) FROM notes").fetchone()[0]

    def near(fraction: float, n: int) -> list[str]:
        rows = conn.execute(
            "SELECT term FROM notes_fts_vocab ORDER BY abs(doc - ?) LIMIT ?",
            (fraction * total, n),
        ).fetchall()
        return [row[0] for row in rows]

    common = [row[0] for row in conn.execute(
        "SELECT term FROM notes_fts_vocab ORDER BY doc DESC LIMIT 5").fetchall()]
    rare = near(0.0001, 8)
    mid = near(0.01, 8)
    conn.close()
    return {
        "rare word": rare,
        "mid-frequency word": mid,
        "very common word": common,
        "two common words": [f"{a} {b}" for a, b in itertools.combinations(common[:4], 2)],
        "common + rare": [f"{c} {r}" for c, r in zip(itertools.cycle(common), rare, strict=False)],
        "two mid words": [f"{a} {b}" for a, b in zip(mid[::2], mid[1::2], strict=True)],
        # The same words searched inside one namespace (1 of 50).
        "rare, 1 namespace": [f"{SCOPED} {term}" for term in rare],
        "mid, 1 namespace": [f"{SCOPED} {term}" for term in mid],
        "common, 1 namespace": [f"{SCOPED} {term}" for term in common],
    }


def _scope(query: str) -> tuple[str | None, str]:
    """Split a bench query into (namespace or None, words)."""
    if query.startswith(SCOPED + " "):
        return SCOPED, query[len(SCOPED) + 1:]
    return None, query


def baseline_search(conn: sqlite3.Connection, query: str, limit: int) -> list[str]:
    """Full-scan keyword matching as the reference's local recall does it (one namespace
    read through its index when scoped, like listing a bank's facts)."""
    namespace, words = _scope(query)
    terms = [term for term in words.lower().split() if term]
    scored = []
    sql = "SELECT id, body, created_at_ms FROM notes WHERE status = 'accepted'"
    params: tuple[str, ...] = ()
    if namespace is not None:
        sql += " AND namespace = ?"
        params = (namespace,)
    for note_id, body, created in conn.execute(sql, params):
        text = body.lower()
        score = sum(1 for term in terms if term in text)
        if score:
            scored.append((-score, -created, note_id))
    scored.sort()
    return [note_id for _, _, note_id in scored[:limit]]


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


async def measure(count: int, rounds: int, baseline_rounds: int) -> list[dict[str, Any]]:
    path = await database_for(count)
    queries = pick_queries(path)
    store = MemoryStore(
        await Database.open(Workspace(path.parent), create=False, clock=SYSTEM_CLOCK),
        owns_db=True,
    )
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA cache_size = -262144")
    results = []
    try:
        for query in itertools.chain.from_iterable(queries.values()):  # warm the caches
            namespace, words = _scope(query)
            await store.search_notes(words, namespace=namespace, limit=LIMIT)
        for label, group in queries.items():
            samples: list[float] = []
            hits = 0
            for _ in range(rounds):
                for query in group:
                    started = time.perf_counter()
                    namespace, words = _scope(query)
                    found = await store.search_notes(words, namespace=namespace, limit=LIMIT)
                    samples.append((time.perf_counter() - started) * 1000)
                    hits += len(found)
            base_samples: list[float] = []
            for _ in range(baseline_rounds):
                for query in group[:2]:
                    started = time.perf_counter()
                    baseline_search(raw, query, LIMIT)
                    base_samples.append((time.perf_counter() - started) * 1000)
            p50, p95 = _percentiles(samples)
            b50, b95 = _percentiles(base_samples)
            counts = [raw.execute("SELECT doc FROM notes_fts_vocab WHERE term = ?",
                                  (term,)).fetchone()[0]
                      for term in _scope(group[0])[1].split()]
            results.append({
                "notes": count,
                "query class": label,
                "example": group[0],
                "example notes per word": counts,
                "tether p50 ms": round(p50, 2),
                "tether p95 ms": round(p95, 2),
                "baseline p50 ms": round(b50, 1),
                "baseline p95 ms": round(b95, 1),
                "speed-up at p50": round(b50 / p50),
                "hits per query": round(hits / max(1, len(samples)), 1),
            })
    finally:
        raw.close()
        await store.close()
    return results


async def main(sizes: list[int], rounds: int) -> None:
    results = []
    for count in sizes:
        baseline_rounds = 3 if count <= 100_000 else 1
        results += await measure(count, rounds, baseline_rounds)
    header = (f"{'notes':>9}  {'query class':20} {'tether p50':>10} {'p95':>7}  "
              f"{'full scan p50':>13} {'p95':>8}  {'speed-up':>8}")
    print(header)
    for r in results:
        print(f"{r['notes']:>9,}  {r['query class']:20} {r['tether p50 ms']:>8.2f}ms "
              f"{r['tether p95 ms']:>5.2f}ms  {r['baseline p50 ms']:>11.1f}ms "
              f"{r['baseline p95 ms']:>6.1f}ms  {r['speed-up at p50']:>7}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": machine(),
        "limit": LIMIT,
        "common_df": COMMON_DF,
        "rank_pool": RANK_POOL,
        "recent_pool": RECENT_POOL,
        "results": results,
    }
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds per query")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.sizes, arguments.rounds))
