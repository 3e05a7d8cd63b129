"""Cold start: the first note search and the first recall of a fresh process, at 10k, 100k and
1M notes, each side in its own fresh process, rounds interleaved, answers checked.

Note search (``tether notes search``, a real CLI subprocess, end to end) on the note-search
benchmark's generated workspace (bench/bench_note_search.py; a private copy, so its snapshots
are this benchmark's own), searched as a whole (the workspace index holds every note):

* **tether**: the CLI with the workspace's term-index snapshot in place (what every search
  after the first ever one meets);
* **tether, tail**: the same after notes and decisions arrived that the snapshot does not hold
  (fewer than make a process save a new one: the most a fresh process re-reads);
* **fts5 cli**: the same CLI with the search answered by SQLite FTS5 ``bm25()``
  (bench/fts5_notes_search.py): everything else identical, the like-for-like floor;
* **bare fts5**: a bare ``python`` + ``sqlite3`` process running that one FTS5 query (the
  floor of any Python program);
* **tether, no snapshot**: the CLI building the index from the notes (one round).

Every search's hits (ids, scores) must equal those of an index built from scratch in this
process; the benchmark stops if they do not.

First recall: a fresh process opens the recall benchmark's workspace (bench/bench_recall.py:
10 banks, recall reads one, 10% of the notes) and times its first keyword recall plus memory
block (what a ``tether run`` waits for before its first prompt); with the bank's snapshot, and
once without. Its items must equal a warm index's.

    python bench/bench_cold_start.py [--sizes 10000 100000 1000000] [--rounds 5]

Writes bench/results/bench_cold_start.json (with the load average).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_note_search
import bench_recall
from bench_memory_writes import machine

from store.db.backends import open_database
from store.memory.memory_store import MemoryStore
from store.memory.note_values import NoteInput
from store.search.term_index import TermIndex
from store.workspace.layout import Workspace

CACHE = Path("/tmp/tether-bench-cold")
RESULTS = Path(__file__).resolve().parent / "results" / "bench_cold_start.json"
HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
TETHER = str(Path(sys.executable).parent / "tether")
LIMIT = 10
TAIL_NOTES = 300
TAIL_DECISIONS = 20

BARE_FTS5 = """
import sqlite3, sys
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = conn.execute(sys.argv[2], {"query": sys.argv[3], "limit": int(sys.argv[4])}).fetchall()
for row in rows:
    print(row[0], -row[-1], row[2][:60])
"""

FIRST_RECALL = """
import asyncio, json, sys, time
from pathlib import Path
from engine.memory.block import build_block
from engine.memory.recall_items import RecallRequest
from engine.memory.keyword_recall import KeywordRecallBackend
from store.db.backends import open_database
from store.workspace.layout import Workspace

async def main():
    db = await open_database(Workspace(Path(sys.argv[1])), create=False)
    backend = KeywordRecallBackend(db)
    started = time.perf_counter()
    result = await backend.recall(RecallRequest((sys.argv[2],), sys.argv[3]))
    build_block(result.items, 2048)
    took = (time.perf_counter() - started) * 1000
    await db.close()
    print(json.dumps({"ms": took, "items": [[i.id, round(i.score, 5)] for i in result.items]}))

asyncio.run(main())
"""


def private_copy(source: Path, name: str) -> Path:
    """A copy of a generated workspace made through SQLite's backup API (cached)."""
    folder = CACHE / name
    if not (folder / "tether.db").exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        dst = sqlite3.connect(partial / "tether.db")
        src.backup(dst)
        src.close()
        dst.close()
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    shutil.rmtree(folder / "index", ignore_errors=True)
    return folder


def run(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, "TETHER_NO_BACKGROUND_EMBED": "1"})
    took = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]} failed: {done.stderr.strip()}")
    return took, done.stdout


def cli_hits(stdout: str) -> list[tuple[str, float]]:
    return [(hit["id"], round(hit["score"], 4)) for hit in json.loads(stdout)["items"]]


