"""Attempts on a Ray cluster against in-process attempts, in the same run: throughput and the
latency Ray adds to each attempt, beside a bare Ray task (the floor Ray itself costs).

A one-node cluster is started on this machine for the benchmark (``ray start --head`` with its
own temporary folder, as many logical CPUs as ``--concurrency`` so that many attempts of one
CPU each run at once, a small object store; ``ray stop --force`` afterwards). The agent
is the simulated one with no latency and no tools, so what is timed is the executor: for Ray,
sending the attempt, the streamed call and result coming back, and the orchestrator recording
them exactly as for a local attempt.

* **throughput**: a fan-out of ``--items`` items (concurrency ``--concurrency``), attempts/s;
* **latency**: a chain of ``--chain`` tasks (each waits for the one before), seconds per
  attempt; Ray's added latency is the Ray chain's time per attempt minus the local chain's.

The floor is the same shapes as bare Ray tasks (``ray.get`` of a function returning at once,
the same task options), measured on the same connection. Every measurement is repeated
``--repeat`` times, the three sides interleaved; the best is kept (other load only ever adds).
The same answers are shown: finished attempts per side, and the Ray nodes they ran on. The
first run of the process (the warm-up) is reported too: it waits for Ray to start worker
processes for a new driver, which every new `tether run` process pays once.

    python bench/bench_ray.py                     # needs the ray extra: pip install -e '.[ray]'
    python bench/bench_ray.py --items 100 --chain 30 --repeat 3
    results: bench/results/bench_ray.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
RESULTS = ROOT / "bench" / "results"
TASK_CPUS = 1.0  # as an agent attempt asks; the node offers --concurrency logical CPUs


def workflow_of(shape: str, n: int, backend: str, concurrency: int) -> Any:
    """A fan-out of ``n`` items or a chain of ``n`` tasks, placed on ``backend``."""
    from engine.agents.simulated import SimulatedAgent
    from engine.workflow.definition import Workflow

    agent = SimulatedAgent(name="instant", latency_ms=0, use_tools=False)
    workflow = Workflow(
        f"bench-{shape}", agents={"instant": agent}, default_agent="instant",
        concurrency=concurrency, execution={"backend": backend, "num_cpus": TASK_CPUS},
    )
    if shape == "fanout":
        workflow.add_task("item", "Item {ctx.item}.", items=list(range(n)), max_items=n)
    else:
        for i in range(n):
            workflow.add_task(f"n{i}", f"Step {i}.", depends_on=[f"n{i - 1}"] if i else [])
    return workflow


async def run_tether(shape: str, n: int, backend: str, address: str,
                     concurrency: int) -> dict[str, Any]:
    """One run of the shape; seconds, finished attempts and the Ray nodes they ran on."""
    from engine.run.engine_config import parse_config
    from engine.run.wiring import open_engine
    from store.db.backends import open_database
    from store.workspace.layout import Workspace

    with tempfile.TemporaryDirectory() as folder:
        db = await open_database(Workspace(Path(folder) / ".tether"))
        try:
            config = parse_config({"execution": {"address": address}})
            engine = open_engine(db, config=config)
            workflow = workflow_of(shape, n, backend, concurrency)
            started = time.perf_counter()
            outcome = await engine.start(workflow, {})
            seconds = time.perf_counter() - started
            assert outcome.status == "finished", outcome.error
            finished = await db.fetch_value(
                "SELECT count(*) FROM attempts WHERE state = 'finished'")
            nodes = await db.fetch_value(
                "SELECT count(DISTINCT executor_node) FROM attempts")
        finally:
            await db.close()
    assert finished == n, (finished, n)
    return {"seconds": seconds, "finished": finished, "ray_nodes": nodes}


def run_floor(shape: str, n: int, concurrency: int) -> dict[str, Any]:
    """The same shape as bare Ray tasks with the attempts' options (Ray's retries off)."""
    import ray

    @ray.remote
    def attempt(i: int) -> str:
        return ray.get_runtime_context().get_node_id()

    task = attempt.options(num_cpus=TASK_CPUS, max_retries=0, retry_exceptions=False)
    nodes: set[str] = set()
    started = time.perf_counter()
    if shape == "chain":
        for i in range(n):
            nodes.add(ray.get(task.remote(i)))
    else:
        pending = [task.remote(i) for i in range(min(concurrency, n))]
        submitted = len(pending)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            nodes.update(ray.get(done))
            if submitted < n:
                pending.append(task.remote(submitted))
                submitted += 1
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "finished": n, "ray_nodes": len(nodes)}


def machine(ray_version: str) -> dict[str, Any]:
    """What ran the benchmark, and how busy it was when it started."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count() or 0,
        "ray": ray_version,
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
    }


