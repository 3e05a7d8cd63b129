"""What the dashboard keeps per run while its embedded engine churns: an object census and
tracemalloc diffs between two points after the Runs view's window is full.

    python bench/census_dashboard_churn.py WORKSPACE [--at 60 --runs 60] [--frames 0] [--explore]

The dashboard (headless, 160x48, ``run_test``) on WORKSPACE with the churn of
bench/churn_dashboard.py (code review with hybrid recall, every fifth run a handoff, the oldest
runs deleted past 250). Once the Runs view shows its full window of 200 runs and ``--at`` runs
are done, a census is taken (live objects counted by type, after a full collection) and, with
``--frames N`` (traced from the start, several times slower), a tracemalloc snapshot; again
``--runs`` runs later. Printed: the types whose count grew, and the allocation sites (by
traceback) that grew most, each divided by the runs between; ``--explore``: who holds the
styles caches no live widget owns.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from churn_dashboard import churn  # noqa: E402

from store.workspace.layout import Workspace  # noqa: E402
from tui.app import TetherApp  # noqa: E402
from tui.screens.runs_view import RUNS_SHOWN, RunsScreen  # noqa: E402
from tui.widgets.keyed_table import KeyedTable  # noqa: E402


def census() -> Counter[str]:
    """Live objects the collector tracks, by type name (frozen ones included)."""
    gc.collect()
    objects = gc.get_objects()
    counts = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)
    return counts


def snapshot() -> tracemalloc.Snapshot | None:
    return tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None


def started(status: Path) -> int:
    try:
        return int(json.loads(status.read_text()).get("started", 0))
    except (OSError, ValueError):
        return 0


def shown(app: TetherApp) -> int:
    screen = app.screen
    if not isinstance(screen, RunsScreen):
        return 0
    return len(screen.query_one("#runs-table", KeyedTable).keys)


async def until_runs(app: TetherApp, status: Path, runs: int, full: bool) -> int:
    while started(status) < runs or (full and shown(app) < RUNS_SHOWN):
        await asyncio.sleep(0.5)
    return started(status)


def chain(obj: object, depth: int, seen: set[int]) -> list[str]:
    """Who holds ``obj``: referrer types up to ``depth`` levels (first few of each)."""
    lines: list[str] = []
    frontier = [obj]
    for level in range(depth):
        found = []
        for item in frontier:
            for ref in gc.get_referrers(item):
                if id(ref) in seen or ref is frontier or isinstance(ref, type(sys._getframe())):
                    continue
                seen.add(id(ref))
                found.append(ref)
        described = []
        for ref in found[:6]:
            text = type(ref).__qualname__
            if isinstance(ref, dict):
                text += "{" + ",".join(str(k)[:30] for k in list(ref)[:5]) + "}"
            described.append(text)
        lines.append(f"    {'  ' * level}<- " + " | ".join(described))
        frontier = found[:6]
    return lines


def explore() -> None:
    """Where the StylesCache objects no live widget owns are held."""
    from textual._styles_cache import StylesCache
    from textual.widget import Widget

    gc.collect()
    objects = gc.get_objects()
    owned = {id(o._styles_cache) for o in objects if isinstance(o, Widget)}
    caches = [o for o in objects if isinstance(o, StylesCache)]
    widgets = [o for o in objects if isinstance(o, Widget)]
    print(f"widgets {len(widgets)}, styles caches {len(caches)}, "
          f"owned by a widget {sum(id(c) in owned for c in caches)}")
    kinds = Counter(f"{type(w).__qualname__} closed={w._closed} closing={w._closing} "
                    f"attached={w.is_attached}" for w in widgets)
    for kind, count in kinds.most_common(15):
        print(f"  {count:5d} {kind}")
    orphans = [c for c in caches if id(c) not in owned]
    print(f"get_inner_outer: {StylesCache.get_inner_outer.cache_info()}")
    in_lru: set[int] = set()
    for o in objects:
        if isinstance(o, tuple) and o and isinstance(o[0], StylesCache) and len(o) >= 3:
            in_lru.add(id(o[0]))
    lines = Counter(len(c._cache) for c in orphans)
    held = sum(id(c) in in_lru for c in orphans)
    print(f"orphans {len(orphans)}, in get_inner_outer's keys {held}, "
          f"lines they hold: {sorted(lines.items())[:12]}")
    del objects
    orphans = [c for c in orphans if id(c) not in in_lru]
    for cache in orphans[:3]:
        print(f"orphan styles cache, lines cached {len(cache._cache)}")
        print("\n".join(chain(cache, 6, {id(orphans), id(caches)})))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--at", type=int, default=60)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--explore", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    args.workspace.mkdir(parents=True, exist_ok=True)
    config = args.workspace / "config.toml"
    if not config.exists():
        config.write_text('[memory]\nmode = "hybrid"\n')
    status = args.workspace.parent / f"{args.workspace.name}-census.json"
    status.unlink(missing_ok=True)
    app = TetherApp(Workspace(args.workspace), background=[lambda app: churn(app, status)])
    gc.freeze = lambda: None  # type: ignore[assignment]  # census sees every object
    if args.frames:
        # From the start: traced only from the first point, the turnover of bounded caches
        # (untraced entries evicted, traced ones added) would read as growth.
        tracemalloc.start(args.frames)
    async with app.run_test(size=(160, 48)):
        first = await until_runs(app, status, args.at, full=True)
        print(f"window full at {first} runs", file=sys.stderr, flush=True)
        before, snap_before = census(), snapshot()
        second = await until_runs(app, status, first + args.runs, full=False)
        after, snap_after = census(), snapshot()
        rows = shown(app)
        if args.explore:
            explore()
        app.exit()
    runs = second - first
    print(f"census at {first} and {second} runs ({runs} between), Runs view {rows}")
    grown = [(name, after[name] - before[name]) for name in after | before]
    grown.sort(key=lambda item: -item[1])
    print("types that grew (count, per run):")
    for name, delta in grown[: args.top]:
        if delta > 0:
            print(f"  {delta:+7d}  {delta / runs:7.2f}  {name}")
    if snap_before is None or snap_after is None:
        return
    print("allocation sites that grew (KB, KB per run):")
    stats = snap_after.compare_to(snap_before, "traceback")
    for stat in stats[: args.top]:
        if stat.size_diff <= 0:
            continue
        print(f"  {stat.size_diff / 1024:+9.1f} KB {stat.size_diff / 1024 / runs:6.2f}/run "
              f"{stat.count_diff:+6d} blocks")
        for line in stat.traceback.format()[-2 * args.frames:]:
            print("      " + line.strip())
    total = sum(s.size_diff for s in stats)
    print(f"tracemalloc total growth {total / 1024:+.1f} KB, {total / 1024 / runs:.2f} KB/run")


if __name__ == "__main__":
    asyncio.run(main())
