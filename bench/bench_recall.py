"""Recall + memory-block assembly latency at 10k, 100k and 1M notes, against the reference's
local recall (a full scan: lower-case substring term counting over every row) in the same run.

    /work/venv/bin/python bench/bench_recall.py            # 10k, 100k, 1M (a few minutes)
    /work/venv/bin/python bench/bench_recall.py --sizes 10000 100000

Queries: a task-prompt-like sentence (``auto`` recall), a rare-word query and a query made of
very common words. Notes sit in 10 banks; recall reads one. Prints a table and writes
``bench/results/bench_recall.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from engine.memory.block import build_block
from engine.memory.items import RecallItem, RecallRequest
from engine.memory.recall import LocalRecallBackend
from store.database import Database
from store.workspace import Workspace

WORDS = [f"w{i}" for i in range(5000)]
COMMON = ["the", "and", "test", "run", "fix"]
QUERIES = {
    "task prompt": "Review the flaky test in the parser module and fix the retry budget w17 w4242",
    "rare words": "w4999 w4998",
    "common words": "the and test run fix",
}
BANKS = [f"workflow:bank{i}" for i in range(10)]
REPEATS = 40


def zipf_word(rng: random.Random) -> str:
    """A word from a Zipf-like vocabulary: w0 is very common, w4999 rare."""
    while True:
        rank = int(rng.paretovariate(0.8)) - 1
        if rank < len(WORDS):
            return WORDS[rank]


def make_rows(count: int, seed: int = 1) -> list[tuple[str, str, str, str, int]]:
    """Notes of 3 very common words and 12 Zipf-distributed ones, spread over 10 banks."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        body = " ".join([*rng.sample(COMMON, 3)] + [zipf_word(rng) for _ in range(12)])
        rows.append((f"n{i}", BANKS[i % 10], body, "accepted", i))
    return rows


def baseline(conn: sqlite3.Connection, namespace: str, query: str) -> list[tuple[str, str]]:
    """The reference's local recall: every row of the bank, substring term counts, sorted."""
    terms = [t for t in query.lower().split() if t]
    scored = []
    for note_id, body, created in conn.execute(
        "SELECT id, body, created_at_ms FROM notes WHERE namespace = ? AND status = 'accepted'",
        (namespace,),
    ):
        haystack = body.lower()
        score = sum(1 for t in terms if t in haystack)
        if score:
            scored.append((score, created, note_id, body))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    return [(s[2], s[3]) for s in scored[:16]]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench_size(count: int) -> list[dict[str, object]]:
    folder = Path(tempfile.mkdtemp(prefix="tether-bench-recall-"))
    db = await Database.open(Workspace(folder / ".tether"))
    rows = make_rows(count)
    for start in range(0, count, 50_000):
        await db.execute_many(
            "INSERT INTO notes (id, namespace, body, status, created_at_ms) VALUES (?,?,?,?,?)",
            rows[start : start + 50_000],
        )
    backend = LocalRecallBackend(db)
    raw = sqlite3.connect(folder / ".tether" / "tether.db")
    results = []
    for label, query in QUERIES.items():
        ours: list[float] = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            result = await backend.recall(RecallRequest((BANKS[3],), query))
            build_block(result.items, 2048)
            ours.append((time.perf_counter() - started) * 1000)
        base: list[float] = []
        for _ in range(max(3, REPEATS // 8)):
            started = time.perf_counter()
            found = baseline(raw, BANKS[3], query)
            build_block(
                [RecallItem(f"note:{i}", "note", BANKS[3], None, b, 1.0) for i, b in found], 2048
            )
            base.append((time.perf_counter() - started) * 1000)
        results.append(
            {
                "notes": count,
                "query": label,
                "p50_ms": round(statistics.median(ours), 3),
                "p95_ms": round(pct(ours, 0.95), 3),
                "baseline_p50_ms": round(statistics.median(base), 3),
                "baseline_p95_ms": round(pct(base, 0.95), 3),
            }
        )
    raw.close()
    await db.close()
    shutil.rmtree(folder, ignore_errors=True)
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    table = []
    for size in args.sizes:
        table += await bench_size(size)
    header = ("notes", "query", "p50 ms", "p95 ms", "scan p50", "scan p95")
    print("{:>9}  {:<13} {:>8} {:>8} {:>9} {:>9}".format(*header))
    for r in table:
        print(f"{r['notes']:>9}  {r['query']:<13} {r['p50_ms']:>8} {r['p95_ms']:>8} "
              f"{r['baseline_p50_ms']:>9} {r['baseline_p95_ms']:>9}")
    out = Path(__file__).parent / "results" / "bench_recall.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "recall + block assembly vs full-scan keyword recall",
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine()},
        "results": table,
    }, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main())
