"""Note search and keyword recall: exact BM25 at 10k, 100k and 1M notes, checked and timed
against exact FTS5 ``bm25()`` and the ``bm25s`` library in the same run.

Notes are generated with a Zipf-like word distribution (a few words occur in most notes, most
words are rare), spread over 50 namespaces, with some pending/rejected notes and accepted
superseders, so the read contract has work to do. Query classes: rare, mid-frequency and very
common words, two common words, common + rare, two mid words, each over the whole workspace and
inside one namespace (bank); in both modes: every word (``tether notes search``) and any word
(recall's ranking before its weak-match guard).

Exactness: the reference result is exact BM25 over the live notes of the scope (accepted, not
superseded by an accepted note), computed three ways in this process:

* ``bm25s`` (method ``lucene``: the same idf, k1 and b as Tether) over the scope's live notes,
  scoring every note and keeping those that hold every word (every-word mode);
* SQLite FTS5 ``bm25()`` over a separate FTS5 table holding exactly the scope's live notes
  (FTS5's idf is ``ln((N - df + 0.5) / (df + 0.5))`` floored at 1e-6, so very common words
  rank by a slightly different formula: its overlap is reported for information);
* overlap@10 is tie-aware: a result counts when its reference score is at least the
  reference's 10th best (thousands of notes can tie on a very common word).

Generated databases are cached under /tmp/tether-bench-notes/ (generation uses raw sqlite3
``executemany`` into a Tether-migrated database; the FTS5 reference is a table of its own).

Run:  python bench/bench_note_search.py [--sizes 10000 100000 1000000] [--rounds 20]
Prints a table and writes bench/results/bench_note_search.json (with the load average).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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

from store.clock import SYSTEM_CLOCK
from store.db.backends import open_database
from store.db.sqlite.sqlite_schema import SCHEMA_VERSION
from store.memory.memory_sql import NOT_SUPERSEDED_BY_ACCEPTED
from store.memory.memory_store import MemoryStore
from store.search.search_policy import index_terms, match_all, match_any, query_terms
from store.search.term_index import index_for
from store.workspace.layout import Workspace

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
    await (await open_database(Workspace(path.parent))).close()
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


LIVE_NOTES = f"""
SELECT n.rowid, n.namespace, n.body FROM notes n
WHERE n.status = 'accepted' AND {NOT_SUPERSEDED_BY_ACCEPTED}
ORDER BY n.rowid
"""


class Reference:
    """Exact BM25 of one scope's live notes, by bm25s and by an FTS5 table of just them."""

    def __init__(self, rows: list[tuple[int, str, str]]) -> None:
        self.rowids = np.asarray([r[0] for r in rows], dtype=np.int64)
        tokens = [index_terms(r[2]) for r in rows]
        self.sets = None
        self.bm25s = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        self.bm25s.index(tokens, show_progress=False)
        self.vocab = self.bm25s.vocab_dict
        self.postings: dict[str, set[int]] = {}
        for doc, toks in enumerate(tokens):
            for term in set(toks):
                self.postings.setdefault(term, set()).add(doc)
        self.fts = sqlite3.connect(":memory:")
        self.fts.execute(
            "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 "
            "remove_diacritics 2')"
        )
        self.fts.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)",
                             [(r[0], r[2]) for r in rows])

    def bm25s_top(self, terms: tuple[str, ...], require_all: bool, k: int
                  ) -> tuple[dict[int, float], float]:
        """Scores by rowid of every matching note, and the k-th best score."""
        known = [t for t in terms if t in self.vocab]
        if require_all and len(known) < len(terms):
            return {}, 0.0
        if not known:
            return {}, 0.0
        scores = self.bm25s.get_scores(known)
        docs = [self.postings[t] for t in known]
        matching = set.intersection(*docs) if require_all else set.union(*docs)
        found = {int(self.rowids[d]): float(scores[d]) for d in matching}
        ordered = sorted(found.values(), reverse=True)
        return found, ordered[min(k, len(ordered)) - 1] if ordered else 0.0

    def fts_top(self, words: list[str], require_all: bool, k: int
                ) -> tuple[list[int], dict[int, float], float]:
        query = match_all(words) if require_all else match_any(words)
        top = self.fts.execute(
            "SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?",
            (query, k)).fetchall()
        kth = top[-1][1] if top else 0.0
        return [r[0] for r in top], dict(top), kth

    def fts_scores(self, words: list[str], require_all: bool, rowids: list[int]
                   ) -> dict[int, float]:
        if not rowids:
            return {}
        query = match_all(words) if require_all else match_any(words)
        marks = ",".join("?" * len(rowids))
        return dict(self.fts.execute(
            f"SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? AND rowid IN ({marks})",
            (query, *rowids)).fetchall())


