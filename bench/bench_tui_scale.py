"""Dashboard cost on a ~1 GB workspace against a ~10 MB one: first paint, view switch, RSS.

    python bench/bench_tui_scale.py           # generates the workspaces first if needed

Each workspace is measured in a fresh child process (so RSS is its own): the dashboard runs
headless at 160x48; *first paint* is the time from starting the app to the Runs view having
been rendered with data; *view switch* is the time from pressing a view's key to that view
having been rendered with its data (``2`` Tokens, ``3`` Memory, ``4`` Handoffs, ``1`` Runs,
five rounds; the first visit, the median and the worst); *RSS* is the child's resident and peak
memory at the end. The first round starts ``--settle`` seconds after the first paint (a person
reads the Runs view before pressing a key; the app warms the other views meanwhile).
The 10 MB workspace has the same shape with 1/100 of the history: the dashboard's cost should
not grow with history. Results: a table and ``bench/results/tui_scale.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from gen_workspace import SIZES, generate

RESULTS = Path(__file__).with_name("results") / "tui_scale.json"
ROUNDS = 5
VIEWS = (("2", "tokens"), ("3", "memory"), ("4", "handoffs"), ("1", "runs"))


def _memory_kb() -> tuple[int, int]:
    fields: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


async def child(size: str, settle_s: float) -> dict[str, Any]:
    """Measure one workspace inside this (fresh) process."""
    from store.workspace.layout import Workspace
    from tui.app import TetherApp

    workspace = Workspace(Path("/tmp/tether-bench-ws") / size)
    painted = asyncio.Event()
    marks: list[tuple[float, str]] = []

    def on_applied(_batch: Any) -> None:
        screen = app.live_screen()
        marks.append((time.perf_counter(), getattr(screen, "MODE", "")))
        painted.set()

    started = time.perf_counter()
    app = TetherApp(workspace, watch=True, after_apply=on_applied)
    switches: dict[str, list[float]] = {name: [] for _, name in VIEWS}
    reads: dict[str, list[float]] = {name: [] for _, name in VIEWS}
    apply_times: list[tuple[float, str]] = []
    original_apply = app._apply

    async def timed_apply(screen: Any, batch: Any) -> None:
        # The part that reads the database and updates widgets (the rest is Textual drawing).
        began = time.perf_counter()
        await original_apply(screen, batch)
        apply_times.append((time.perf_counter() - began, getattr(screen, "MODE", "")))

    app._apply = timed_apply  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await asyncio.wait_for(painted.wait(), timeout=60)
        first_paint = marks[0][0] - started
        await pilot.pause(settle_s)
        for _round in range(ROUNDS):
            for key, name in VIEWS:
                await pilot.pause(0.3)
                painted.clear()
                first_mark, first_apply = len(marks), len(apply_times)
                pressed = time.perf_counter()
                await pilot.press(key)
                # The first paint of the new view (a 1 s tick may repaint the old one first).
                while not any(mode == name for _, mode in marks[first_mark:]):
                    painted.clear()
                    await asyncio.wait_for(painted.wait(), timeout=60)
                index = next(i for i in range(first_mark, len(marks)) if marks[i][1] == name)
                switches[name].append(marks[index][0] - pressed)
                reads[name].append(
                    next(t for t, mode in apply_times[first_apply:] if mode == name)
                )
        rss_kb, peak_kb = _memory_kb()
    return {
        "size": size,
        "database_mb": round(workspace.database_path.stat().st_size / 1e6, 1),
        "first_paint_ms": round(first_paint * 1000, 1),
        "switch_ms": {
            name: {"first": round(v[0] * 1000, 1),
                   "median": round(statistics.median(v) * 1000, 1),
                   "max": round(max(v) * 1000, 1)}
            for name, v in switches.items()
        },
        "read_and_update_ms": {
            name: round(statistics.median(v) * 1000, 1) for name, v in reads.items()
        },
        "rss_mb": round(rss_kb / 1024, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
    }


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=sorted(SIZES))
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["small", "big"],
                        help="workspaces to measure (small: ~10 MB, big: ~1 GB)")
    parser.add_argument("--settle", type=float, default=1.0,
                        help="seconds between the first paint and the first key press")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.settle))))
        return
    results = []
    for size in args.sizes:
        generate(size)
        out = subprocess.run(
            [sys.executable, __file__, "--child", size, "--settle", str(args.settle)],
            capture_output=True, text=True, check=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{'workspace':<10} {'DB MB':>8} {'first paint':>12} "
          + " ".join(f"{name + ' switch':>16}" for _, name in VIEWS)
          + f" {'RSS MB':>8} {'peak MB':>8}")
    for r in results:
        print(f"{r['size']:<10} {r['database_mb']:>8} {r['first_paint_ms']:>10} ms "
              + " ".join(f"{r['switch_ms'][name]['first']:>6}/"
                         f"{r['switch_ms'][name]['median']}/{r['switch_ms'][name]['max']:<5}ms"
                         for _, name in VIEWS)
              + f" {r['rss_mb']:>8} {r['peak_rss_mb']:>8}")
    print(f"(switch: first/median/max over {ROUNDS} rounds, key press to rendered view; "
          f"first press {args.settle} s after the first paint)")
    for r in results:
        parts = ", ".join(f"{k} {v} ms" for k, v in r["read_and_update_ms"].items())
        print(f"{r['size']}: of which reading the database and updating widgets: {parts}")
    machine = {"python": platform.python_version(), "platform": platform.platform(),
               "cpus": os.cpu_count()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine, "settle_s": args.settle,
                                   "results": results}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
