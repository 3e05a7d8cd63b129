"""What a write transaction's round trips cost on PostgreSQL: the commit path a group takes
(store/db/postgres/pg_group.py) beside two ways of sending fewer round trips, on one bare
connection, so the engine's own work is out of the figures.

    eval "$(.ci/postgres-up)"; python bench/bench_pg_commit_path.py [--commits 2000]

Each variant runs ``--commits`` transactions of one small INSERT at ``synchronous_commit=off``
(the ``normal`` level), rounds interleaved, best and median per variant, wall and the
process's CPU per transaction:

* ``today``: ``BEGIN`` and the INSERT pipelined (one sync), then ``COMMIT``, then the
  ``NOTIFY`` in a transaction of its own: three round trips;
* ``commit+notify piped``: the same, ``COMMIT`` and ``NOTIFY`` in one pipeline: two;
* ``one pipeline``: everything in one pipeline, one round trip (not safe for Tether as it
  stands: a commit cut off could not be resolved, the transaction's id would come back in the
  same answer as the commit's);
* ``bare round trip``: ``SELECT 1``, for scale.

Results: a table and ``bench/results/bench_pg_commit_path.json``.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pg_support import machine, scratch_schema, write_results

NOTIFY = "SELECT pg_notify(%s, '')"


def variants(conn: Any) -> dict[str, Callable[[int], None]]:
    """The commit paths measured, each one transaction of one INSERT."""

    def transaction(syncs: int, n: int) -> None:
        # syncs: 3 (today), 2 (COMMIT and NOTIFY in one pipeline), 1 (all in one pipeline).
        with conn.pipeline():
            conn.execute("BEGIN")  # queued: the pipeline waits for nothing
            conn.execute("INSERT INTO t VALUES (%s)", (n,))
            if syncs == 1:
                conn.execute("COMMIT")
                conn.execute(NOTIFY, ("bench",))
        if syncs == 3:
            conn.execute("COMMIT")
            conn.execute(NOTIFY, ("bench",))
        elif syncs == 2:
            committing = conn.cursor()
            with conn.pipeline():
                committing.execute("COMMIT", prepare=False)
                conn.cursor().execute(NOTIFY, ("bench",))

    def bare_round_trip(n: int) -> None:
        conn.execute("SELECT 1")

    return {"today": functools.partial(transaction, 3),
            "commit+notify piped": functools.partial(transaction, 2),
            "one pipeline": functools.partial(transaction, 1),
            "bare round trip": bare_round_trip}


def main() -> None:
    """Command-line entry."""
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    info = machine()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with scratch_schema("cpath") as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute("CREATE TABLE t (n bigint)")
        paths = variants(conn)
        for _ in range(args.rounds):
            for name, path in paths.items():
                started, used = time.perf_counter(), time.process_time()
                for n in range(args.commits):
                    path(n)
                wall.setdefault(name, []).append(
                    (time.perf_counter() - started) * 1000 / args.commits)
                cpu.setdefault(name, []).append(
                    (time.process_time() - used) * 1000 / args.commits)
        rows = conn.execute("SELECT count(*) FROM t").fetchone()
        assert rows is not None and rows[0] == 3 * args.rounds * args.commits, rows
    results = []
    print(f"{'variant':<22} {'wall ms best / median':>22} {'client CPU ms best / median':>28}")
    for name in wall:
        results.append({"variant": name, "wall_ms_best": round(min(wall[name]), 4),
                        "wall_ms_median": round(statistics.median(wall[name]), 4),
                        "cpu_ms_best": round(min(cpu[name]), 4),
                        "cpu_ms_median": round(statistics.median(cpu[name]), 4)})
        print(f"{name:<22} {min(wall[name]):>10.3f} / {statistics.median(wall[name]):.3f}"
              f" {min(cpu[name]):>16.3f} / {statistics.median(cpu[name]):.3f}")
    print(f"load at start {info['load_at_start']}")
    print(f"wrote {write_results('bench_pg_commit_path', info, results)}")


if __name__ == "__main__":
    main()
