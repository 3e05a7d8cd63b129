"""Run search over 10 000 runs: ``tether runs --where`` / ``/`` in the dashboard
(:func:`store.read.run_search.search_runs`: parse, compile, the page of 50 newest matches and
the exact count), timed beside the floor, a plain hand-written SQL query over the same rows
returning the same page and count, in the same run on the same database.

The workspace is generated once (cached under /tmp/tether-bench-search/): 10 000 runs over 30
days in 8 workflows (failed, cancelled and running ones among them, with input fields, errors
and costs), 5 nodes and 5-6 attempts each (agents, models, prompts and answers of ~60 words),
a usage row per run; raw ``sqlite3`` into a database Tether created and migrated, then
``ANALYZE``. Each query runs ``--rounds`` times per side (after one warm-up); the table shows
median and p95, the matches and whether the two sides returned the same ids and count.

Target (BRIEF/issue 24): exact results within 200 ms on 10 000 runs.

Run:  python bench/bench_run_search.py [--runs 10000] [--rounds 15]
Writes bench/results/bench_run_search.json (with the load average before and after).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_cache import cached, finish, fresh, size_and_rounds
from bench_memory_writes import machine

from store.db.backends import open_database
from store.read.run_query import parse_query
from store.read.run_search import ScanBounds, search_runs
from store.workspace.layout import Workspace

CACHE = Path("/tmp/tether-bench-search")
RESULTS = Path(__file__).with_name("results") / "bench_run_search.json"
NOW_MS = 1_770_000_000_000
DAY_MS = 86_400_000
PAGE = 50
WORKFLOWS = [f"wf-{i}" for i in range(8)]
AGENTS = ("claude-code", "codex", "simulated")
MODELS = ("claude-sonnet-4", "claude-opus-4", "gpt-5-codex", "sim-1")
WORDS = ("review", "retry", "parser", "module", "config", "branch", "index", "queue", "cache",
         "latency", "handler", "signal", "commit", "deploy", "fixture", "lint", "token")
ERRORS = ("timed out after 600 s", "agent output was not JSON", "exit status 2",
          "rate limited by the provider")

# The query, then the floor: the same page (newest first) and count in plain SQL.
NEWEST = "ORDER BY created_at_ms DESC, run_id DESC LIMIT 50"
CASES: list[tuple[str, str, tuple[Any, ...]]] = [
    ("status = failed", "SELECT run_id FROM runs WHERE status = ?", ("failed",)),
    ("workflow = wf-3 AND created > -7d",
     "SELECT run_id FROM runs WHERE workflow = ? AND created_at_ms > ?",
     ("wf-3", NOW_MS - 7 * DAY_MS)),
    ("cost > 0.50 AND tokens >= 200k",
     "SELECT run_id FROM runs WHERE cost_usd > ? AND (input_tokens + cache_read_tokens + "
     "cache_write_tokens + output_tokens + reasoning_tokens) >= ?", (0.5, 200_000)),
    ("model = claude-opus-4",
     "SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM attempts WHERE model = ? "
     "UNION SELECT run_id FROM usage_hours WHERE model = ?)",
     ("claude-opus-4", "claude-opus-4")),
    ("agent = codex AND status IN (failed, cancelled)",
     "SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM attempts WHERE agent = ?) "
     "AND status IN (?, ?)", ("codex", "failed", "cancelled")),
    ("input.repo = repo-7",
     "SELECT run_id FROM runs WHERE json_extract(input_json, '$.repo') = ?", ("repo-7",)),
    ('error ~ "timed out"',
     "SELECT run_id FROM runs WHERE instr(lower(error), ?) > 0 OR run_id IN (SELECT run_id "
     "FROM attempts WHERE instr(lower(error), ?) > 0) OR run_id IN (SELECT run_id FROM nodes "
     "WHERE instr(lower(error), ?) > 0)", ("timed out",) * 3),
    # Full text: a scan of the newest ScanBounds().runs runs that pass the rest of the query
    # (2 000 by default; the answer says what it covered); the floor reads the same window.
    ("workflow = wf-1 AND text ~ zebra",
     "SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM runs WHERE workflow = ? "
     f"{NEWEST.replace('50', str(ScanBounds().runs))}) AND run_id IN (SELECT run_id FROM "
     "attempts WHERE instr(lower(prompt), ?) > 0 OR instr(lower(response_text), ?) > 0)",
     ("wf-1", "zebra", "zebra")),
    ("text ~ zebra",
     "SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM runs "
     f"{NEWEST.replace('50', str(ScanBounds().runs))}) AND run_id IN (SELECT run_id FROM "
     "attempts WHERE instr(lower(prompt), ?) > 0 OR instr(lower(response_text), ?) > 0)",
     ("zebra", "zebra")),
]


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def generate(runs: int) -> Workspace:
    """The cached workspace of ``runs`` runs (built on first use)."""
    found = cached(CACHE / str(runs))
    if found is not None:
        return found
    workspace, conn = fresh(CACHE / str(runs))
    rng = random.Random(24)
    run_rows, node_rows, attempt_rows, usage_rows = [], [], [], []
    for r in range(runs):
        run_id = f"r-{r:06d}"
        created = NOW_MS - 30 * DAY_MS + r * (30 * DAY_MS // runs)
        status = rng.choices(("finished", "failed", "cancelled", "running"), (80, 12, 5, 3))[0]
        lanes = [rng.randint(1_000, 150_000), rng.choice((0, rng.randint(0, 300_000))),
                 rng.randint(0, 5_000), rng.randint(100, 8_000), 0]
        cost = round(sum(lanes) / 1_000_000 * rng.uniform(0.5, 3.0), 4)
        error = rng.choice(ERRORS) if status == "failed" else None
        run_rows.append((run_id, rng.choice(WORKFLOWS), status, error, created, created,
                         None if status == "running" else created + 60_000,
                         created + 60_000, created + 60_000, 5, 5, *lanes, cost,
                         json.dumps({"repo": f"repo-{rng.randrange(40)}",
                                     "priority": rng.randrange(5)})))
        agent, model = rng.choice(AGENTS), rng.choice(MODELS)
        failed_node = rng.randrange(5) if status == "failed" else -1
        for n in range(5):
            node_error = error if n == failed_node else None
            node_rows.append((run_id, f"task-{n}", 0, "failed" if node_error else "finished",
                              1, node_error, created + n * 10_000, created + n * 10_000 + 9_000,
                              created + n * 10_000 + 9_000))
            attempts = 2 if rng.random() < 0.15 else 1
            for a in range(1, attempts + 1):
                # One run in ~500 holds the rare word, so the full-text floor has work to do.
                rare = " zebra" if rng.random() < 0.002 else ""
                attempt_error = node_error if a == attempts else (
                    rng.choice(ERRORS) if attempts > 1 else None)
                attempt_rows.append((run_id, f"task-{n}", 0, a,
                                     "failed" if attempt_error else "finished", agent, model,
                                     _words(rng, 60) + rare, _words(rng, 30), attempt_error,
                                     created + n * 10_000, created + n * 10_000 + 9_000))
        usage_rows.append((run_id, (created // 3_600_000) * 3_600_000, agent, model, 6,
                           *lanes, cost))
    conn.executemany(
        "INSERT INTO runs (run_id, workflow, status, error, created_at_ms, started_at_ms, "
        "finished_at_ms, heartbeat_at_ms, updated_at_ms, nodes_total, nodes_done, input_tokens, "
        "cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, cost_usd, "
        "input_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", run_rows)
    conn.executemany(
        "INSERT INTO nodes (run_id, node_id, iteration, state, attempts, error, started_at_ms, "
        "finished_at_ms, updated_at_ms) VALUES (?,?,?,?,?,?,?,?,?)", node_rows)
    conn.executemany(
        "INSERT INTO attempts (run_id, node_id, iteration, attempt, state, agent, model, prompt, "
        "response_text, error, started_at_ms, finished_at_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        attempt_rows)
    conn.executemany(
        "INSERT INTO usage_hours (run_id, hour_ms, agent, model, calls, input_tokens, "
        "cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, cost_usd) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?)", usage_rows)
    finish(workspace, conn, {"runs": runs, "attempts": len(attempt_rows)})
    return workspace


def floor(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> tuple[list[str], int]:
    """The floor: the page and the count in plain SQL."""
    page = [r[0] for r in conn.execute(f"{sql} {NEWEST}", params)]
    count = conn.execute(f"SELECT count(*) FROM ({sql})", params).fetchone()[0]
    return page, count


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2)}


async def measure(workspace: Workspace, rounds: int) -> list[dict[str, Any]]:
    db = await open_database(workspace, create=False, read_only=True)
    conn = sqlite3.connect(f"file:{workspace.database_path}?mode=ro", uri=True)
    rows = []
    try:
        for text, sql, params in CASES:
            query = parse_query(text, NOW_MS)
            tether_times, floor_times = [], []
            found = None
            for i in range(rounds + 1):
                started = time.perf_counter()
                found = await search_runs(db, parse_query(text, NOW_MS), now_ms=NOW_MS,
                                          limit=PAGE)
                elapsed = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                page, count = floor(conn, sql, params)
                floor_elapsed = (time.perf_counter() - started) * 1000
                if i:  # the first round warms the page cache
                    tether_times.append(elapsed)
                    floor_times.append(floor_elapsed)
            assert found is not None and query is not None
            same = [r.run_id for r in found.runs] == page and found.total == count
            rows.append({"query": text, "matches": count, "tether": summary(tether_times),
                         "floor": summary(floor_times), "same_results": same,
                         "scan": None if found.scan is None else
                         {"runs_searched": found.scan.runs_searched,
                          "runs_eligible": found.scan.runs_eligible}})
    finally:
        conn.close()
        await db.close()
    return rows


def scanned(row: dict[str, Any]) -> str:
    """What a full-text scan covered (empty for a structured query)."""
    scan = row["scan"]
    return "" if scan is None else f"{scan['runs_searched']:,} of {scan['runs_eligible']:,} runs"


def main() -> None:
    runs, rounds = size_and_rounds(__doc__ or "", "runs", 10_000)
    load_before = os.getloadavg()
    workspace = generate(runs)
    rows = asyncio.run(measure(workspace, rounds))
    load_after = os.getloadavg()
    print(f"Run search over {runs:,} runs (page of {PAGE}, exact count), "
          f"{rounds} rounds; load average {load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"{'query':50} {'matches':>8} {'tether med/p95 ms':>18} {'floor med/p95 ms':>17} "
          f"{'same':>5}  scanned")
    for row in rows:
        t, f = row["tether"], row["floor"]
        same = "yes" if row["same_results"] else "NO"
        print(f"{row['query']:50} {row['matches']:>8,} {t['median_ms']:>8.2f}/{t['p95_ms']:<9.2f}"
              f" {f['median_ms']:>7.2f}/{f['p95_ms']:<9.2f} {same:>5}  {scanned(row)}")
    worst = max(r["tether"]["p95_ms"] for r in rows)
    print(f"worst p95 {worst:.1f} ms (target 200 ms): "
          f"{'within' if worst <= 200 else 'OVER'}; every result identical to the floor: "
          f"{all(r['same_results'] for r in rows)}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": runs, "rounds": rounds, "rows": rows,
                                   "load_before": load_before, "load_after": load_after,
                                   "machine": machine()}, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
