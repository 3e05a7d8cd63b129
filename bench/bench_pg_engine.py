"""Engine overhead per task on PostgreSQL beside SQLite, on the 1 000-node shapes, with an instant
agent (so the time measured is scheduling, rendering and durable state).

    eval "$(.ci/postgres-up)"; python bench/bench_pg_engine.py [--repeat 2] [--shapes ...]

Shapes: ``chain`` (1 000 nodes one after another), ``layers`` (100 layers of 10, each node
joining two of the layer before) and ``fanout`` (one fan-out of 1 000 items). Every task writes
its node, attempt, call (with usage rollups) and events. Durability: SQLite in WAL with
``synchronous=NORMAL`` (the workspace default), PostgreSQL at the workspace's two durability
levels: ``full`` (``synchronous_commit=on``) and ``normal`` (``off``: a crash of the server may
lose the last commits but never corrupts, the same promise as SQLite's WAL with NORMAL). Rounds
of the backends are interleaved; the best of ``--repeat`` is kept (other load only adds time).
Results: a table and ``bench/results/bench_pg_engine.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pg_support import machine, scratch_schema, write_results  # noqa: E402

from engine.agents.agent import AgentRequest, AgentResult, ModelCall  # noqa: E402
from engine.run.engine import Engine  # noqa: E402
from engine.run.engine_config import EngineConfig  # noqa: E402
from engine.workflow.definition import Workflow  # noqa: E402
from store.db.backends import open_database  # noqa: E402
from store.model.token_lanes import TokenUsage  # noqa: E402
from store.workspace.layout import Workspace  # noqa: E402

NODES = 1000
CONCURRENCY = 10


class InstantAgent:
    """Answers at once and reports one call, so metering is part of what is measured."""

    name = "instant"
    native_structured_output = False
    simulated = True

    async def run(self, request: AgentRequest) -> AgentResult:
        await request.on_call(ModelCall(TokenUsage(input=10, cache_read=90, output=5), "instant"))
        return AgentResult(text="ok")


def workflow(shape: str) -> Workflow:
    flow = Workflow("bench", agents={"instant": InstantAgent()}, default_agent="instant",
                    concurrency=CONCURRENCY)
    if shape == "chain":
        for index in range(NODES):
            flow.add_task(f"n{index}", f"do {index}",
                          depends_on=[f"n{index - 1}"] if index else [])
    elif shape == "layers":
        width = 10
        for layer in range(NODES // width):
            for i in range(width):
                above = f"n{layer - 1}_"
                deps = [] if layer == 0 else [f"{above}{i}", f"{above}{(i + 1) % width}"]
                flow.add_task(f"n{layer}_{i}", f"do {layer} {i}", depends_on=deps)
    else:
        flow.fan_out("item", items=list(range(NODES)))(lambda ctx: f"do {ctx.item}")
    return flow


# Each side's workspace durability level (store.db.durability): SQLite's synchronous, and
# PostgreSQL's synchronous_commit on every writing session (full: on, normal: off).
BACKENDS = {
    "sqlite": "normal",
    "postgresql sync_commit=on": "full",
    "postgresql sync_commit=off": "normal",
}


async def run_once(backend: str, shape: str) -> float:
    with tempfile.TemporaryDirectory(prefix="tether-pg-engine-") as folder, \
            scratch_schema("be") as url:
        shared = backend.startswith("postgresql")
        workspace = Workspace(Path(folder) / ".tether", url if shared else None)
        workspace.root.mkdir()
        workspace.config_path.write_text(
            f'[workspace]\ndurability = "{BACKENDS[backend]}"\n', encoding="utf-8"
        )
        async with await open_database(workspace) as db:
            engine = Engine(db, config=EngineConfig(poll_interval_s=0.5))
            started = time.perf_counter()
            outcome = await engine.start(workflow(shape), {})
            elapsed = time.perf_counter() - started
            assert outcome.status == "finished", outcome.error
            done = await db.fetch_value("SELECT count(*) FROM attempts WHERE state = 'finished'")
            assert done == NODES, done
            return elapsed


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--shapes", nargs="+", default=["chain", "layers", "fanout"])
    args = parser.parse_args()
    info = machine()
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.repeat):
        for shape in args.shapes:
            for backend in BACKENDS:
                elapsed = asyncio.run(run_once(backend, shape))
                key = (shape, backend)
                best[key] = min(best.get(key, elapsed), elapsed)
    results: list[dict[str, Any]] = []
    print(f"engine overhead per task, {NODES} nodes, instant agent (best of {args.repeat})")
    print(f"{'shape':<8} {'backend':<28} {'ms/task':>8} {'vs sqlite':>10}")
    for shape in args.shapes:
        lite = best[(shape, "sqlite")] * 1000 / NODES
        for backend in BACKENDS:
            ms = best[(shape, backend)] * 1000 / NODES
            results.append({"shape": shape, "backend": backend, "ms_per_task": round(ms, 3),
                            "over_sqlite": round(ms / lite, 2)})
            print(f"{shape:<8} {backend:<28} {ms:>8.3f} {ms / lite:>9.1f}x")
    print(f"load at start {info['load_at_start']}")
    print(f"wrote {write_results('bench_pg_engine', info, results)}")


if __name__ == "__main__":
    main()
