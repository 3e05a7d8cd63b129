"""Engine overhead per task on PostgreSQL beside SQLite, on the 1 000-node shapes, with an instant
agent (so the time measured is scheduling, rendering and durable state).

    eval "$(.ci/postgres-up)"; python bench/bench_pg_engine.py [--repeat 2] [--shapes ...]

Shapes: ``chain`` (1 000 nodes one after another), ``layers`` (100 layers of 10, each node
joining two of the layer before) and ``fanout`` (one fan-out of 1 000 items). Every task writes
its node, attempt, call (with usage rollups) and events. Durability: SQLite in WAL with
``synchronous=NORMAL`` (the workspace default), PostgreSQL at the workspace's two durability
levels: ``full`` (``synchronous_commit=on``) and ``normal`` (``off``: a crash of the server may
lose the last commits but never corrupts, the same promise as SQLite's WAL with NORMAL), each
beside SQLite at the same level, with the commits per task (group commits), the statements
per task (SQLite's trace; on PostgreSQL each statement the connection sends, a row of an
``executemany`` counted as one) and the one-commit floor (one INSERT and COMMIT on a bare
connection) measured in the same run. Rounds
of the backends are interleaved; the best of ``--repeat`` is kept (other load only adds time).
Results: a table and ``bench/results/bench_pg_engine.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_floors import count_statements  # noqa: E402
from pg_support import machine, scratch_schema, write_results  # noqa: E402

from engine.agents.agent import AgentRequest, AgentResult, ModelCall  # noqa: E402
from engine.run.engine import Engine  # noqa: E402
from engine.run.engine_config import EngineConfig  # noqa: E402
from engine.workflow.definition import Workflow  # noqa: E402
from store.db.backends import open_database  # noqa: E402
from store.db.postgres.pg_connection import PgConnection  # noqa: E402
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
        flow.fan_out("item", items=list(range(NODES)), max_items=NODES)(
            lambda ctx: f"do {ctx.item}")
    return flow


SQLITE_STATEMENTS = count_statements()
PG_STATEMENTS = [0]


def _count_pg_statements() -> None:
    """Count what every PostgreSQL connection of the workspace sends (one per row of an
    ``executemany``, as the server sees them)."""
    execute, executemany = PgConnection.execute, PgConnection.executemany

    def counted(self: PgConnection, sql: str, parameters: Any = (), /) -> Any:
        PG_STATEMENTS[0] += 1
        return execute(self, sql, parameters)

    def counted_many(self: PgConnection, sql: str, parameters: Any, /) -> Any:
        batch = list(parameters)
        PG_STATEMENTS[0] += len(batch)
        return executemany(self, sql, batch)

    PgConnection.execute = counted  # type: ignore[method-assign]
    PgConnection.executemany = counted_many  # type: ignore[method-assign]


_count_pg_statements()

# Each side's workspace durability level (store.db.durability): SQLite's synchronous, and
# PostgreSQL's synchronous_commit on every writing session (full: on, normal: off). Each
# PostgreSQL row is compared with the SQLite row at the same level.
BACKENDS = {
    "sqlite normal": ("sqlite", "normal"),
    "sqlite full": ("sqlite", "full"),
    "postgresql normal (sync_commit=off)": ("postgresql", "normal"),
    "postgresql full (sync_commit=on)": ("postgresql", "full"),
}


async def run_once(backend: str, shape: str) -> tuple[float, int, int, int]:
    """Seconds for the whole run, finished attempts, group commits, statements."""
    kind, level = BACKENDS[backend]
    with tempfile.TemporaryDirectory(prefix="tether-pg-engine-") as folder, \
            scratch_schema("be") as url:
        workspace = Workspace(Path(folder) / ".tether", url if kind == "postgresql" else None)
        workspace.root.mkdir()
        workspace.config_path.write_text(
            f'[workspace]\ndurability = "{level}"\n', encoding="utf-8"
        )
        async with await open_database(workspace) as db:
            engine = Engine(db, config=EngineConfig(poll_interval_s=0.5))
            groups = db.writes.groups  # type: ignore[attr-defined]
            counter = PG_STATEMENTS if kind == "postgresql" else SQLITE_STATEMENTS
            statements = counter[0]
            started = time.perf_counter()
            outcome = await engine.start(workflow(shape), {})
            elapsed = time.perf_counter() - started
            groups = db.writes.groups - groups  # type: ignore[attr-defined]
            statements = counter[0] - statements
            assert outcome.status == "finished", outcome.error
            done = await db.fetch_value("SELECT count(*) FROM attempts WHERE state = 'finished'")
            assert done == NODES, done
            return elapsed, int(done), groups, statements


def commit_floor_ms(synchronous_commit: str, rounds: int = 200) -> float:
    """The one-commit floor: one small INSERT and its COMMIT on one connection, per commit."""
    import psycopg

    with scratch_schema("floor") as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET synchronous_commit = {synchronous_commit}")
        conn.execute("CREATE TABLE floor (n bigint)")
        started = time.perf_counter()
        for n in range(rounds):
            with conn.transaction():
                conn.execute("INSERT INTO floor VALUES (%s)", (n,))
        return (time.perf_counter() - started) * 1000 / rounds


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--shapes", nargs="+", default=["chain", "layers", "fanout"])
    args = parser.parse_args()
    info = machine()
    best: dict[tuple[str, str], tuple[float, int, int, int]] = {}
    floors = {"off": commit_floor_ms("off"), "on": commit_floor_ms("on")}
    for _ in range(args.repeat):
        for shape in args.shapes:
            for backend in BACKENDS:
                measured = asyncio.run(run_once(backend, shape))
                key = (shape, backend)
                best[key] = min(best.get(key, measured), measured)
    results: list[dict[str, Any]] = []
    print(f"engine overhead per task, {NODES} nodes, instant agent (best of {args.repeat})")
    print(f"{'shape':<8} {'backend':<36} {'ms/task':>8} {'finished':>9} {'commits/task':>13} "
          f"{'statements/task':>16} {'vs sqlite, same level':>22}")
    for shape in args.shapes:
        for backend, (_kind, level) in BACKENDS.items():
            elapsed, done, groups, statements = best[(shape, backend)]
            lite = best[(shape, f"sqlite {level}")][0]
            ms = elapsed * 1000 / NODES
            results.append({"shape": shape, "backend": backend, "ms_per_task": round(ms, 3),
                            "finished": done, "commits_per_task": round(groups / NODES, 2),
                            "statements_per_task": round(statements / NODES, 2),
                            "over_sqlite_same_level": round(elapsed / lite, 2)})
            print(f"{shape:<8} {backend:<36} {ms:>8.3f} {done:>9} {groups / NODES:>13.2f} "
                  f"{statements / NODES:>16.1f} {elapsed / lite:>21.1f}x")
    print(f"one PostgreSQL commit (floor): {floors['off']:.3f} ms at synchronous_commit=off, "
          f"{floors['on']:.3f} ms at on")
    results.append({"floor_commit_ms": {k: round(v, 3) for k, v in floors.items()}})
    print(f"load at start {info['load_at_start']}, at end {os.getloadavg()}")
    print(f"wrote {write_results('bench_pg_engine', info, results)}")


if __name__ == "__main__":
    main()
