"""Commit-to-screen latency of the dashboard on PostgreSQL (LISTEN/NOTIFY) beside SQLite
(watchfiles + data_version), measured in the same run.

    eval "$(.ci/postgres-up)"; python bench/bench_pg_tail.py [--seconds 6] [--rates 100 1000]

A writer process appends events through the real write path (``RunStore.append_events``, one
transaction per 10 ms tick) at each rate. The dashboard runs headless in this process on the
Runs view through its real read path: on PostgreSQL the notification sent at each commit wakes
the tail, which reads the new events (and any that committed late); on SQLite the folder watch
wakes it.
Latency per event: from its commit timestamp (``events.at_ms``, taken in the writer's
transaction) to the rendered screen that shows it. The poll timer is set to 30 s on PostgreSQL,
so nothing is found by polling. Rounds of the two backends are interleaved. Results: a table and
``bench/results/bench_pg_tail.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tui_latency import WARMUP_S, now_ms, writer  # noqa: E402
from pg_support import machine, percentile, scratch_schema, write_results  # noqa: E402

from store.db.backends import open_database  # noqa: E402
from store.workspace.layout import Workspace  # noqa: E402


async def measure(backend: str, url: str, rate: int, seconds: float) -> dict[str, Any]:
    from tui.app import TetherApp

    with tempfile.TemporaryDirectory(prefix="tether-pg-latency-") as folder:
        workspace = Workspace(Path(folder) / "ws", url if backend == "postgresql" else None)
        await (await open_database(workspace)).close()
        latencies: list[float] = []
        started = now_ms()

        def on_applied(batch: Any) -> None:
            shown = now_ms()
            for event in batch.events:
                if event.type == "bench.tick" and event.at_ms >= started + WARMUP_S * 1000:
                    latencies.append(shown - event.at_ms)

        poll = 30.0 if backend == "postgresql" else 0.5
        app = TetherApp(workspace, watch=True, poll_interval=poll, after_apply=on_applied)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(1.0)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--writer", str(workspace.root),
                workspace.database_url or "", str(rate), str(seconds),
            )
            await proc.wait()
            await pilot.pause(1.0)
    return {
        "backend": backend,
        "rate_events_per_s": rate,
        "events_measured": len(latencies),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "max_ms": round(max(latencies, default=float("nan")), 1),
    }


async def run_all(rates: list[int], seconds: float) -> list[dict[str, Any]]:
    results = []
    for rate in rates:
        for backend in ("postgresql", "sqlite"):
            with scratch_schema("bt") as url:
                results.append(await measure(backend, url, rate, seconds))
    return results


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rates", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--writer", nargs=4, metavar=("ROOT", "URL", "RATE", "SECONDS"))
    args = parser.parse_args()
    if args.writer:
        root, url, rate, seconds = args.writer
        asyncio.run(writer(root, int(rate), float(seconds), url))
        return
    info = machine()
    results = asyncio.run(run_all(args.rates, args.seconds))
    print(f"{'backend':<10} {'events/s':>8} {'events':>7} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'p99 ms':>8} {'max ms':>8}")
    for r in results:
        print(f"{r['backend']:<10} {r['rate_events_per_s']:>8} {r['events_measured']:>7} "
              f"{r['p50_ms']:>8} {r['p95_ms']:>8} {r['p99_ms']:>8} {r['max_ms']:>8}")
    print(f"load at start {info['load_at_start']}")
    print(f"wrote {write_results('bench_pg_tail', info, results)}")


if __name__ == "__main__":
    main()
