"""Recall + memory-block assembly latency at 10k, 100k and 1M notes: keyword recall (exact
per-bank BM25) and hybrid recall, against the reference's local recall (a full scan:
lower-case substring term counting over every row) in the same run, with overlap against exact
BM25 computed by ``bm25s`` over the bank's live notes.

    python bench/bench_recall.py                        # 10k, 100k, 1M (several minutes)
    python bench/bench_recall.py --sizes 10000 100000

Queries: a task-prompt-like sentence (``auto`` recall), a rare-word query and a query made of
very common words (which the weak-match guard answers with nothing: every word is in most
notes of the bank). Notes sit in 10 banks; recall reads one (10% of the notes).

Hybrid: the bank's notes get random unit vectors written straight into ``memory_vectors``
(embedding a million notes with the real model would take hours here, and the search costs the
same whatever the vectors hold); the query is embedded by the real model (the default encoder,
int8 ONNX MiniLM). Hybrid is timed twice: with a fresh query every time (its embedding is not
cached: the encoder is the cost) and with the query repeated (a retried node, a loop's prompt:
its embedding comes from the cache). Beside them, in the same run: the encoder alone on the
focused query (the floor of a fresh hybrid recall), and the numpy floor of the vector search
(one float32 matrix-vector product and a partial sort over the bank's vectors) beside Tether's
own vector search (int8 codes, exact re-rank, reading the items), with the overlap of Tether's
semantic top 10 against the floor (exact ranking: 1.00). Needs the semantic extra; without it
only keyword is measured. The long task prompt (200 words) shows what focusing the query saves.

Databases are cached under /tmp/tether-bench-recall/. Prints a table and writes
``bench/results/bench_recall.json`` with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_memory_writes import machine

from engine.memory import semantic_recall
from engine.memory.block import build_block
from engine.memory.encoders import KINDS, load_encoder
from engine.memory.keyword_recall import KeywordRecallBackend
from engine.memory.query_text import focus_query
from engine.memory.recall_items import RecallItem, RecallRequest
from engine.memory.semantic_recall import HybridRecallBackend
from store.clock import SYSTEM_CLOCK
from store.db.backends import open_database
from store.db.sqlite.sqlite_schema import SCHEMA_VERSION
from store.search.search_policy import index_terms, prompt_terms, weak_terms
from store.workspace.layout import Workspace

WORDS = [f"w{i}" for i in range(5000)]
COMMON = ["the", "and", "test", "run", "fix"]
LONG_PROMPT = " ".join(
    ["You are reviewing a change to the payments service before it ships to production."]
    + [f"Step {i}: read the diff, check the tests for the parser module, the retry budget and "
       f"the flaky fixtures, and note anything about w{17 + i} or w{4242 - i} in the change."
       for i in range(7)]
    + ["Report the findings and decide whether to approve."])
QUERIES = {
    "task prompt": "Review the flaky test in the parser module and fix the retry budget w17 w4242",
    "long task prompt": LONG_PROMPT,
    "rare words": "w120 w121",
    "common words": "the and test run fix",
}
ENCODER = KINDS["minilm-onnx-int8"]
MODEL_ID, DIM = ENCODER.model_id, ENCODER.dim
BANKS = [f"workflow:bank{i}" for i in range(10)]
BANK = BANKS[3]
REPEATS = 40
CACHE = Path("/tmp/tether-bench-recall")
RESULTS = Path(__file__).resolve().parent / "results" / "bench_recall.json"


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


async def database_for(count: int) -> Path:
    folder = CACHE / f"recall-{count}-s{SCHEMA_VERSION}-{MODEL_ID}"
    if not folder.exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        print(f"generating {count:,} notes ...", flush=True)
        await (await open_database(Workspace(partial))).close()
        conn = sqlite3.connect(partial / "tether.db", isolation_level=None)
        conn.execute("PRAGMA synchronous = OFF")
        rows = make_rows(count)
        rng = np.random.default_rng(7)
        for start in range(0, count, 50_000):
            conn.execute("BEGIN")
            chunk = rows[start:start + 50_000]
            conn.executemany(
                "INSERT INTO notes (id, namespace, body, status, created_at_ms) "
                "VALUES (?,?,?,?,?)", chunk)
            vectors = rng.standard_normal((len(chunk), DIM)).astype("<f4")
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            conn.executemany(
                "INSERT INTO memory_vectors (ref, model, namespace, source_rowid, dim, vector, "
                "created_at_ms) VALUES (?, ?, ?, ?, ?, ?, 0)",
                [(f"note:{r[0]}", MODEL_ID, r[1], start + i + 1, DIM, vectors[i].tobytes())
                 for i, r in enumerate(chunk) if r[1] == BANK])
            conn.execute("COMMIT")
        conn.execute("INSERT INTO vector_progress (model, source, mark) VALUES (?, 'note', ?)",
                     (MODEL_ID, count))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        partial.rename(folder)
    return folder


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


class ExactReference:
    """Exact BM25 (bm25s, lucene) of the bank's live notes, any word, with the weak-match
    guard applied the same way: the floor recall must equal."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.ids = [r[0] for r in rows]
        self.tokens = [index_terms(r[1]) for r in rows]
        self.retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        self.retriever.index(self.tokens, show_progress=False)
        self.sets = [set(t) for t in self.tokens]

    def top(self, query: str, k: int) -> tuple[dict[str, float], float]:
        terms = [t for t in prompt_terms(query) if t in self.retriever.vocab_dict]
        if not terms:
            return {}, 0.0
        df = {t: sum(1 for s in self.sets if t in s) for t in terms}
        weak = weak_terms(df, len(self.sets))
        scores = self.retriever.get_scores(terms)
        found = {self.ids[i]: float(scores[i]) for i, s in enumerate(self.sets)
                 if any(t in s and t not in weak for t in terms)}
        ordered = sorted(found.values(), reverse=True)
        return found, (ordered[min(k, len(ordered)) - 1] if ordered else 0.0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench_size(count: int, hybrid_on: bool) -> list[dict[str, Any]]:
    folder = await database_for(count)
    db = await open_database(Workspace(folder), create=False, clock=SYSTEM_CLOCK)
    raw = sqlite3.connect(folder / "tether.db")
    live = raw.execute("SELECT id, body FROM notes WHERE namespace = ? ORDER BY rowid",
                       (BANK,)).fetchall()
    reference = ExactReference(live)
    keyword = KeywordRecallBackend(db)
    backends: dict[str, Any] = {"keyword": keyword}
    encoder = load_encoder(ENCODER.name) if hybrid_on else None
    hybrid = None
    if encoder is not None:
        hybrid = HybridRecallBackend(db, encoder, keyword=keyword)
        backends["hybrid (fresh query)"] = hybrid
        backends["hybrid (repeated query)"] = hybrid
    matrix = None
    # Random vectors are all far from the query: without a floor the 50 nearest are read and
    # fused, as they are on real data.
    semantic_recall.MIN_SIMILARITY = -1.0
    if encoder is not None:
        found = raw.execute("SELECT ref, vector FROM memory_vectors WHERE namespace = ? "
                            "ORDER BY rowid", (BANK,)).fetchall()
        refs = [r[0] for r in found]
        matrix = np.stack([np.frombuffer(r[1], dtype="<f4") for r in found])
    started = time.perf_counter()
    for backend in backends.values():
        await backend.recall(RecallRequest((BANK,), "warm up the bank"))
    warm_s = time.perf_counter() - started
    results = []
    for label, query in QUERIES.items():
        request = RecallRequest((BANK,), query)
        times: dict[str, list[float]] = {name: [] for name in backends}
        items: dict[str, list[str]] = {}
        for _ in range(REPEATS):
            for name, backend in backends.items():  # interleaved
                if name == "hybrid (fresh query)" and encoder is not None:
                    encoder.queries._vectors.clear()  # as a query never seen before
                started = time.perf_counter()
                result = await backend.recall(request)
                build_block(result.items, 2048)
                times[name].append((time.perf_counter() - started) * 1000)
                items[name] = [i.id.removeprefix("note:") for i in result.items]
        floors: dict[str, list[float]] = {"encoder": [], "encoder, documents' graph": [],
                                          "numpy vector floor": [],
                                          "tether vector search": []}
        overlap_vectors = None
        if encoder is not None and matrix is not None and hybrid is not None:
            focused = focus_query(query)
            for _ in range(REPEATS):
                started = time.perf_counter()
                vector = encoder.inner.embed_query(focused)
                floors["encoder"].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()  # the same query on the float graph (before)
                encoder.inner.embed([focused])
                floors["encoder, documents' graph"].append(
                    (time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                sims = matrix @ vector
                best = np.argpartition(-sims, 15)[:16]
                best = best[np.argsort(-sims[best])]
                floors["numpy vector floor"].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()  # int8 codes + exact re-rank + reading items
                await hybrid.semantic.similar(RecallRequest((BANK,), query), vector, 16)
                floors["tether vector search"].append((time.perf_counter() - started) * 1000)
            exact = [refs[i] for i in best[:10]]
            ours = [s.ref for s, _ in await hybrid.semantic.similar(
                RecallRequest((BANK,), query), vector, 10)]
            overlap_vectors = len(set(ours) & set(exact)) / 10
        base: list[float] = []
        for _ in range(max(3, REPEATS // 8)):
            started = time.perf_counter()
            found = baseline(raw, BANK, query)
            build_block(
                [RecallItem(f"note:{i}", "note", BANK, None, b, 1.0) for i, b in found], 2048
            )
            base.append((time.perf_counter() - started) * 1000)
        exact, kth = reference.top(query, 10)
        ours = items["keyword"][:10]
        expected = min(10, len(exact))
        overlap = (sum(1 for i in ours if exact.get(i, -1.0) >= kth - 1e-4 * abs(kth))
                   / expected) if expected else (1.0 if not ours else 0.0)
        row = {
            "notes": count, "bank notes": len(live), "query": label,
            "keyword p50 ms": round(statistics.median(times["keyword"]), 3),
            "keyword p95 ms": round(pct(times["keyword"], 0.95), 3),
            "keyword hits": len(items["keyword"]),
            "overlap@10 vs exact bm25": round(min(1.0, overlap), 3),
            "full scan p50 ms": round(statistics.median(base), 3),
            "full scan p95 ms": round(pct(base, 0.95), 3),
            "warm-up s": round(warm_s, 2),
        }
        for name in ("hybrid (fresh query)", "hybrid (repeated query)"):
            if name in times:
                row[f"{name} p50 ms"] = round(statistics.median(times[name]), 3)
                row[f"{name} p95 ms"] = round(pct(times[name], 0.95), 3)
        if floors["encoder"]:
            for name, values in floors.items():
                row[f"{name} p50 ms"] = round(statistics.median(values), 3)
                row[f"{name} p95 ms"] = round(pct(values, 0.95), 3)
            row["semantic overlap@10 vs numpy"] = overlap_vectors
            row["repeated hybrid p95 / keyword p95"] = round(
                row["hybrid (repeated query) p95 ms"] / max(row["keyword p95 ms"], 1e-9), 2)
        results.append(row)
        print(json.dumps(row), flush=True)
    raw.close()
    await db.close()
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--keyword-only", action="store_true", help="skip hybrid")
    args = parser.parse_args()
    load_before = os.getloadavg()
    table = []
    for size in args.sizes:
        table += await bench_size(size, not args.keyword_only)
    print(f"{'notes':>9} {'query':<16} {'kw p95':>7} {'ovl':>4} {'fresh p50':>9} "
          f"{'fresh p95':>9} {'rep p50':>8} {'rep p95':>8} {'rep/kw':>6} {'enc p95':>8} "
          f"{'np p95':>7} {'vovl':>5} {'scan p50':>9}")
    for r in table:
        print(f"{r['notes']:>9} {r['query']:<16} {r['keyword p95 ms']:>7} "
              f"{r['overlap@10 vs exact bm25']:>4} "
              f"{r.get('hybrid (fresh query) p50 ms', '-'):>9} "
              f"{r.get('hybrid (fresh query) p95 ms', '-'):>9} "
              f"{r.get('hybrid (repeated query) p50 ms', '-'):>8} "
              f"{r.get('hybrid (repeated query) p95 ms', '-'):>8} "
              f"{r.get('repeated hybrid p95 / keyword p95', '-'):>6} "
              f"{r.get('encoder p95 ms', '-'):>8} {r.get('numpy vector floor p95 ms', '-'):>7} "
              f"{r.get('semantic overlap@10 vs numpy', '-'):>5} {r['full scan p50 ms']:>9}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "benchmark": "recall + block assembly: keyword and hybrid vs full-scan keyword recall",
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "results": table,
    }, indent=2) + "\n")
    print(f"wrote {RESULTS}; load average {os.getloadavg()}")


if __name__ == "__main__":
    asyncio.run(main())
