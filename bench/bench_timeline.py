"""The Timeline tab of a run of 10 000 nodes: the store's reads and the dashboard's keys, each
beside the floor measured in the same run on the same database (a plain SQL query over the
same rows).

The workspace (cached under /tmp/tether-bench-timeline/) holds one finished run of 10 000
node iterations: 100 chains of 100 nodes, each node depending on the one before, 5 % of them
retried (a failed attempt, then a finished one), one model call per attempt; raw ``sqlite3``
into a database Tether created and migrated, then ``ANALYZE``.

Measured:

* ``read_timeline`` (the run, every node row, the bars, idle time and the critical path) beside
  the floor ``SELECT … FROM nodes WHERE run_id = ?`` of the same rows;
* ``read_details`` for the rows one screen shows (the attempts and calls of 60 node
  iterations) beside the floor: the same attempts and calls in plain SQL;
* the dashboard (the real app, headless at 200x50, Pilot): ``T`` to the first drawn frame of
  the tab, then each key (down, page down, end, zoom in, pan, fit, expand) to its drawn frame,
  and how many rows a frame draws (only the visible ones); beside it the same keys on a run of
  100 nodes, measured in the same process: what a key costs whatever the run's size (each
  figure includes Pilot's own handling of the key press).

Target: a 10k-node run stays responsive: a key is drawn within 100 ms (the BRIEF's view-switch
budget), the tab opens within 1 s.

Run:  python bench/bench_timeline.py [--nodes 10000] [--rounds 15]
Writes bench/results/bench_timeline.json (with the load average before and after).
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

from store.clock import ManualClock
from store.db.backends import open_database
from store.read.timeline import flatten, with_details
from store.read.timeline_reads import read_details, read_timeline
from store.workspace.layout import Workspace

CACHE = Path("/tmp/tether-bench-timeline")
RESULTS = Path(__file__).with_name("results") / "bench_timeline.json"
RUN_ID = "r-big"
START_MS = 1_770_000_000_000
CHAIN = 100
VISIBLE = 60
SMALL = 100
FLOOR_NODES = (
    "SELECT node_id, iteration, state, attempts, cached, depends_on_json, started_at_ms, "
    "finished_at_ms FROM nodes WHERE run_id = ?"
)
FLOOR_DETAILS = (
    "SELECT a.node_id, a.attempt, a.state, a.started_at_ms, a.finished_at_ms, c.call_id, "
    "c.started_at_ms FROM attempts a LEFT JOIN calls c ON c.run_id = a.run_id AND "
    "c.node_id = a.node_id AND c.iteration = a.iteration AND c.attempt = a.attempt "
    "WHERE a.run_id = ? AND a.node_id IN ({marks})"
)


def generate(nodes: int) -> Workspace:
    """The cached workspace holding one run of ``nodes`` node iterations."""
    found = cached(CACHE / str(nodes))
    if found is not None:
        return found
    rng = random.Random(24)
    node_rows, attempt_rows, call_rows = [], [], []
    ends: dict[str, int] = {}
    for i in range(nodes):
        chain, step = divmod(i, CHAIN)
        node_id = f"c{chain:03d}-n{step:03d}"
        parent = f"c{chain:03d}-n{step - 1:03d}" if step else None
        start = (ends[parent] if parent else START_MS + chain * 50) + rng.randint(0, 200)
        retried = rng.random() < 0.05
        attempts = 2 if retried else 1
        at = start
        for attempt in range(1, attempts + 1):
            took = rng.randint(200, 3_000)
            failed = retried and attempt == 1
            attempt_rows.append((RUN_ID, node_id, 0, attempt, "failed" if failed else "finished",
                                 "simulated", "sim-1", "timed out" if failed else None, at,
                                 at + took))
            call_rows.append((RUN_ID, node_id, 0, attempt, "simulated", "sim-1", 1, 1_000, 0, 0,
                              100, 0, 1_000, "0-8k", at + took // 2, at + took))
            at += took + (500 if failed else 0)
        ends[node_id] = at
        node_rows.append((RUN_ID, node_id, 0, "finished", attempts,
                          json.dumps([parent] if parent else []), start, at, at))
    end = max(ends.values())
    workspace, conn = fresh(CACHE / str(nodes))
    conn.execute(
        "INSERT INTO runs (run_id, workflow, status, created_at_ms, started_at_ms, "
        "finished_at_ms, heartbeat_at_ms, updated_at_ms, nodes_total, nodes_done) "
        "VALUES (?,?,?,?,?,?,?,?,?,?)",
        (RUN_ID, "big-fanout", "finished", START_MS, START_MS, end, end, end, nodes, nodes))
    conn.executemany(
        "INSERT INTO nodes (run_id, node_id, iteration, state, attempts, depends_on_json, "
        "started_at_ms, finished_at_ms, updated_at_ms) VALUES (?,?,?,?,?,?,?,?,?)", node_rows)
    conn.executemany(
        "INSERT INTO attempts (run_id, node_id, iteration, attempt, state, agent, model, error, "
        "started_at_ms, finished_at_ms) VALUES (?,?,?,?,?,?,?,?,?,?)", attempt_rows)
    conn.executemany(
        "INSERT INTO calls (run_id, node_id, iteration, attempt, agent, model, simulated, "
        "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, "
        "context_tokens, bucket, started_at_ms, finished_at_ms) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", call_rows)
    finish(workspace, conn, {"nodes": nodes, "end_ms": end})
    return workspace


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2),
            "max_ms": round(ordered[-1], 2)}


def timed(work: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = work()
    return value, (time.perf_counter() - started) * 1000


async def store_reads(workspace: Workspace, rounds: int, end_ms: int) -> dict[str, Any]:
    db = await open_database(workspace, create=False, read_only=True)
    conn = sqlite3.connect(f"file:{workspace.database_path}?mode=ro", uri=True)
    try:
        tether, floor = [], []
        timeline = None
        keys: list[str] = []
        floor_rows: list[Any] = []
        for i in range(rounds + 1):
            started = time.perf_counter()
            timeline = await read_timeline(db, RUN_ID, end_ms)
            elapsed = (time.perf_counter() - started) * 1000
            floor_rows, floor_elapsed = timed(lambda: conn.execute(FLOOR_NODES,
                                                                   (RUN_ID,)).fetchall())
            if i:
                tether.append(elapsed)
                floor.append(floor_elapsed)
        assert timeline is not None
        keys = [f"{bar.node.node_id}#{bar.node.iteration}" for bar in timeline.bars[:VISIBLE]]
        names = [k.rsplit("#", 1)[0] for k in keys]
        detail_sql = FLOOR_DETAILS.format(marks=", ".join("?" * len(names)))
        d_tether, d_floor = [], []
        details: dict[str, Any] = {}
        detail_rows: list[Any] = []
        for i in range(rounds + 1):
            started = time.perf_counter()
            details = await read_details(db, RUN_ID, keys)
            elapsed = (time.perf_counter() - started) * 1000
            detail_rows, floor_elapsed = timed(
                lambda: conn.execute(detail_sql, (RUN_ID, *names)).fetchall())
            if i:
                d_tether.append(elapsed)
                d_floor.append(floor_elapsed)
        attempts = sum(len(d.attempts) for d in details.values())
        calls = sum(len(d.calls) for d in details.values())
        return {
            "timeline": {"tether": summary(tether), "floor": summary(floor),
                         "bars": len(timeline.bars), "floor_rows": len(floor_rows),
                         "critical_path_nodes": len(timeline.critical_path)},
            "details": {"tether": summary(d_tether), "floor": summary(d_floor),
                        "node_iterations": len(details), "attempts": attempts, "calls": calls,
                        "floor_rows": len(detail_rows),
                        "floor_attempts": len({(r[0], r[1]) for r in detail_rows}),
                        "floor_calls": sum(1 for r in detail_rows if r[5] is not None)},
        }
    finally:
        conn.close()
        await db.close()


class Frames:
    """Every frame the app composes (``Screen._compositor_refresh``): when it ended and which
    widgets it drew, so a key is timed to the frame that shows it (not to Pilot's own idle
    waits, which add 40-100 ms to any key however cheap)."""

    def __init__(self) -> None:
        from textual.screen import Screen

        self.seen: list[tuple[float, set[str], bool]] = []
        self.probe: Any = lambda: True
        """Recorded with each frame (the open waits for a frame drawn with the rows)."""
        self._screen = Screen
        self._original = Screen._compositor_refresh
        frames = self

        def recording(screen: Any) -> None:
            drawn = {str(w.id) for w in screen._dirty_widgets}
            frames._original(screen)
            frames.seen.append((time.perf_counter(), drawn, bool(frames.probe())))

        Screen._compositor_refresh = recording  # type: ignore[method-assign]

    def first(self, started: float, *ids: str) -> float | None:
        """Milliseconds from ``started`` to the first frame drawing one of ``ids``."""
        for at, drawn, probed in self.seen:
            if at >= started and probed and drawn & set(ids):
                return (at - started) * 1000
        return None

    def close(self) -> None:
        self._screen._compositor_refresh = self._original  # type: ignore[method-assign]


INSPECTOR = ("nodes-table", "prompt-text", "output-text", "attempts-table", "calls-table")


async def dashboard(workspace: Workspace, end_ms: int, rounds: int) -> dict[str, Any]:
    """The real app at 200x50: T to the first frame, then keys to their frames."""
    from tui.app import TetherApp
    from tui.screens.run_detail import RunDetailScreen
    from tui.widgets.timeline_bars import TimelineBars

    drawn = {"rows": 0}
    original = TimelineBars.render_row

    def counting(self: TimelineBars, row: Any, selected: bool) -> Any:
        drawn["rows"] += 1
        return original(self, row, selected)

    TimelineBars.render_row = counting  # type: ignore[method-assign]
    frames = Frames()
    app = TetherApp(workspace, clock=ManualClock(end_ms + 1000), watch=False, poll_interval=60)
    app.animation_level = "none"
    out: dict[str, Any] = {}
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await app.poll_once()
            await pilot.pause()
            app.open_run(RUN_ID)
            while not isinstance(app.screen, RunDetailScreen):
                await pilot.pause(0.01)
            detail = app.screen
            await pilot.pause(0.2)
            bars = detail.query_one(TimelineBars)
            drawn["rows"] = 0
            frames.probe = lambda: len(bars.rows) > 1
            started = time.perf_counter()
            await pilot.press("T")
            while len(bars.rows) < 2:
                await pilot.pause(0.005)
            await pilot.pause()  # the frame the rows were drawn in
            out["open_ms"] = round(frames.first(started, "timeline") or -1, 1)
            out["open_pilot_ms"] = round((time.perf_counter() - started) * 1000, 1)
            frames.probe = lambda: True
            out["rows"] = len(bars.rows)
            out["rows_drawn_first_frame"] = drawn["rows"]
            out["visible"] = [[row.key, [list(span) for span in row.spans]]
                              for row in bars.rows[: bars.size.height]]
            keys: dict[str, list[float]] = {}
            inspector: dict[str, list[float]] = {}
            pilot_times: dict[str, list[float]] = {}
            per_frame: list[int] = []
            plan = ["down"] * rounds + ["pagedown"] * rounds + ["end", "home"] * 3 + [
                "plus", "plus", "full_stop", "comma", "0"] * 3 + ["right", "left"] * 3
            for key in plan:
                drawn["rows"] = 0
                moved = bars.cursor
                started = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                pilot_times.setdefault(key, []).append((time.perf_counter() - started) * 1000)
                shown = frames.first(started, "timeline", "timeline-axis")
                if shown is not None:
                    keys.setdefault(key, []).append(shown)
                followed = frames.first(started, *INSPECTOR)
                if followed is not None and bars.cursor != moved:
                    inspector.setdefault(key, []).append(followed)
                per_frame.append(drawn["rows"])
            out["keys"] = {key: summary(times) for key, times in keys.items()}
            out["inspector"] = {key: summary(times) for key, times in inspector.items()}
            out["pilot"] = {key: summary(times) for key, times in pilot_times.items()}
            out["rows_drawn_per_key_max"] = max(per_frame)
            out["visible_rows"] = bars.size.height
    finally:
        TimelineBars.render_row = original  # type: ignore[method-assign]
        frames.close()
    return out


async def eager_rows(workspace: Workspace, end_ms: int, count: int) -> list[Any]:
    """The first ``count`` rows of an eager build (every bar, the details of those rows read,
    nothing reused): what the dashboard must show on its first screen."""
    db = await open_database(workspace, create=False, read_only=True)
    try:
        timeline = await read_timeline(db, RUN_ID, end_ms + 1000)
        keys = [bar.node.key for bar in timeline.bars[: count + 5]]
        timeline = with_details(timeline, await read_details(db, RUN_ID, keys))
    finally:
        await db.close()
    rows = flatten(timeline, set())[:count]
    return [[row.key, [list(span) for span in row.spans]] for row in rows]


def main() -> None:
    nodes, rounds = size_and_rounds(__doc__ or "", "nodes", 10_000)
    load_before = os.getloadavg()
    workspace = generate(nodes)
    end_ms = json.loads((workspace.root / "generated.json").read_text("utf-8"))["end_ms"]
    reads = asyncio.run(store_reads(workspace, rounds, end_ms))
    app = asyncio.run(dashboard(workspace, end_ms, rounds))
    # The same keys on a run of 100 nodes: what the app costs whatever the run's size.
    small = generate(SMALL)
    small_end = json.loads((small.root / "generated.json").read_text("utf-8"))["end_ms"]
    app_small = asyncio.run(dashboard(small, small_end, rounds))
    load_after = os.getloadavg()
    t, d = reads["timeline"], reads["details"]
    print(f"Timeline of a run of {nodes:,} node iterations; load average "
          f"{load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"{'read':44} {'tether med/p95 ms':>18} {'floor med/p95 ms':>17}  same rows")
    print(f"{'read_timeline (bars, idle, critical path)':44} {t['tether']['median_ms']:>8.2f}/"
          f"{t['tether']['p95_ms']:<9.2f} {t['floor']['median_ms']:>7.2f}/"
          f"{t['floor']['p95_ms']:<9.2f}  {t['bars']:,} bars = {t['floor_rows']:,} node rows")
    print(f"{f'read_details ({VISIBLE} rows on screen)':44} {d['tether']['median_ms']:>8.2f}/"
          f"{d['tether']['p95_ms']:<9.2f} {d['floor']['median_ms']:>7.2f}/"
          f"{d['floor']['p95_ms']:<9.2f}  {d['attempts']} attempts, {d['calls']} calls = "
          f"{d['floor_attempts']} attempts, {d['floor_calls']} calls")
    print(f"dashboard 200x50: T -> first frame {app['open_ms']} ms ({app['rows']:,} rows, "
          f"{app['rows_drawn_first_frame']} drawn); rows drawn per key at most "
          f"{app['rows_drawn_per_key_max']} (visible {app['visible_rows']})")
    eager = asyncio.run(eager_rows(workspace, end_ms, len(app["visible"])))
    print(f"visible rows: {len(app['visible'])} drawn lazily; the same keys and bars as an "
          f"eager build of every bar: {'yes' if eager == app['visible'] else 'NO'}")
    print(f"{'key':10} {f'{nodes:,} nodes: frame med/p95 ms':>30} {'inspector':>16} "
          f"{'pilot':>16} {f'{SMALL} nodes: frame':>22}")
    for key, s in app["keys"].items():
        b = app_small["keys"][key]
        i = app["inspector"].get(key)
        p = app["pilot"][key]
        followed = f"{i['median_ms']:.1f}/{i['p95_ms']:.1f}" if i else "-"
        print(f"{key:10} {s['median_ms']:>21.1f}/{s['p95_ms']:<8.1f} {followed:>16} "
              f"{p['median_ms']:>8.1f}/{p['p95_ms']:<7.1f} {b['median_ms']:>14.1f}/"
              f"{b['p95_ms']:<7.1f}")
    print("frame: key to the frame that draws the timeline; inspector: to the frame where the "
          "inspector follows the cursor; pilot: Pilot's press + pause round trip (its idle "
          "waits included)")
    print(f"T -> first frame: {app['open_ms']} ms at {nodes:,} nodes "
          f"(Pilot round trip {app['open_pilot_ms']} ms), {app_small['open_ms']} ms at {SMALL}")
    worst = max(s["p95_ms"] for s in app["keys"].values())
    print(f"worst key p95 {worst:.1f} ms (target 100 ms): "
          f"{'within' if worst <= 100 else 'OVER'}; tab open {app['open_ms']} ms (target 1 s): "
          f"{'within' if app['open_ms'] <= 1000 else 'OVER'}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"nodes": nodes, "reads": reads, "dashboard": app,
                                   "dashboard_small": app_small,
                                   "load_before": load_before, "load_after": load_after,
                                   "machine": machine()}, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
