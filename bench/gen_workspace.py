"""Generate a large Tether workspace for the dashboard scale benchmark.

    python bench/gen_workspace.py --size big     # ~1 GB: 10k runs, 1M calls, 100k facts/notes
    python bench/gen_workspace.py --size small   # ~10 MB: the same shape, 1/100 of the history

The database is created and migrated by Tether itself (``Database.open``), then filled with raw
``sqlite3`` ``executemany`` in large transactions (the triggers keep the full-text indexes in
step). Workspaces are cached under ``/tmp/tether-bench-ws/<size>``; ``--force`` rebuilds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sqlite3
import time
from pathlib import Path

from store.db.backends import open_database
from store.model.buckets import bucket_for
from store.workspace.layout import Workspace

CACHE = Path("/tmp/tether-bench-ws")
SIZES = {
    # runs, calls, facts, notes, nodes per run, prompt bytes per attempt
    "big": dict(runs=10_000, calls=1_000_000, facts=100_000, notes=100_000, prompt=3_000),
    "small": dict(runs=100, calls=10_000, facts=1_000, notes=1_000, prompt=3_000),
}
NODES_PER_RUN = 10
START_MS = 1_760_000_000_000
WORDS = [
    "retry",
    "cache",
    "index",
    "latency",
    "queue",
    "worker",
    "planner",
    "summary",
    "handler",
    "module",
    "branch",
    "config",
    "signal",
    "parser",
    "migration",
    "lock",
    "review",
    "pytest",
    "ruff",
    "fixture",
    "commit",
    "deploy",
    "token",
    "context",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def workspace_for(size: str) -> Workspace:
    """Where the cached workspace of ``size`` lives."""
    return Workspace(CACHE / size)


def generate(size: str, *, force: bool = False) -> Workspace:
    """Build (or reuse) the workspace of ``size``; returns it."""
    workspace = workspace_for(size)
    marker = workspace.root / "generated.json"
    if marker.exists() and not force:
        return workspace
    if workspace.root.exists():
        shutil.rmtree(workspace.root)
    asyncio.run(_migrate(workspace))
    spec = SIZES[size]
    rng = random.Random(42)
    started = time.perf_counter()
    conn = sqlite3.connect(workspace.database_path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    runs = spec["runs"]
    calls_per_run = spec["calls"] // runs
    rollup: dict[tuple[str, str], list[int]] = {}
    run_rows, node_rows, attempt_rows, call_rows, event_rows = [], [], [], [], []
    seq_time = START_MS

    def flush() -> None:
        conn.executemany(
            "INSERT INTO runs (run_id, workflow, status, generation, created_at_ms, "
            "started_at_ms, finished_at_ms, heartbeat_at_ms, updated_at_ms, nodes_total, "
            "nodes_done, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, "
            "reasoning_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            run_rows,
        )
        conn.executemany(
            "INSERT INTO nodes (run_id, node_id, iteration, state, attempts, started_at_ms, "
            "finished_at_ms, updated_at_ms, output_json) VALUES (?,?,?,?,?,?,?,?,?)",
            node_rows,
        )
        conn.executemany(
            "INSERT INTO attempts (run_id, node_id, iteration, attempt, state, agent, model, "
            "prompt, response_text, started_at_ms, finished_at_ms) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            attempt_rows,
        )
        conn.executemany(
            "INSERT INTO calls (run_id, node_id, iteration, attempt, agent, model, simulated, "
            "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, "
            "reasoning_tokens, context_tokens, bucket, started_at_ms, finished_at_ms) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            call_rows,
        )
        conn.executemany(
            "INSERT INTO events (at_ms, type, run_id, node_id, iteration, attempt, payload_json)"
            " VALUES (?,?,?,?,?,?,?)",
            event_rows,
        )
        for rows in (run_rows, node_rows, attempt_rows, call_rows, event_rows):
            rows.clear()

    for r in range(runs):
        run_id = f"r-{r:08d}"
        created = START_MS + r * 60_000
        totals = [0, 0, 0, 0, 0]
        for n in range(NODES_PER_RUN):
            node_id = f"task-{n}"
            node_rows.append(
                (
                    run_id,
                    node_id,
                    0,
                    "finished",
                    1,
                    created + n * 1000,
                    created + n * 1000 + 900,
                    created + n * 1000 + 900,
                    json.dumps({"summary": _text(rng, 12)}),
                )
            )
            attempt_rows.append(
                (
                    run_id,
                    node_id,
                    0,
                    1,
                    "finished",
                    "simulated",
                    "sim-1",
                    _text(rng, spec["prompt"] // 7),
                    _text(rng, 150),
                    created + n * 1000,
                    created + n * 1000 + 900,
                )
            )
        for c in range(calls_per_run):
            fresh = rng.randint(500, 40_000)
            cache_read = rng.choice((0, rng.randint(1_000, 900_000)))
            cache_write = rng.randint(0, 5_000)
            output = rng.randint(50, 3_000)
            reasoning = rng.randint(0, 2_000)
            context = fresh + cache_read + cache_write
            bucket = bucket_for(context)
            node_id = f"task-{c % NODES_PER_RUN}"
            call_rows.append(
                (
                    run_id,
                    node_id,
                    0,
                    1,
                    "simulated",
                    "sim-1",
                    1,
                    fresh,
                    cache_read,
                    cache_write,
                    output,
                    reasoning,
                    context,
                    bucket,
                    created + c,
                    created + c + 500,
                )
            )
            for key in ((run_id, bucket), ("", bucket)):
                agg = rollup.setdefault(key, [0, 0, 0, 0, 0, 0])
                agg[0] += 1
                for i, v in enumerate((fresh, cache_read, cache_write, output, reasoning), 1):
                    agg[i] += v
            for i, v in enumerate((fresh, cache_read, cache_write, output, reasoning)):
                totals[i] += v
            seq_time += 1
            event_rows.append(
                (
                    seq_time,
                    "call",
                    run_id,
                    node_id,
                    0,
                    1,
                    json.dumps({"context_tokens": context, "bucket": bucket}),
                )
            )
        run_rows.append(
            (
                run_id,
                rng.choice(("code-review", "incident-runbook", "fanout-review")),
                "finished",
                0,
                created,
                created,
                created + 30_000,
                created + 30_000,
                created + 30_000,
                NODES_PER_RUN,
                NODES_PER_RUN,
                *totals,
            )
        )
        if len(call_rows) >= 50_000:
            flush()
    flush()
    conn.executemany(
        "INSERT INTO usage_rollups (run_id, bucket, calls, input_tokens, cache_read_tokens, "
        "cache_write_tokens, output_tokens, reasoning_tokens) VALUES (?,?,?,?,?,?,?,?)",
        [(run_id, bucket, *agg) for (run_id, bucket), agg in rollup.items()],
    )
    namespaces = [f"workflow:wf-{i}" for i in range(50)]
    conn.executemany(
        "INSERT INTO facts (namespace, key, value_json, created_at_ms, updated_at_ms) "
        "VALUES (?,?,?,?,?)",
        (
            (
                namespaces[i % 50],
                f"key-{i}",
                json.dumps({"text": _text(rng, 40)}),
                START_MS + i,
                START_MS + i,
            )
            for i in range(spec["facts"])
        ),
    )
    conn.executemany(
        "INSERT INTO notes (id, namespace, body, status, created_at_ms) VALUES (?,?,?,?,?)",
        (
            (
                f"n-{i:08d}",
                namespaces[i % 50],
                _text(rng, 120),
                "pending" if i % 100 == 0 else "accepted",
                START_MS + i,
            )
            for i in range(spec["notes"])
        ),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    size_bytes = workspace.database_path.stat().st_size
    marker.write_text(
        json.dumps(
            {
                "size": size,
                **spec,
                "bytes": size_bytes,
                "seconds": round(time.perf_counter() - started, 1),
            }
        ),
        encoding="utf-8",
    )
    return workspace


async def _migrate(workspace: Workspace) -> None:
    db = await open_database(workspace, create=True)
    await db.close()


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description="Generate a benchmark workspace.")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    workspace = generate(args.size, force=args.force)
    print((workspace.root / "generated.json").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