async def scratch_hits(folder: Path, queries: list[str]) -> dict[str, list[tuple[str, float]]]:
    """The same searches from an index built from the notes in this process (no snapshot)."""
    from store.search import term_index

    scratch = TermIndex(None)
    saved = term_index.index_for
    term_index.index_for = lambda db: scratch  # type: ignore[assignment]
    try:
        async with await MemoryStore.open(Workspace(folder), create=False) as store:
            out = {}
            for query in queries:
                hits = await store.search_notes(query, limit=LIMIT)
                out[query] = [(h.note.id, round(h.score, 4)) for h in hits]
    finally:
        term_index.index_for = saved
    return out


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(statistics.median(ordered), 1),
            "max": round(ordered[-1], 1), "min": round(ordered[0], 1)}


async def add_tail(folder: Path) -> None:
    """Notes and decisions the snapshot does not hold (through the real write path)."""
    async with await MemoryStore.open(Workspace(folder), create=False) as store:
        words = [bench_note_search.word(rank) for rank in range(0, 3000, 7)]
        await store.save_notes([
            NoteInput(f"workflow:project-{i % bench_note_search.NAMESPACES}",
                      " ".join(words[(i * 13 + k * 7) % len(words)] for k in range(12)),
                      id=f"tail-{i}")
            for i in range(TAIL_NOTES)
        ])
        for i in range(TAIL_DECISIONS):
            note = f"tail-{i}"
            if i % 2:
                await store.reject_note(note)
            else:
                await store.save_note(f"workflow:project-{i % bench_note_search.NAMESPACES}",
                                      "a superseder " + bench_note_search.word(3),
                                      supersedes=[note])


async def note_search(count: int, rounds: int) -> list[dict[str, Any]]:
    source = await bench_note_search.database_for(count)
    folder = private_copy(source, f"notes-{count}-g{bench_note_search.GENERATOR_VERSION}")
    raw = sqlite3.connect(f"file:{folder / 'tether.db'}?mode=ro", uri=True)
    live = [(int(r[0]), str(r[1]), str(r[2])) for r in raw.execute(
        bench_note_search.LIVE_NOTES)]
    raw.close()
    words = bench_note_search.pick_words(folder / "tether.db", live)
    queries = {"rare word": words["rare word"][0],
               "very common word": words["very common word"][0],
               "two common words": words["two common words"][0]}
    fts5_sql, baseline = _fts5_baseline(folder)
    expected = await scratch_hits(folder, list(queries.values()))
    rows = []
    # One cold build through the CLI (it saves the snapshot the other rounds use).
    cold_ms, out = run([TETHER, "--workspace", str(folder), "notes", "search",
                        queries["rare word"], "--limit", str(LIMIT), "--format", "json"])
    assert cli_hits(out) == expected[queries["rare word"]], "cold build differs"
    for label, query in queries.items():
        times: dict[str, list[float]] = {"tether": [], "fts5 cli": [], "bare fts5": []}
        for _ in range(rounds):
            took, out = run([TETHER, "--workspace", str(folder), "notes", "search", query,
                             "--limit", str(LIMIT), "--format", "json"])
            assert cli_hits(out) == expected[query], f"snapshot answer differs for {query}"
            times["tether"].append(took)
            took, _ = run([PYTHON, str(HERE / "fts5_notes_search.py"), "--workspace",
                           str(folder), "notes", "search", query, "--limit", str(LIMIT),
                           "--format", "json"])
            times["fts5 cli"].append(took)
            took, _ = run([PYTHON, "-c", BARE_FTS5, str(baseline), fts5_sql,
                           " ".join(f'"{t}"' for t in query.split()), str(LIMIT)])
            times["bare fts5"].append(took)
        row = {"notes": count, "query": label, "example": query,
               **{f"{side} ms": percentiles(samples) for side, samples in times.items()},
               "tether / fts5 cli": round(statistics.median(times["tether"])
                                          / statistics.median(times["fts5 cli"]), 2),
               "tether / bare fts5": round(statistics.median(times["tether"])
                                           / statistics.median(times["bare fts5"]), 2),
               "tether, no snapshot ms": round(cold_ms, 1) if label == "rare word" else None}
        rows.append(row)
        print(json.dumps(row), flush=True)
    # A tail the snapshot does not hold, under the size that makes a process save again.
    await add_tail(folder)
    expected = await scratch_hits(folder, list(queries.values()))
    for label, query in queries.items():
        times = {"tether, tail": []}
        for _ in range(rounds):
            took, out = run([TETHER, "--workspace", str(folder), "notes", "search", query,
                             "--limit", str(LIMIT), "--format", "json"])
            assert cli_hits(out) == expected[query], f"tail answer differs for {query}"
            times["tether, tail"].append(took)
        row = next(r for r in rows if r["query"] == label)
        row["tether, tail ms"] = percentiles(times["tether, tail"])
        print(json.dumps({"notes": count, "query": label, **row["tether, tail ms"]}), flush=True)
    return rows