def tie_aware_overlap(ours: list[int], reference: dict[int, float], kth: float, k: int) -> float:
    """Share of the reference's top k that ours matches, counting ties at the k-th score."""
    expected = min(k, len(reference))
    if expected == 0:
        return 1.0 if not ours else 0.0
    good = sum(1 for rowid in ours[:k] if reference.get(rowid, -1e9) >= kth - 1e-4 * abs(kth))
    return min(good, expected) / expected


def pick_words(path: Path, live: list[tuple[int, str, str]]) -> dict[str, list[str]]:
    """Query words by class, chosen by their real counts among the live notes."""
    counts: dict[str, int] = {}
    for _, _, body in live:
        for term in set(index_terms(body)):
            counts[term] = counts.get(term, 0) + 1
    surface = {}
    for rank in range(VOCABULARY):
        surface.setdefault(index_terms(word(rank))[0], word(rank))
    by_count = sorted((c, t) for t, c in counts.items() if t in surface)
    total = len(live)

    def near(fraction: float, n: int) -> list[str]:
        ranked = sorted(by_count, key=lambda ct: abs(ct[0] - fraction * total))
        return [surface[t] for _, t in ranked[:n]]

    common = [surface[t] for _, t in by_count[-5:]][::-1]
    rare, mid = near(0.0002, 6), near(0.01, 6)
    return {
        "rare word": rare,
        "mid-frequency word": mid,
        "very common word": common,
        "two common words": [f"{a} {b}" for a, b in itertools.combinations(common[:4], 2)],
        "common + rare": [f"{c} {r}" for c, r in zip(itertools.cycle(common), rare, strict=False)],
        "two mid words": [f"{a} {b}" for a, b in zip(mid[::2], mid[1::2], strict=True)],
    }


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


async def measure(count: int, rounds: int) -> list[dict[str, Any]]:
    path = await database_for(count)
    raw = sqlite3.connect(path)
    live = [(int(r[0]), str(r[1]), str(r[2])) for r in raw.execute(LIVE_NOTES)]
    raw.close()
    words = pick_words(path, live)
    started = time.perf_counter()
    references = {None: Reference(live),
                  SCOPED: Reference([r for r in live if r[1] == SCOPED])}
    print(f"  references built in {time.perf_counter() - started:.1f}s", flush=True)
    store = MemoryStore(
        await open_database(Workspace(path.parent), create=False, clock=SYSTEM_CLOCK),
        owns_db=True,
    )
    results = []
    try:
        started = time.perf_counter()
        await store.search_notes(words["rare word"][0], namespace=SCOPED, limit=LIMIT)
        bank_build = time.perf_counter() - started
        started = time.perf_counter()
        await store.search_notes(words["rare word"][0], limit=LIMIT)
        all_build = time.perf_counter() - started
        print(f"  index: one bank {bank_build:.2f}s, all banks {all_build:.2f}s", flush=True)
        index = index_for(store.db)
        for scope in (None, SCOPED):
            for require_all in (True, False):
                for label, group in words.items():
                    row = await measure_class(store, index, references[scope], scope,
                                              require_all, label, group, rounds)
                    row.update(notes=count, bank_build_s=round(bank_build, 2),
                               all_banks_build_s=round(all_build, 2))
                    results.append(row)
                    print_row(row)
    finally:
        await store.close()
    return results


