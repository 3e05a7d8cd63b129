"""Engine overhead per task and memory per node: Tether vs LangGraph, same shapes, same durability.

Three shapes, each at several sizes (default 100, 1 000 and 10 000 nodes):

* ``chain``: every node depends on the one before (no parallelism at all);
* ``layers``: layers of 10 nodes, every node joining two nodes of the layer before;
* ``fanout``: one ``plan`` node, N-2 items fanned out from it, one ``join`` node reading them all.

Every prompt reads the output of its dependencies (``ctx.output``), and the agent answers at once
with one metered call, so what is timed is the engine itself: scheduling, prompt rendering and
durable state. Tether writes every node, attempt, call (with its usage rollups) and event to the
workspace database; LangGraph runs the same graph with ``langgraph-checkpoint-sqlite``
(``AsyncSqliteSaver``) in its ``sync`` durability mode (a step's checkpoint is written before the
next step starts: the same promise as Tether's "a finished node is durable before anything
depends on it"); ``--lg-modes sync async`` adds LangGraph's weaker ``async`` mode. Both sides
use WAL and the same ``synchronous`` level (``--durability normal full``); the PRAGMAs actually in
effect are read back from every writing connection after each run and printed.

Each measurement runs in its own fresh Python process (so peak memory is that run's own),
engines interleaved round by round; the best time and the smallest memory of ``--repeat`` rounds
are kept (other load on a shared machine only ever adds). Memory per node is the growth of the
process's peak RSS from just before the graph is built to the end of the run, divided by nodes.

    python bench/bench_engine_overhead.py                          # every shape, size, level
    python bench/bench_engine_overhead.py --sizes 1000 --durability full --repeat 3
    results: bench/results/bench_engine_overhead.json

LangGraph is a bench-only dependency (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_floors import (  # noqa: E402
    WIDTH,
    bare_walk,
    commit_floor_ms,
    count_statements,
    layered,
)
from engine_peer_langgraph import run_langgraph  # noqa: E402

SHAPES = ("chain", "layers", "fanout")
LG_MODES = ("sync", "async")


def rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- Tether ------------------------------------------------------------------------------------


def instant_agent() -> Any:
    """An agent that answers immediately and reports one call, so metering is part of what is
    measured (bench_otel_export runs the same one)."""
    from engine.agents.agent import AgentRequest, AgentResult, ModelCall
    from store.model.token_lanes import TokenUsage

    class InstantAgent:
        name = "instant"
        native_structured_output = False
        simulated = True

        async def run(self, request: AgentRequest) -> AgentResult:
            await request.on_call(
                ModelCall(TokenUsage(input=10, cache_read=90, output=5), "instant")
            )
            return AgentResult(text="ok " + request.node_id)

    return InstantAgent()


async def run_tether(
    shape: str, n: int, durability: str, *, trace_heap: bool = False
) -> dict[str, Any]:
    from engine.run.engine_config import EngineConfig
    from engine.run.wiring import open_engine
    from engine.workflow.context import TaskContext
    from engine.workflow.definition import Workflow
    from store.db.sqlite.sqlite_database import SqliteDatabase
    from store.workspace.layout import Workspace

    def prompt_reading(deps: list[str], node: str) -> Any:
        def prompt(ctx: TaskContext) -> str:
            return f"do {node} after " + ",".join(str(ctx.output(d))[:12] for d in deps)

        return prompt

    with tempfile.TemporaryDirectory() as folder:
        db = await SqliteDatabase.open(
            Workspace(Path(folder) / ".tether"), durability=durability
        )
        try:
            before = rss_bytes()
            workflow = Workflow(
                "bench",
                agents={"instant": instant_agent()},
                default_agent="instant",
                concurrency=WIDTH,
            )
            if shape == "fanout":
                workflow.add_task("plan", "plan the items")
                workflow.add_task(
                    "item",
                    lambda ctx: f"item {ctx.item} of {str(ctx.output('plan'))[:12]}",
                    depends_on=["plan"],
                    items=list(range(n - 2)),
                    max_items=n,
                )
                workflow.add_task(
                    "join", lambda ctx: f"join {len(ctx.output('item'))}", depends_on=["item"]
                )
                expected = n
            else:
                graph = layered(shape, n)
                for node, deps in graph.items():
                    workflow.add_task(node, prompt_reading(deps, node), depends_on=deps)
                expected = len(graph)
            # The engine `tether run` uses: the workspace's config and every standard hook
            # (memory runtime, ceiling guard, handoff), none of which this workflow needs.
            engine = open_engine(db, config=EngineConfig(poll_interval_s=0.5))
            groups = db.writes.groups
            if trace_heap:
                tracemalloc.start()
            started, cpu = time.perf_counter(), time.process_time()
            outcome = await engine.start(workflow, {})
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            groups = db.writes.groups - groups
            heap_peak = 0
            if trace_heap:
                heap_peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            peak = rss_bytes()
            assert outcome.status == "finished", outcome.error
            count = await db.fetch_value("SELECT count(*) FROM attempts WHERE state = 'finished'")
            assert count == expected, (count, expected)
            events = await db.fetch_value("SELECT count(*) FROM events")
            tokens = await db.fetch_value(
                "SELECT input_tokens + cache_read_tokens + output_tokens FROM runs")
            pragmas = await db.writer_pragmas()
            states = {
                f"{table} {state}": count
                for table in ("nodes", "attempts")
                for state, count in await db.fetch_all(
                    f"SELECT state, count(*) FROM {table} GROUP BY state ORDER BY state")
            }
        finally:
            await db.close()
    return {
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "nodes": expected,
        "rss_growth": peak - before,
        "heap_peak": heap_peak,
        "commits": groups,
        "answers": {"finished": count, "events": events, "tokens": tokens},
        "states": states,
        "pragmas": pragmas,
    }


# -- orchestration -----------------------------------------------------------------------------


def one(engine: str, shape: str, n: int, durability: str) -> dict[str, Any]:
    """Measure one engine once in a fresh process; returns the child's JSON line."""
    completed = subprocess.run(
        [sys.executable, __file__, "--one", engine, shape, str(n), durability],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if completed.returncode != 0:
        raise SystemExit(f"{engine} {shape} {n} {durability} failed:\n{completed.stderr}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def child(engine: str, shape: str, n: int, durability: str) -> None:
    """One measurement, after a warm-up run of the same engine on a 4-node graph of the same
    shape (imports, statement caches, first-call costs: every engine pays them once per
    process, and a long-lived engine, such as the dashboard's, pays them once for all its
    runs)."""
    try:
        if engine == "dbos":
            from engine_peer_dbos import run_dbos

            result = asyncio.run(run_dbos(shape, (4, n), durability, rss_bytes))
        elif engine == "floor":
            for size in (4, n):
                result = asyncio.run(bare_walk(shape, size, instant_agent(), _bare_request))
            result.update(pragmas={}, rss_growth=0)
        for size in (4, n) if engine.startswith(("tether", "langgraph")) else ():
            if engine == "tether":
                result = asyncio.run(run_tether(shape, size, durability))
            else:
                result = asyncio.run(run_langgraph(shape, size, durability, engine.split(":")[1]))
        if engine == "tether":
            # Python heap at its peak during a second run, traced (slower, so not timed): the
            # engine's own memory per node, free of the allocator's granularity; and every
            # statement SQLite ran in that run, counted on its trace.
            counted = count_statements()
            traced = asyncio.run(run_tether(shape, n, durability, trace_heap=True))
            result["heap_peak"] = traced["heap_peak"]
            result["statements"] = counted[0]
        print(json.dumps(result), flush=True)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)  # a worker thread left behind must not keep a failed run alive
    os._exit(0)


def _bare_request(node: str, prompt: str) -> Any:
    """What the instant agent reads of a request, for the bare walk (no engine behind it)."""
    from types import SimpleNamespace

    async def on_call(_call: Any) -> None:
        return None

    return SimpleNamespace(node_id=node, prompt=prompt, on_call=on_call)


def check_pragmas(result: dict[str, Any], durability: str) -> None:
    for name, found in result["pragmas"].items():
        if found != {"journal_mode": "wal", "synchronous": durability}:
            raise SystemExit(f"connection {name} ran with {found}, not WAL + {durability}")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=4, metavar=("ENGINE", "SHAPE", "N", "DURABILITY"))
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 1000, 10_000])
    parser.add_argument(
        "--durability", nargs="+", choices=("normal", "full"), default=["normal", "full"]
    )
    parser.add_argument("--lg-modes", nargs="+", choices=LG_MODES, default=["sync"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--repeat-large",
        type=int,
        default=1,
        help="rounds at 10 000 nodes and more (LangGraph takes minutes per run there)",
    )
    parser.add_argument("--no-dbos", dest="dbos", action="store_false",
                        help="leave DBOS out (it is in the bench extra)")
    parser.add_argument("--out", default=str(ROOT / "bench/results/bench_engine_overhead.json"))
    args = parser.parse_args()
    if args.one:
        engine, shape, n, durability = args.one
        child(engine, shape, int(n), durability)
        return
    peers = [*(f"langgraph:{m}" for m in args.lg_modes), *(["dbos"] if args.dbos else [])]
    engines = ["tether", "floor", *peers]
    load_before = load_average()
    rows: list[dict[str, Any]] = []
    print(f"load average before: {load_before}", flush=True)
    for durability in args.durability:
        commit_ms = commit_floor_ms(durability)
        print(f"one SQLite commit (WAL, synchronous={durability}): {commit_ms:.3f} ms",
              flush=True)
        for shape in args.shapes:
            for n in args.sizes:
                rows.append(_row(engines, peers, shape, n, durability, commit_ms, args))
    commit_after = {d: commit_floor_ms(d) for d in args.durability}
    growth = _growth(rows, args.sizes)
    print("\nper-task cost and memory per node, largest size over smallest (target <= 1.5x):")
    for key, values in growth.items():
        print(
            f"  {key:<16} ms/task {values['ms_per_task']:.2f}x (cpu "
            f"{values['cpu_ms_per_task']:.2f}x)   heap KiB/node {values['heap_kib_per_node']:.2f}x"
            f"   RSS KiB/node {values['rss_kib_per_node']:.2f}x"
        )
    pragmas = sorted({json.dumps(r["tether"]["pragmas"], sort_keys=True) for r in rows})
    print("PRAGMAs verified on every writing connection after each run:")
    for text in pragmas:
        print("  tether", text)
    lg_pragmas = sorted(
        {json.dumps(r[e]["pragmas"], sort_keys=True) for r in rows for e in peers}
    )
    for text in lg_pragmas:
        print("  peers", text)
    load_after = load_average()
    print(f"load average after: {load_after}")
    document = {
        "benchmark": "engine_overhead",
        "shapes": args.shapes,
        "sizes": args.sizes,
        "width_and_concurrency": WIDTH,
        "repeat": args.repeat,
        "langgraph_modes": args.lg_modes,
        "peers": peers,
        "rows": rows,
        "growth_largest_over_smallest": growth,
        "commit_floor_ms_at_end": commit_after,
        "load_average": {"before": load_before, "after": load_after},
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")


def _row(engines: list[str], peers: list[str], shape: str, n: int, durability: str,
         commit_ms: float, args: Any) -> dict[str, Any]:
    """Measure every engine on one shape and size (interleaved rounds, best kept), print the
    row with Tether's floors and answers beside it, and return it."""
    best: dict[str, dict[str, Any]] = {}
    rounds = args.repeat_large if n >= 10_000 else args.repeat
    for _ in range(rounds):
        for engine in engines:  # interleaved: a burst of load hits every engine
            result = one(engine, shape, n, durability)
            check_pragmas(result, durability)
            kept = best.setdefault(engine, result)
            for key in ("seconds", "cpu_seconds", "rss_growth"):
                kept[key] = min(kept[key], result[key])
            if "heap_peak" in result:
                kept["heap_peak"] = min(kept["heap_peak"], result["heap_peak"])
    row: dict[str, Any] = {"durability": durability, "shape": shape, "nodes": n,
                           "commit_floor_ms": commit_ms}
    for engine, result in best.items():
        row[engine] = {
            "ms_per_task": result["seconds"] * 1000 / result["nodes"],
            "cpu_ms_per_task": result["cpu_seconds"] * 1000 / result["nodes"],
            "kib_per_node": result.get("rss_growth", 0) / 1024 / result["nodes"],
            "heap_kib_per_node": result.get("heap_peak", 0) / 1024 / result["nodes"],
            "nodes": result["nodes"],
            "pragmas": result["pragmas"],
        }
    t, tether = row["tether"], best["tether"]
    t["statements_per_task"] = tether["statements"] / tether["nodes"]
    t["commits_per_task"] = tether["commits"] / tether["nodes"]
    t["answers"] = tether["answers"]
    # The durability floor: this many commits, each as dear as a bare one on the same disk.
    t["over_commit_floor"] = t["ms_per_task"] / max(t["commits_per_task"] * commit_ms, 1e-9)
    t["over_bare_walk"] = t["ms_per_task"] / row["floor"]["ms_per_task"]
    row["peer_over_tether"] = min(row[e]["ms_per_task"] for e in peers) / t["ms_per_task"]
    row["peer_over_tether_cpu"] = (
        min(row[e]["cpu_ms_per_task"] for e in peers) / t["cpu_ms_per_task"]
    )
    row["load_average"] = load_average()
    shown = "  ".join(
        f"{e} {row[e]['ms_per_task']:.3f} ms (cpu {row[e]['cpu_ms_per_task']:.3f}) "
        f"{row[e]['kib_per_node']:.1f} KiB, {row[e]['nodes']} nodes"
        for e in peers
    )
    answers = t["answers"]
    print(
        f"{durability:<6} {shape:<6} {n:>6}  tether {t['ms_per_task']:.3f} ms "
        f"(cpu {t['cpu_ms_per_task']:.3f}) {t['statements_per_task']:.1f} statements "
        f"{t['commits_per_task']:.2f} commits/task, {t['over_commit_floor']:.2f}x commit floor, "
        f"{t['kib_per_node']:.1f} KiB (heap {t['heap_kib_per_node']:.1f}); "
        f"{answers['finished']} finished, {answers['events']} events, {answers['tokens']} tokens"
        f"  |  bare walk {row['floor']['ms_per_task']:.3f} ms ({row['floor']['nodes']} nodes, "
        f"tether {t['over_bare_walk']:.1f}x)  |  {shown}  |  "
        f"peer/tether {row['peer_over_tether']:.2f}x "
        f"(cpu {row['peer_over_tether_cpu']:.2f}x)  load {row['load_average']}",
        flush=True,
    )
    return row


def _growth(rows: list[dict[str, Any]], sizes: list[int]) -> dict[str, dict[str, float]]:
    """Tether's per-task cost and memory per node at the largest size over the smallest."""
    small, large = min(sizes), max(sizes)
    growth: dict[str, dict[str, float]] = {}
    if small == large:
        return growth
    index = {(r["durability"], r["shape"], r["nodes"]): r["tether"] for r in rows}
    for durability, shape, n in list(index):
        if n != small or (durability, shape, large) not in index:
            continue
        a, b = index[(durability, shape, small)], index[(durability, shape, large)]
        growth[f"{durability} {shape}"] = {
            "ms_per_task": b["ms_per_task"] / a["ms_per_task"],
            "cpu_ms_per_task": b["cpu_ms_per_task"] / a["cpu_ms_per_task"],
            "heap_kib_per_node": b["heap_kib_per_node"] / max(a["heap_kib_per_node"], 1e-9),
            "rss_kib_per_node": b["kib_per_node"] / max(a["kib_per_node"], 1e-9),
        }
    return growth


if __name__ == "__main__":
    main()
