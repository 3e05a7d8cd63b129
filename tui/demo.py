"""``tether demo``: a demo workspace with the example workflows running live.

The demo seeds a little memory (accepted notes for recall, pending proposals to review, a fact),
then starts the example workflows in the embedded engine with the simulated agent, staggered and
slowed down so the dashboard moves for about a minute: parallel nodes, a retry, a cache hit on
the second review, recalled memory blocks, and a run that hands off to a fresh generation.
Everything is offline.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.examples import EXAMPLES_DIR
from engine.run.engine import Engine
from engine.run.run_end import RunOutcome
from engine.run.wiring import open_engine
from engine.workflow.loader import load_workflow
from store.db.backends import open_database
from store.db.seam import Database
from store.errors import TetherError
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.demo_plan import DEMO_PLAN, DemoStep
from tui.format import plural
from tui.run_control import host_for

DEFAULT_DEMO_DIR = "tether-demo"
DEMO_LATENCY_MS = "2000"
"""Mean simulated model-call latency in the live demo (``TETHER_SIM_LATENCY_MS`` wins)."""
DEMO_FAILURE_RATE = "0.12"
"""Chance a simulated attempt fails, so retries show up (``TETHER_SIM_FAILURE_RATE`` wins)."""
DEMO_MIN_RETRIES = 2
"""Every demo task retries at least this often, so injected failures show as retries."""

@dataclass
class DemoResult:
    """What the demo did: one outcome per chain it started, and anything that went wrong."""

    outcomes: list[RunOutcome] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def seed_memory(memory: MemoryStore) -> None:
    """Notes recall can find, proposals waiting for review, and a fact (idempotent)."""
    review = "workflow:fanout-review"
    code = "workflow:code-review"
    await memory.set_fact(review, "test-command", "pytest -x -q")
    await memory.set_fact(code, "style", {"line_length": 100, "linter": "ruff"})
    accepted = [
        (review, "demo-n1", "Review database migrations for missing indexes and locks."),
        (review, "demo-n2", "API changes need a note in the changelog."),
        (code, "demo-n3", "Run ruff and the tests before asking for a review."),
        (code, "demo-n4", "Prefer small pull requests; split refactors from behaviour changes."),
    ]
    for namespace, note_id, body in accepted:
        await memory.save_note(namespace, body, note_id=note_id, author="demo")
    await memory.save_note(
        review,
        "Migrations and API changes: check indexes, locks and the changelog entry together.",
        note_id="demo-p1",
        author="agent:reviewer",
        status="pending",
        supersedes=["demo-n1", "demo-n2"],
    )
    await memory.save_note(
        code,
        "Flaky test: tests/test_cli.py::test_resume times out on slow CI machines.",
        note_id="demo-p2",
        author="agent:reviewer",
        status="pending",
    )


def demo_steps(examples_dir: Path = EXAMPLES_DIR) -> list[tuple[DemoStep, Path]]:
    """The plan's steps whose example file exists (examples are optional, the demo adapts)."""
    return [
        (step, examples_dir / step.example)
        for step in DEMO_PLAN
        if (examples_dir / step.example).is_file()
    ]


def tune_agents(*, live: bool, environ: dict[str, str] | None = None) -> None:
    """Make the simulated agent a little flaky (retries show) and, for a live demo, slow enough
    to watch. Values already set in the environment win."""
    env = os.environ if environ is None else environ
    env.setdefault("TETHER_SIM_FAILURE_RATE", DEMO_FAILURE_RATE)
    if live:
        env.setdefault("TETHER_SIM_LATENCY_MS", DEMO_LATENCY_MS)


async def run_plan(
    engine: Engine,
    steps: Sequence[tuple[DemoStep, Path]],
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    time_scale: float = 1.0,
) -> DemoResult:
    """Start every step at its time and follow handoffs until each chain ends."""
    result = DemoResult()

    async def one(step: DemoStep, path: Path) -> None:
        await sleep(step.start_after_s * time_scale)
        try:
            workflow = load_workflow(path)
            for spec in workflow.tasks.values():
                spec.retries = max(spec.retries, DEMO_MIN_RETRIES)
            outcome = await engine.start(workflow, step.input, workflow_path=str(path))
            outcome = await engine.run_chain(workflow, outcome)
            result.outcomes.append(outcome)
        except TetherError as error:
            result.problems.append(f"{step.example}: {error}")

    await asyncio.gather(*(one(step, path) for step, path in steps))
    return result


async def prepare_workspace(workspace: Workspace) -> Database:
    """Create (or reopen) the demo workspace and seed its memory."""
    db = await open_database(workspace, create=True)
    await seed_memory(MemoryStore(db))
    return db


async def headless_demo(workspace: Workspace, *, time_scale: float = 0.1) -> DemoResult:
    """Run the whole demo to the end without the dashboard (``tether demo --headless``)."""
    db = await prepare_workspace(workspace)
    try:
        engine = open_engine(db)
        return await run_plan(engine, demo_steps(), time_scale=time_scale)
    finally:
        await db.close()


async def summary_lines(workspace: Workspace, result: DemoResult) -> list[str]:
    """A short report of what the demo's runs did."""
    db = await open_database(workspace, create=False)
    try:
        store = RunStore(db)
        runs = await store.list_runs(limit=200)
        pending = await MemoryStore(db).list_notes(status="pending")
        handoffs = await store.list_handoffs()
        lines = [f"Demo workspace: {workspace.root}", ""]
        lines.append(f"{'run':<22} {'workflow':<20} {'status':<11} {'nodes':>7} {'tokens':>10}"
                     f" {'retries':>7} {'cache hits':>10}")
        for run in sorted(runs, key=lambda r: r.created_at_ms):
            nodes = await store.list_nodes(run.run_id)
            retries = sum(max(0, n.attempts - 1) for n in nodes)
            hits = sum(1 for n in nodes if n.cached)
            lines.append(
                f"{run.run_id:<22} {run.workflow:<20} {run.status:<11} "
                f"{run.nodes_done:>3}/{run.nodes_total:<3} {run.tokens.total:>10,} "
                f"{retries:>7} {hits:>10}"
            )
        lines.append("")
        lines.append(f"{plural(len(handoffs), 'handoff')}; "
                     f"{plural(len(pending), 'note proposal')} pending review.")
        for problem in result.problems:
            lines.append(f"problem: {problem}")
        lines.append("Open the dashboard on it: tether tui --workspace " + str(workspace.root))
        return lines
    finally:
        await db.close()


async def live_demo(app: Any) -> DemoResult:
    """Run the demo plan inside the dashboard's event loop (started as a worker by the app).

    The engine writes through the app's writable connection (:mod:`tui.run_control`), so the
    dashboard's own actions and the demo's runs share one short-transaction writer.
    """
    # The dashboard's embedded engine: quitting while these runs are active asks first.
    engine = await host_for(app).engine()
    app.engine = engine
    result = await run_plan(engine, demo_steps())
    for problem in result.problems:
        app.notify(problem, title="demo", severity="warning", markup=False)
    return result
