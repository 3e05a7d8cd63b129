"""`tether node` through the real command line says what the money features did: a retry that
continued the failed attempt's session, an attempt a budget stopped, a node carried over from
an earlier generation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import cli_agent_support as fake
from memory_cli_support import tether

from engine.agents.simulated import SimulatedAgent
from engine.ceiling import Ceiling
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.db.backends import open_database
from store.workspace.layout import Workspace


def test_node_says_which_session_a_retry_continued_and_what_a_budget_stopped(
    tmp_path: Path,
) -> None:
    folder = tmp_path / ".tether"

    async def runs() -> tuple[str, str, str, str]:
        db = await open_database(Workspace(folder))
        try:
            resumed = fake.sequenced(tmp_path, "claude-code", [
                {"stdout": fake.api_500_after_ten_messages(tmp_path), "exit": 1},
                {"stdout": fake.capture("claude-code/C_gleam_basic_query_stream.jsonl"),
                 "expect": [[f"--resume={fake.V10_SESSION}"]]},
            ])
            first = await fake.run_one(db, resumed, retries=2)
            # $0.36 in one session against a $0.10 ceiling: stopped, not retried.
            costly = fake.sequenced(tmp_path, "claude-code", [
                {"stdout": fake.capture(fake.V10)}], name="costly")
            workflow = Workflow("spend", agents={"c": costly}, default_agent="c",
                                ceiling=Ceiling(max_usd=0.10))
            workflow.add_task("work", "Do it.", retries=2, backoff=0.0)
            engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
            second = await engine.start(workflow)
            assert len(fake.invocations(tmp_path, "costly")) == 1
            # ~36k tokens a task against a 60k ceiling: generation 0 hands off after "a".
            chain = Workflow("chain", default_agent="sim", ceiling=Ceiling(60_000, "handoff"),
                             agents={"sim": SimulatedAgent(name="sim", latency_ms=0,
                                                           base_context_tokens=36_000)})
            for index, task in enumerate(("plan", "a", "b")):
                chain.add_task(task, f"Step {task}.",
                               depends_on=[("plan", "a")[index - 1]] if index else None)
            handed = await engine.start(chain)
            assert handed.status == "handed-off" and handed.next_run_id
            last = await engine.resume(chain, handed.next_run_id)
            assert last.status == "finished", last.error
            return first.run_id, second.run_id, handed.run_id, last.run_id
        finally:
            await db.close()

    resumed_run, stopped_run, gen0, gen1 = asyncio.run(runs())
    assert len(fake.invocations(tmp_path)) == 2
    shown = tether("node", "work", "--run", resumed_run, "--attempts",
                   "--workspace", str(folder))
    assert shown.returncode == 0, shown.stderr
    second = next(line for line in shown.stdout.splitlines() if line.startswith("  attempt 2"))
    assert second.startswith("  attempt 2 - finished")
    assert second.endswith(f"; continued session {fake.V10_SESSION} of attempt 1")
    stopped = tether("node", "work", "--run", stopped_run, "--workspace", str(folder))
    assert stopped.returncode == 0, stopped.stderr
    assert "  attempt 1 - cancelled (stopped by a budget)" in stopped.stdout
    assert "Stopped by the dollar ceiling" in stopped.stdout
    carried = tether("node", "plan", "--run", gen1, "--workspace", str(folder))
    assert carried.returncode == 0, carried.stderr
    assert f"Status: finished (carried from run {gen0}: no attempt here)" in carried.stdout
    assert "Attempts: 0" in carried.stdout
