"""LangGraph as bench/bench_engine_overhead.py's first peer: the same graph with its SQLite
checkpointer (``langgraph-checkpoint-sqlite``, ``AsyncSqliteSaver``) in WAL at the same
``synchronous`` level, in ``sync`` durability mode (a step's checkpoint is written before the
next step starts) or the weaker ``async``."""

from __future__ import annotations

import operator
import resource
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from engine_floors import WIDTH, layered


def rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _latest(_old: str, new: str) -> str:
    return new


class State(TypedDict):
    """LangGraph state: how many nodes ran (each node adds one) and the last answer written."""

    count: Annotated[int, operator.add]
    last: Annotated[str, _latest]


class FanState(TypedDict):
    count: Annotated[int, operator.add]
    answers: Annotated[list[str], operator.add]
    plan: str


async def run_langgraph(shape: str, n: int, durability: str, mode: str) -> dict[str, Any]:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    before = rss_bytes()
    builder: Any
    if shape == "fanout":
        builder = StateGraph(FanState)

        async def plan(state: FanState) -> dict[str, Any]:
            return {"count": 1, "plan": "ok plan"}

        async def item(state: dict[str, Any]) -> dict[str, Any]:
            return {"count": 1, "answers": [f"ok {state['i']} of {state['plan'][:12]}"]}

        async def join(state: FanState) -> dict[str, Any]:
            return {"count": 1, "plan": f"join {len(state['answers'])}"}

        def spread(state: FanState) -> list[Any]:
            return [Send("item", {"i": i, "plan": state["plan"]}) for i in range(n - 2)]

        builder.add_node("plan", plan)
        builder.add_node("item", item)
        builder.add_node("join", join)
        builder.add_edge(START, "plan")
        builder.add_conditional_edges("plan", spread, ["item"])
        builder.add_edge("item", "join")
        builder.add_edge("join", END)
        expected = n
        initial: dict[str, Any] = {"count": 0, "answers": [], "plan": ""}
    else:
        graph = layered(shape, n)
        builder = StateGraph(State)

        def make(node: str) -> Any:
            async def step(state: State) -> dict[str, Any]:
                return {"count": 1, "last": f"ok {node} after {state['last'][:12]}"}

            return step

        for node in graph:
            builder.add_node(node, make(node))
        dependents = {d for deps in graph.values() for d in deps}
        for node, deps in graph.items():
            if not deps:
                builder.add_edge(START, node)
            elif len(deps) == 1:
                builder.add_edge(deps[0], node)
            else:
                builder.add_edge(deps, node)
            if node not in dependents:
                builder.add_edge(node, END)
        expected = len(graph)
        initial = {"count": 0, "last": ""}
    with tempfile.TemporaryDirectory() as folder:
        conn = await aiosqlite.connect(str(Path(folder) / "lg.db"))
        saver = AsyncSqliteSaver(conn)
        await saver.setup()  # switches the file to WAL
        await conn.execute(f"PRAGMA synchronous = {durability.upper()}")
        app: Any = builder.compile(checkpointer=saver)
        config = {
            "configurable": {"thread_id": "bench"},
            "recursion_limit": 100_000,
            "max_concurrency": WIDTH,
        }
        started, cpu = time.perf_counter(), time.process_time()
        result = await app.ainvoke(initial, config, durability=mode)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        peak = rss_bytes()
        assert result["count"] == expected, (result["count"], expected)
        pragmas = {"langgraph": await _pragmas(conn)}
        await conn.close()
    return {
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "nodes": expected,
        "rss_growth": peak - before,
        "pragmas": pragmas,
    }


async def _pragmas(conn: Any) -> dict[str, Any]:
    async with conn.execute("PRAGMA journal_mode") as cursor:
        journal = (await cursor.fetchone())[0]
    async with conn.execute("PRAGMA synchronous") as cursor:
        synchronous = (await cursor.fetchone())[0]
    return {"journal_mode": str(journal).lower(), "synchronous": _SYNC_NAMES[int(synchronous)]}


_SYNC_NAMES = {0: "off", 1: "normal", 2: "full", 3: "extra"}
