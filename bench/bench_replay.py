"""Replay of a long run: reading its event log, and moving the cursor, each beside its floor or
baseline measured in the same run on the same data, with the same answers checked.

The workspace (a temporary folder) holds one finished run of ``--events`` events (default
100 000): 2 000 node iterations, each pending, running, one model call, attempt ended and
finished, plus heartbeats of other kinds; raw ``sqlite3`` into a database Tether created and
migrated, then ``ANALYZE``.

Measured:

* opening a replay: ``read_history`` (the run, every event in pages of 10 000, the node rows)
  and building its :class:`ReplayLog`, beside the floor: ``SELECT … FROM events WHERE run_id =
  ?`` of the same rows in plain ``sqlite3``;
* moving the cursor to a random event (``ReplayLog.at``, folding from the nearest of its
  checkpoints), beside the baseline: folding the run's events from the first to that one, as a
  replay without checkpoints would on every key; both give the same node states and tokens
  (checked for every position measured).

Target: a key in replay is drawn within 100 ms (the BRIEF's view-switch budget) however long
the run: the cursor move must stay far below it.

Run:  python bench/bench_replay.py [--events 100000] [--rounds 30]
Writes bench/results/bench_replay.json (with the load average before and after).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_cache import fresh
from bench_memory_writes import machine

from store.db.backends import open_database
from store.read.replay import ReplayFold
from store.read.replay_reads import read_history

RESULTS = Path(__file__).with_name("results") / "bench_replay.json"
RUN_ID = "r-long"
START_MS = 1_770_000_000_000
PER_NODE = 5  # pending, running, call, attempt.finished, finished


def fill(conn: Any, events: int) -> int:
    """One run of about ``events`` events; returns how many node iterations it has."""
    nodes = max(1, events // (PER_NODE + 1))
    conn.execute(
        "INSERT INTO runs (run_id, workflow, status, created_at_ms, updated_at_ms, nodes_total,"
        " nodes_done) VALUES (?, 'long', 'finished', ?, ?, ?, ?)",
        (RUN_ID, START_MS, START_MS, nodes, nodes))
    rows: list[tuple[Any, ...]] = []
    at = START_MS
    rows.append((at, "run.created", None, None, None, '{"status": "running"}'))
    for index in range(nodes):
        node = f"n{index:05d}"
        call = json.dumps({"tokens": {"input_tokens": 1000 + index, "output_tokens": 50},
                           "bucket": "<50k", "kind": "model", "cost_usd": 0.001})
        rows += [(at, "node.state", node, None, None, '{"state": "pending"}'),
                 (at + 1, "node.state", node, None, None, '{"state": "running", "attempts": 1}'),
                 (at + 2, "call", node, None, 1, call),
                 (at + 3, "attempt.finished", node, None, 1, '{"state": "finished"}'),
                 (at + 3, "node.state", node, None, None, '{"state": "finished", "attempts": 1}'),
                 (at + 3, "warning", node, None, None, '{"text": "noise"}')]
        conn.execute(
            "INSERT INTO nodes (run_id, node_id, iteration, state, attempts, cached, "
            "depends_on_json, started_at_ms, finished_at_ms, updated_at_ms) "
            "VALUES (?, ?, 0, 'finished', 1, 0, ?, ?, ?, ?)",
            (RUN_ID, node, json.dumps([f"n{index - 1:05d}"] if index else []), at + 1, at + 3,
             at + 3))
        at += 4
    rows.append((at, "run.status", None, None, None, '{"status": "finished"}'))
    conn.executemany(
        "INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(a, kind, RUN_ID, node, 0 if node else None, attempt, payload)
         for a, kind, node, _, attempt, payload in rows])
    return nodes


def answers(fold: ReplayFold) -> tuple[Any, ...]:
    """What a position shows, to check the two ways agree."""
    return (tuple((k, v.state, v.attempts) for k, v in sorted(fold.nodes.items())),
            fold.run.tokens, fold.run.calls)


def ms(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"median_ms": round(statistics.median(ordered) * 1000, 3),
            "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 3)}


async def open_replays(workspace: Any, times: list[float]) -> Any:
    """Open the replay three times (read_history and its log), timing each."""
    async with await open_database(workspace) as db:
        for _ in range(3):
            started = time.perf_counter()
            history = await read_history(db, RUN_ID)
            times.append(time.perf_counter() - started)
    return history


def main(events: int, rounds: int) -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tether-bench-replay-") as folder:
        workspace, conn = fresh(Path(folder) / "ws")
        nodes = fill(conn, events)
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        floor_times, open_times = [], []
        for _ in range(3):
            started = time.perf_counter()
            floor_rows = conn.execute(
                "SELECT seq, at_ms, type, run_id, node_id, iteration, attempt, payload_json "
                "FROM events WHERE run_id = ? ORDER BY seq", (RUN_ID,)).fetchall()
            floor_times.append(time.perf_counter() - started)
        conn.close()
        log = asyncio.run(open_replays(workspace, open_times)).log
        assert log.total == len(floor_rows), (log.total, len(floor_rows))
        positions = [random.Random(seed).randint(1, log.total) for seed in range(rounds)]
        moves, baseline = [], []
        for position in positions:
            started = time.perf_counter()
            fold = log.fold_at(position)
            moves.append(time.perf_counter() - started)
            started = time.perf_counter()
            naive = ReplayFold()
            for event in log.events[:position]:
                naive.apply(event)
            baseline.append(time.perf_counter() - started)
            assert answers(fold) == answers(naive), position
        final = log.at(log.total)
        result = {
            "events": log.total, "nodes": nodes,
            "final_nodes_finished": final.nodes_ended, "final_tokens": final.run_tokens.total,
            "open_replay": ms(open_times), "open_floor_plain_sql": ms(floor_times),
            "cursor_move": ms(moves), "cursor_move_baseline_fold_from_start": ms(baseline),
            "positions_checked_equal": len(positions),
            "load_before": load_before, "load_after": os.getloadavg(), "machine": machine(),
        }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"run of {result['events']:,} events, {nodes:,} node iterations "
          f"(all finished at the end: {final.nodes_ended:,}; {final.run_tokens.total:,} tokens)")
    print(f"{'':34}{'median':>10}{'p95':>10}")
    for label, key in (("open replay (read_history)", "open_replay"),
                       ("  floor: plain SQL of the events", "open_floor_plain_sql"),
                       ("cursor move (checkpoints)", "cursor_move"),
                       ("  baseline: fold from the start", "cursor_move_baseline_fold_from_start")):
        figures = result[key]
        print(f"{label:34}{figures['median_ms']:>8.2f}ms{figures['p95_ms']:>8.2f}ms")
    print(f"same node states and tokens at all {len(positions)} positions; load "
          f"{load_before[0]:.2f} before, {result['load_after'][0]:.2f} after")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=30)
    arguments = parser.parse_args()
    main(arguments.events, arguments.rounds)
