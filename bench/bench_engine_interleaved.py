"""Engine overhead per task, the code before a change against the code after it, interleaved.

The same workload as ``bench/bench_engine_overhead.py`` (its ``run_tether``: the engine
``tether run`` uses, an instant agent reporting one call per task, every node, attempt, call
and event written), run on two source trees in turn: ``--before`` names a checkout of the code
before (for instance ``git worktree add /tmp/tether-main main``), the tree holding this file is
the code after. Each measurement is a fresh Python process whose ``PYTHONPATH`` starts with
the tree measured (after a 4-node warm-up in that process); the two sides alternate within
every round, and which goes first alternates between rounds, so a burst of load from other
jobs falls on both. Cases (default): ``normal`` chain of 1 000, ``normal`` layers of 1 000 and
10 000, ``full`` chain of 1 000 (there one SQLite commit, one ``fsync``, is the floor: the
commit floor is measured in every round beside it).

Printed per case: best and median ms per task (wall, and CPU) of each side over ``--rounds``,
after ÷ before, commits per task, the load average, and the outcome of each side's runs (node
and attempt counts by state, events, tokens, the PRAGMAs read back from every writing
connection), which must be equal on both sides or the bench stops.

    git -C . worktree add /tmp/tether-before main
    python bench/bench_engine_interleaved.py --before /tmp/tether-before [--rounds 3]
    results: bench/results/bench_engine_interleaved.json
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

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
CASES = ("normal:chain:1000", "normal:layers:1000", "normal:layers:10000", "full:chain:1000")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as printed."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def child(root: Path, shape: str, n: int, durability: str) -> None:
    """One measurement of the tree at ``root`` (this process imports its engine), printed as
    one JSON line: warm-up on 4 nodes, then ``n``."""
    sys.path.insert(0, str(HERE))
    from bench_engine_overhead import run_tether  # the harness: the same on both sides

    sys.path.insert(0, str(root))  # ahead of the harness's own tree: the engine measured
    import engine

    where = Path(engine.__file__).resolve()
    if root.resolve() not in where.parents:
        raise SystemExit(f"imported {where}, not the engine under {root}")
    asyncio.run(run_tether(shape, 4, durability))
    result = asyncio.run(run_tether(shape, n, durability))
    result["engine_file"] = str(where)
    print(json.dumps(result), flush=True)


def measure(root: Path, shape: str, n: int, durability: str) -> dict[str, Any]:
    """Run :func:`child` for ``root`` in a fresh process and return its result."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    completed = subprocess.run(
        [sys.executable, __file__, "--child", str(root), shape, str(n), durability],
        capture_output=True, text=True, check=False, timeout=1800, env=env,
    )
    if completed.returncode != 0:
        raise SystemExit(f"{root} {durability} {shape} {n} failed:\n{completed.stderr}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def outcome(result: dict[str, Any]) -> dict[str, Any]:
    """What must be equal on both sides: the run's answers, states and PRAGMAs."""
    return {"answers": result["answers"], "states": result["states"],
            "pragmas": result["pragmas"], "nodes": result["nodes"]}


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Best and median per-task figures of one side's rounds."""
    n = results[0]["nodes"]
    wall = [r["seconds"] * 1000 / n for r in results]
    cpu = [r["cpu_seconds"] * 1000 / n for r in results]
    return {
        "ms_per_task": wall,
        "best_ms": min(wall),
        "median_ms": statistics.median(wall),
        "best_cpu_ms": min(cpu),
        "median_cpu_ms": statistics.median(cpu),
        "commits_per_task": statistics.median(r["commits"] / n for r in results),
    }


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code before")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+", default=list(CASES),
                        help="DURABILITY:SHAPE:NODES, e.g. normal:layers:10000")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "bench/results/bench_engine_interleaved.json")
    parser.add_argument("--child", nargs=4, metavar=("ROOT", "SHAPE", "N", "DURABILITY"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        root, shape, n, durability = args.child
        child(Path(root), shape, int(n), durability)
        return
    if args.before is None or not (args.before / "engine").is_dir():
        parser.error("--before must name a checkout of the code before (holding engine/)")
    sys.path.insert(0, str(HERE))
    from engine_floors import commit_floor_ms

    sides = {"before": args.before.resolve(), "after": ROOT}
    cases = [(d, s, int(n)) for d, s, n in (case.split(":") for case in args.cases)]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        c: {"before": [], "after": []} for c in args.cases}
    loads: dict[str, list[str]] = {c: [] for c in args.cases}
    floors: dict[str, list[float]] = {c: [] for c in args.cases}
    load_before = load_average()
    print(f"before: {sides['before']}\nafter:  {sides['after']}\nload average before: "
          f"{load_before}", flush=True)
    for round_index in range(args.rounds):
        order = ["before", "after"] if round_index % 2 == 0 else ["after", "before"]
        for name, (durability, shape, n) in zip(args.cases, cases, strict=True):
            for side in order:
                result = measure(sides[side], shape, n, durability)
                runs[name][side].append(result)
                print(f"  round {round_index + 1} {name:<22} {side:<6} "
                      f"{result['seconds'] * 1000 / n:.3f} ms/task "
                      f"(cpu {result['cpu_seconds'] * 1000 / n:.3f})  load {load_average()}",
                      flush=True)
            floors[name].append(commit_floor_ms(durability))
            loads[name].append(load_average())
    rows = []
    print(f"\nbest and median of {args.rounds} rounds, ms per task (wall; CPU in brackets)")
    for name, (durability, shape, n) in zip(args.cases, cases, strict=True):
        sides_runs = runs[name]
        seen = {json.dumps(outcome(r), sort_keys=True)
                for side in sides_runs.values() for r in side}
        if len(seen) != 1:
            raise SystemExit(f"{name}: the runs' outcomes differ:\n" + "\n".join(seen))
        before, after = summary(sides_runs["before"]), summary(sides_runs["after"])
        floor = min(floors[name])
        row = {
            "case": name, "durability": durability, "shape": shape, "nodes": n,
            "before": before, "after": after,
            "best_after_over_before": after["best_ms"] / before["best_ms"],
            "median_after_over_before": after["median_ms"] / before["median_ms"],
            "commit_floor_ms": floor,
            "outcome": outcome(sides_runs["after"][0]),
            "load_average": loads[name],
        }
        if durability == "full":
            for side, figures in (("before", before), ("after", after)):
                row[f"{side}_best_over_commit_floor"] = figures["best_ms"] / (
                    figures["commits_per_task"] * floor)
        rows.append(row)
        extra = ""
        if durability == "full":
            extra = (f"  ÷ commit floor ({floor:.3f} ms): before "
                     f"{row['before_best_over_commit_floor']:.2f}x after "
                     f"{row['after_best_over_commit_floor']:.2f}x (best)")
        print(
            f"{name:<22} before best {before['best_ms']:.3f} ({before['best_cpu_ms']:.3f}) "
            f"median {before['median_ms']:.3f} ({before['median_cpu_ms']:.3f})  |  after best "
            f"{after['best_ms']:.3f} ({after['best_cpu_ms']:.3f}) median "
            f"{after['median_ms']:.3f} ({after['median_cpu_ms']:.3f})  |  after/before best "
            f"{row['best_after_over_before']:.2f}x median {row['median_after_over_before']:.2f}x"
            f"  |  {after['commits_per_task']:.2f} commits/task{extra}  |  load "
            f"{' / '.join(loads[name])}",
            flush=True,
        )
        print(f"{'':<22} same outcome both sides: {json.dumps(row['outcome']['answers'])} "
              f"{json.dumps(row['outcome']['states'])}")
    load_after = load_average()
    print(f"load average after: {load_after}")
    document = {
        "benchmark": "engine_interleaved",
        "before": str(sides["before"]),
        "before_commit": _commit(sides["before"]),
        "after_commit": _commit(ROOT),
        "rounds": args.rounds,
        "rows": rows,
        "load_average": {"before": load_before, "after": load_after},
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out}")


def _commit(root: Path) -> str:
    """The tree's commit (``+ changes`` when its work tree differs from it)."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "engine",
                            "store"], capture_output=True, text=True, check=False).stdout
    return head + (" + changes" if dirty.strip() else "")


if __name__ == "__main__":
    main()
