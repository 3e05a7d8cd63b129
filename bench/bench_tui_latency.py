"""Commit-to-screen latency of the dashboard, with a separate writer process.

    python bench/bench_tui_latency.py [--seconds 6]

A writer process appends events through the real write path (``RunStore.append_events``, one
short transaction per 10 ms tick) at 100 and 1 000 events/s. The dashboard runs headless in this
process on the Runs view through its real read path: the watchfiles wake-up on the workspace
folder, ``PRAGMA data_version``, the incremental read of new events, the widget update (runs
table + activity feed) and the screen refresh. Latency is measured per event from its commit
timestamp (``events.at_ms``, taken inside the writer's transaction) to the moment the refreshed
screen containing it has been rendered (``call_after_refresh``). Baseline in the same run: the
same app with no file watcher and a 1 s poll, like the reference dashboard's 1 s poller.
Results: a table on stdout and ``bench/results/tui_latency.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from store.db.backends import open_database
from store.model.run_records import NewEvent
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

RESULTS = Path(__file__).with_name("results") / "tui_latency.json"
TICK_S = 0.01
WARMUP_S = 1.0


def now_ms() -> float:
    """Wall-clock milliseconds (both processes use the same clock)."""
    return time.time_ns() / 1_000_000


async def writer(root: str, rate: int, seconds: float, url: str = "") -> None:
    """Append ``rate`` events per second for ``seconds``, one transaction per tick (to the
    PostgreSQL database at ``url`` when given: ``bench_pg_tail.py``)."""
    async with await open_database(Workspace(Path(root), url or None)) as db:
        store = RunStore(db)
        run = await store.create_run("latency-bench", nodes_total=1)
        per_tick = max(1, round(rate * TICK_S))
        start = time.monotonic()
        tick = 0
        while time.monotonic() - start < seconds:
            await store.append_events(
                [NewEvent("bench.tick", run.run_id, payload={"n": tick * per_tick + i})
                 for i in range(per_tick)]
            )
            tick += 1
            delay = start + tick * TICK_S - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (values need not be sorted)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return ordered[index]


async def measure(mode: str, rate: int, seconds: float) -> dict[str, Any]:
    """One scenario: ``mode`` is "live" (watch + data_version) or "poll-1s" (the baseline)."""
    from tui.app import TetherApp

    with tempfile.TemporaryDirectory(prefix="tether-latency-") as folder:
        workspace = Workspace(Path(folder) / "ws")
        db = await open_database(workspace)
        await db.close()
        latencies: list[float] = []
        started = now_ms()

        def on_applied(batch: Any) -> None:
            shown = now_ms()
            for event in batch.events:
                if event.type == "bench.tick" and event.at_ms >= started + WARMUP_S * 1000:
                    latencies.append(shown - event.at_ms)

        live = mode == "live"
        app = TetherApp(
            workspace, watch=live, poll_interval=0.5 if live else 1.0, after_apply=on_applied
        )
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.5)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--writer", str(workspace.root), str(rate),
                str(seconds),
            )
            await proc.wait()
            await pilot.pause(1.5)  # let the last poll land (the baseline polls every 1 s)
    return {
        "mode": mode,
        "rate_events_per_s": rate,
        "events_measured": len(latencies),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "max_ms": round(max(latencies, default=float("nan")), 1),
    }


async def run_all(seconds: float) -> list[dict[str, Any]]:
    results = []
    for rate in (100, 1000):
        for mode in ("live", "poll-1s"):
            results.append(await measure(mode, rate, seconds))
    return results


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--writer", nargs=3, metavar=("ROOT", "RATE", "SECONDS"))
    args = parser.parse_args()
    if args.writer:
        root, rate, seconds = args.writer
        asyncio.run(writer(root, int(rate), float(seconds)))
        return
    results = asyncio.run(run_all(args.seconds))
    print(f"{'mode':<9} {'events/s':>8} {'events':>7} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'p99 ms':>8} {'max ms':>8}")
    for r in results:
        print(f"{r['mode']:<9} {r['rate_events_per_s']:>8} {r['events_measured']:>7} "
              f"{r['p50_ms']:>8} {r['p95_ms']:>8} {r['p99_ms']:>8} {r['max_ms']:>8}")
    RESULTS.parent.mkdir(exist_ok=True)
    machine = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": _cpu_count(),
        "sqlite": __import__("sqlite3").sqlite_version,
    }
    RESULTS.write_text(json.dumps({"machine": machine, "results": results}, indent=2) + "\n",
                       encoding="utf-8")
    print(f"wrote {RESULTS}")


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    main()