def _fts5_baseline(folder: Path) -> tuple[str, Path]:
    """The FTS5 query and its own database (the workspace keeps no FTS5 index of notes)."""
    sys.path.insert(0, str(HERE))
    from fts5_notes_search import build_baseline, fts5_sql

    return fts5_sql(False), build_baseline(folder)


async def first_recall(count: int, rounds: int) -> dict[str, Any]:
    source = await bench_recall.database_for(count)
    folder = private_copy(source / "tether.db", f"recall-{count}")
    query = bench_recall.QUERIES["task prompt"]
    command = [PYTHON, "-c", FIRST_RECALL, str(folder), bench_recall.BANK, query]
    cold, out = run(command)  # builds the bank and saves its snapshot
    cold_ms = json.loads(out)["ms"]
    db = await open_database(Workspace(folder), create=False)
    from engine.memory.keyword_recall import KeywordRecallBackend
    from engine.memory.recall_items import RecallRequest

    warm = await KeywordRecallBackend(db).recall(RecallRequest((bench_recall.BANK,), query))
    await db.close()
    expected = [[i.id, round(i.score, 5)] for i in warm.items]
    assert json.loads(out)["items"] == expected, "cold recall differs"
    inside: list[float] = []
    whole: list[float] = []
    for _ in range(rounds):
        took, out = run(command)
        answer = json.loads(out)
        assert answer["items"] == expected, "first recall from a snapshot differs"
        inside.append(answer["ms"])
        whole.append(took)
    row = {"notes": count, "bank notes": count // 10, "query": "task prompt",
           "first recall ms": percentiles(inside), "process ms": percentiles(whole),
           "first recall without snapshot ms": round(cold_ms, 1), "hits": len(expected)}
    print(json.dumps(row), flush=True)
    return row


async def main(sizes: list[int], rounds: int) -> None:
    load_before = os.getloadavg()
    searches, recalls = [], []
    for count in sizes:
        searches += await note_search(count, rounds)
        recalls.append(await first_recall(count, rounds))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "benchmark": "first note search (CLI) and first recall of a fresh process",
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "note_search": searches,
        "first_recall": recalls,
    }, indent=2) + "\n")
    print(f"{'notes':>9} {'query':18} {'tether':>7} {'tail':>7} {'fts5cli':>7} {'bare':>6} "
          f"{'ratio':>6} {'no snap':>8}")
    for r in searches:
        print(f"{r['notes']:>9} {r['query']:18} {r['tether ms']['p50']:>7} "
              f"{r['tether, tail ms']['p50']:>7} {r['fts5 cli ms']['p50']:>7} "
              f"{r['bare fts5 ms']['p50']:>6} {r['tether / fts5 cli']:>6} "
              f"{r['tether, no snapshot ms'] or '':>8}")
    for r in recalls:
        print(f"first recall {r['notes']:>9}: {r['first recall ms']['p50']} ms "
              f"(max {r['first recall ms']['max']}), without snapshot "
              f"{r['first recall without snapshot ms']} ms")
    print(f"wrote {RESULTS}; load average {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.sizes, arguments.rounds))