async def measure(args: argparse.Namespace, address: str) -> dict[str, Any]:
    """Every side and shape, interleaved ``--repeat`` times; the best of each is kept."""
    sizes = {"fanout": args.items, "chain": args.chain}
    best: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in sizes}
    # A warm-up round per side: Ray starts its worker processes, and each imports the attempt
    # function, on first use (once per worker: a long-lived cluster pays it once).
    warm = 2 * args.concurrency
    first = await run_tether("fanout", warm, "ray", address, args.concurrency)
    first_floor = run_floor("fanout", warm, args.concurrency)
    for _round in range(args.repeat):
        for shape, n in sizes.items():
            for side in ("in-process", "ray", "bare ray task"):
                if side == "bare ray task":
                    result = await asyncio.to_thread(run_floor, shape, n, args.concurrency)
                else:
                    result = await run_tether(shape, n, side, address, args.concurrency)
                kept = best[shape].get(side)
                if kept is None or result["seconds"] < kept["seconds"]:
                    best[shape][side] = result
    best["first run"] = {"ray": first, "bare ray task": first_floor}
    return best


def report(best: dict[str, dict[str, dict[str, Any]]], args: argparse.Namespace) -> dict[str, Any]:
    """Print the table; the figures as they go into the JSON."""
    fan, chain = best["fanout"], best["chain"]
    rows = []
    print(f"{'side':<15}{'attempts/s':>12}{'s/attempt (chain)':>20}{'finished':>10}{'nodes':>7}")
    for side in ("in-process", "ray", "bare ray task"):
        per_s = args.items / fan[side]["seconds"]
        latency = chain[side]["seconds"] / args.chain
        finished = fan[side]["finished"] + chain[side]["finished"]
        print(f"{side:<15}{per_s:>12.1f}{latency * 1000:>17.1f} ms{finished:>10}"
              f"{fan[side]['ray_nodes']:>7}")
        rows.append({"side": side, "attempts_per_s": round(per_s, 2),
                     "ms_per_attempt_chain": round(latency * 1000, 2), "finished": finished,
                     "ray_nodes": fan[side]["ray_nodes"]})
    added = (chain["ray"]["seconds"] - chain["in-process"]["seconds"]) / args.chain
    floor = chain["bare ray task"]["seconds"] / args.chain
    print(f"added latency per attempt on Ray: {added * 1000:.1f} ms "
          f"(a bare Ray task's round trip: {floor * 1000:.1f} ms)")
    first = best["first run"]
    print(f"first run of a new process on Ray ({first['ray']['finished']} attempts; Ray starts "
          f"its worker processes): {first['ray']['seconds']:.2f} s, bare Ray tasks after it: "
          f"{first['bare ray task']['seconds']:.2f} s")
    return {"rows": rows, "added_ms_per_attempt": round(added * 1000, 2),
            "bare_ray_task_ms": round(floor * 1000, 2),
            "first_run_s": round(first["ray"]["seconds"], 3),
            "first_run_attempts": first["ray"]["finished"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    import ray
    from ray_support import RayTestCluster

    cluster = RayTestCluster()
    info = machine(ray.__version__)
    try:
        cluster.start_head({}, num_cpus=args.concurrency)
        best = asyncio.run(measure(args, cluster.address))
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
    figures = report(best, args)
    info["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "bench_ray.json"
    settings = {"items": args.items, "chain": args.chain, "concurrency": args.concurrency,
                "repeat": args.repeat, "task_num_cpus": TASK_CPUS}
    path.write_text(json.dumps({"machine": info, "settings": settings, "results": figures},
                               indent=2) + "\n", encoding="utf-8")
    print(f"load {info['load_at_start']} -> {info['load_at_end']} · results: {path}")


if __name__ == "__main__":
    main()
