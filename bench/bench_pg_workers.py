"""Worker throughput on a PostgreSQL workspace: 1, 2 and 4 ``tether worker`` processes draining a
queue of short runs with an instant agent.

    eval "$(.ci/postgres-up)"; python bench/bench_pg_workers.py [--runs 1000] [--workers 1 2 4]

Each measurement gets a fresh schema, queues ``--runs`` runs of a two-task workflow (simulated
agent, no latency), starts the worker processes with ``--exit-when-idle`` and times from their
start until every run is finished (checked in the database: every run finished, every node
finished exactly once). Reported: runs per second and the ratio to one worker, measured in the
same invocation, with ``synchronous_commit`` on (the workspace's ``full`` durability: a WAL
flush per commit; on a slow disk the flushes are the limit) and off (``normal``: flushed in the
background, the durability of SQLite's WAL with NORMAL). Results: a table and
``bench/results/bench_pg_workers.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pg_support import machine, scratch_schema, write_results  # noqa: E402

from store.db.backends import open_database  # noqa: E402
from store.runs.run_queue import RunQueue  # noqa: E402
from store.workspace.layout import DATABASE_URL_ENV_VAR, Workspace  # noqa: E402

WORKFLOW = '''
from pydantic import BaseModel
from engine import SimulatedAgent, Workflow

class Out(BaseModel):
    text: str

workflow = Workflow("bench-short", agents={"sim": SimulatedAgent(latency_ms=0)},
                    default_agent="sim")
workflow.add_task("plan", "Plan it.", output=Out)
workflow.add_task("do", "Do it.", depends_on=["plan"], output=Out)
'''


async def enqueue(url: str, root: Path, workflow_file: Path, runs: int) -> None:
    async with await open_database(Workspace(root, url)) as db:
        queue = RunQueue(db)
        for _ in range(runs):
            await queue.enqueue("bench-short", input=None, workflow_path=str(workflow_file))


async def check(url: str, root: Path, runs: int) -> None:
    async with await open_database(Workspace(root, url)) as db:
        finished = await db.fetch_value("SELECT count(*) FROM runs WHERE status = 'finished'")
        attempts = await db.fetch_value(
            "SELECT count(*) FROM attempts WHERE state = 'finished'"
        )
        if finished != runs or attempts != 2 * runs:
            raise SystemExit(f"wrong result: {finished} finished runs, {attempts} attempts")


def measure(workers: int, runs: int, concurrency: int, sync_commit: str) -> dict[str, Any]:
    # The workspace's durability level sets synchronous_commit on every writing session
    # (store.db.durability): full is on, normal is off.
    durability = {"on": "full", "off": "normal"}[sync_commit]
    with tempfile.TemporaryDirectory(prefix="tether-workers-") as folder, \
            scratch_schema("bw") as url:
        root = Path(folder) / ".tether"
        root.mkdir()
        (root / "config.toml").write_text(f'[workspace]\ndurability = "{durability}"\n')
        workflow_file = Path(folder) / "short.py"
        workflow_file.write_text(WORKFLOW, encoding="utf-8")
        asyncio.run(enqueue(url, root, workflow_file, runs))
        env = {**os.environ, DATABASE_URL_ENV_VAR: url, "PYTHONPATH": str(ROOT)}
        started = time.perf_counter()
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "tui.cli.main", "worker", "--exit-when-idle",
                 "--concurrency", str(concurrency), "--poll-seconds", "0.5",
                 "--workflows", folder],
                cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        codes = [p.wait() for p in processes]
        seconds = time.perf_counter() - started
        if any(codes):
            raise SystemExit(f"a worker failed: exit codes {codes}")
        asyncio.run(check(url, root, runs))
    return {"workers": workers, "concurrency": concurrency, "runs": runs,
            "synchronous_commit": sync_commit,
            "seconds": round(seconds, 2), "runs_per_s": round(runs / seconds, 1)}


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--concurrency", type=int, default=1, help="runs per worker at once")
    parser.add_argument("--synchronous-commit", nargs="+", default=["on", "off"],
                        help="server durability per session: on (a WAL flush per commit) "
                        "and/or off (commits flushed in the background)")
    args = parser.parse_args()
    info = machine()
    results = []
    for sync_commit in args.synchronous_commit:
        rows = [measure(n, args.runs, args.concurrency, sync_commit) for n in args.workers]
        for row in rows:
            row["ratio_to_first"] = round(row["runs_per_s"] / rows[0]["runs_per_s"], 2)
        results += rows
    print(f"{'sync commit':>11} {'workers':>7} {'runs':>6} {'seconds':>8} {'runs/s':>8} "
          f"{'ratio':>6}")
    for r in results:
        print(f"{r['synchronous_commit']:>11} {r['workers']:>7} {r['runs']:>6} "
              f"{r['seconds']:>8} {r['runs_per_s']:>8} {r['ratio_to_first']:>6}")
    print(f"load at start {info['load_at_start']}")
    print(f"wrote {write_results('bench_pg_workers', info, results)}")


if __name__ == "__main__":
    main()
