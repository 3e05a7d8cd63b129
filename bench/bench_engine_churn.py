"""Memory of a long-lived engine while runs churn (the dashboard's embedded engine: opened as
the dashboard opens it, its encoder in the workspace's shared process).

    python bench/bench_engine_churn.py [--runs 1000]

Runs the code-review example (recall and retain on every run, simulated agent without
latency) again and again in one process and prints, every 100 runs, the process's RSS and the
Python heap that tracemalloc sees, with the growth per 100 runs after the first 200 (warm-up:
caches, the term index of the bank). In the same run, the same loop on a workflow with memory
off gives the floor: what the engine itself keeps. Writes
``bench/results/bench_engine_churn.json`` with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_memory_writes import machine

from engine.run.wiring import open_engine
from engine.workflow.loader import load_workflow
from store.db.backends import open_database
from store.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "bench_engine_churn.json"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


async def churn(runs: int, memory: bool) -> list[dict[str, Any]]:
    os.environ["TETHER_NO_BACKGROUND_EMBED"] = "1"
    folder = Path(tempfile.mkdtemp(prefix="tether-churn-"))
    db = await open_database(Workspace(folder), create=True)
    engine = open_engine(db, shared_encoder=True)
    workflow = load_workflow(ROOT / "examples" / "code_review.py")
    for spec in workflow.agents.values():
        spec["latency_ms"] = 0
    if not memory:
        for task in workflow.tasks.values():
            task.memory = False
    samples = []
    started = time.perf_counter()
    for i in range(1, runs + 1):
        await engine.start(workflow, {"change": f"retry flaky pytest fixtures {i % 50}"})
        if i % 100 == 0:
            current, _ = tracemalloc.get_traced_memory()
            samples.append({"runs": i, "rss MB": round(rss_mb(), 1),
                            "python heap MB": round(current / 2**20, 2),
                            "s": round(time.perf_counter() - started, 1)})
            print(("memory on " if memory else "memory off") + " " + json.dumps(samples[-1]),
                  flush=True)
    await db.close()
    return samples


def growth(samples: list[dict[str, Any]], key: str) -> float:
    later = [s for s in samples if s["runs"] >= 200]
    if len(later) < 2:
        return 0.0
    runs = later[-1]["runs"] - later[0]["runs"]
    return round((later[-1][key] - later[0][key]) / runs * 100, 3)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    load_before = os.getloadavg()
    tracemalloc.start(1)
    results = {}
    for memory in (True, False):
        samples = await churn(args.runs, memory)
        results["memory on" if memory else "memory off (floor)"] = {
            "samples": samples,
            "rss MB per 100 runs": growth(samples, "rss MB"),
            "python heap MB per 100 runs": growth(samples, "python heap MB"),
        }
    for name, result in results.items():
        print(f"{name:20} RSS {result['rss MB per 100 runs']:+.2f} MB / 100 runs, Python heap "
              f"{result['python heap MB per 100 runs']:+.3f} MB / 100 runs")
    RESULTS.write_text(json.dumps({
        "machine": machine(), "runs": args.runs,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "results": results}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    asyncio.run(main())