async def measure_class(store: MemoryStore, index: Any, reference: Reference,
                        scope: str | None, require_all: bool, label: str, group: list[str],
                        rounds: int) -> dict[str, Any]:
    ours_ms: list[float] = []
    fts_ms: list[float] = []
    lib_ms: list[float] = []
    overlap_lib: list[float] = []
    overlap_fts: list[float] = []
    namespaces = [scope] if scope else None

    def ours(conn: sqlite3.Connection, terms: tuple[str, ...]) -> list[int]:
        found = index.search(conn, namespaces, terms, limit=LIMIT, require_all=require_all)
        return [r.rowid for r in found]

    for round_number in range(rounds):
        for query in group:
            terms = query_terms(query)
            # Interleaved: Tether, then FTS5 bm25(), then bm25s, for the same query.
            # Every word: the real API (`tether notes search`: rows read, fallback when fewer
            # than the limit); any word: recall's ranking. Overlap is checked on the ranking.
            started = time.perf_counter()
            if require_all:
                hits = await store.search_notes(query, namespace=scope, limit=LIMIT)
                got = [h.note.id for h in hits if h.mode == "all words"]
            else:
                got = await store.db.run_read(lambda c, t=terms: ours(c, t))
            ours_ms.append((time.perf_counter() - started) * 1000)
            rowids = await store.db.run_read(lambda c, t=terms: ours(c, t))
            started = time.perf_counter()
            fts_ids, _, fts_kth = reference.fts_top(query.split(), require_all, LIMIT)
            fts_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            lib_scores, lib_kth = reference.bm25s_top(terms, require_all, LIMIT)
            lib_ms.append((time.perf_counter() - started) * 1000)
            if round_number == 0:
                assert len(got) == len(rowids)
                overlap_lib.append(tie_aware_overlap(rowids, lib_scores, lib_kth, LIMIT))
                fts_of_ours = reference.fts_scores(query.split(), require_all, rowids)
                all_fts = {**fts_of_ours}
                overlap_fts.append(tie_aware_overlap(rowids, all_fts, fts_kth, LIMIT)
                                   if fts_ids else (1.0 if not rowids else 0.0))
    p50, p95 = _percentiles(ours_ms)
    f50, f95 = _percentiles(fts_ms)
    l50, l95 = _percentiles(lib_ms)
    return {
        "scope": scope or "workspace",
        "mode": "every word" if require_all else "any word",
        "query class": label,
        "example": group[0],
        "tether p50 ms": round(p50, 2), "tether p95 ms": round(p95, 2),
        "fts5 bm25 p50 ms": round(f50, 2), "fts5 bm25 p95 ms": round(f95, 2),
        "bm25s p50 ms": round(l50, 2),
        "overlap@10 vs bm25s": round(statistics.mean(overlap_lib), 3),
        "overlap@10 vs fts5": round(statistics.mean(overlap_fts), 3),
    }


def print_row(r: dict[str, Any]) -> None:
    print(f"{r['notes']:>9,} {r['scope'][:18]:18} {r['mode']:10} {r['query class']:19} "
          f"{r['tether p50 ms']:>7.2f} {r['tether p95 ms']:>7.2f}  "
          f"{r['fts5 bm25 p50 ms']:>8.1f} {r['fts5 bm25 p95 ms']:>8.1f}  "
          f"{r['bm25s p50 ms']:>7.1f}  {r['overlap@10 vs bm25s']:>5.3f} "
          f"{r['overlap@10 vs fts5']:>5.3f}", flush=True)


async def main(sizes: list[int], rounds: int) -> None:
    print(f"{'notes':>9} {'scope':18} {'mode':10} {'query class':19} {'p50':>7} {'p95':>7}  "
          f"{'fts5 p50':>8} {'fts5 p95':>8}  {'bm25s':>7}  {'ovl/s':>5} {'ovl/f':>5}")
    results = []
    load_before = os.getloadavg()
    for count in sizes:
        results += await measure(count, rounds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "limit": LIMIT,
        "results": results,
    }
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {RESULTS}; load average {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds per query")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.sizes, arguments.rounds))
