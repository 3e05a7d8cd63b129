"""Token ceilings at dispatch (fail, warn, skip-remaining, handoff; cache tokens count), the
handoff chain across generations, custom and failing distillers, and ``tether clear``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from memory_support import RecordingAgent, engine_with_hooks
from pg_support import cli_env
from pydantic import BaseModel

from engine.ceiling import Ceiling, check_ceiling, counted_tokens
from engine.handoff import MAX_CARRIED_BYTES, DistillInput, default_distill
from engine.workflow.definition import Workflow
from engine.workflow.loader import load_workflow
from store.db.seam import Database
from store.errors import InvalidInputError
from store.model.token_lanes import TokenUsage
from store.runs import runs_sql as run_sql
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[2]


class Out(BaseModel):
    summary: str
    learnings: list[str]


def chain(agent: RecordingAgent, ceiling: Any) -> Workflow:
    wf = Workflow("ceiling-test", agents={"rec": agent}, default_agent="rec", ceiling=ceiling)
    wf.add_task("a", "first", output=Out)
    wf.add_task("b", "second", output=Out, depends_on=["a"])
    wf.add_task("c", "third", output=Out, depends_on=["b"])
    return wf


def test_cache_and_reasoning_tokens_count_against_the_ceiling() -> None:
    # The reference system counted neither cache nor reasoning tokens; reasoning is billed as
    # output, and the output lane holds the rest of what the model wrote (nothing twice).
    usage = TokenUsage(input=10, cache_read=900, cache_write=50, output=10, reasoning=30)
    assert counted_tokens(usage) == usage.total == 1000  # the Runs view shows .total
    assert check_ceiling(Ceiling(1000), usage, 0).action == "fail"
    assert check_ceiling(Ceiling(1001), usage, 0).action == "run"
    assert check_ceiling(Ceiling(1000, "warn"), usage, 0).action == "warn"
    assert check_ceiling(Ceiling(1000, "skip-remaining"), usage, 0).action == "skip"
    assert check_ceiling(Ceiling(1000, "handoff"), usage, 0).action == "handoff"
    assert check_ceiling(Ceiling(1000), usage._replace(reasoning=29), 0).action == "run"
    last = check_ceiling(Ceiling(1000, "handoff", max_generations=3), usage, 2)
    assert last.action == "fail" and "last of 3" in last.reason
    with pytest.raises(InvalidInputError):
        Ceiling(0)
    with pytest.raises(InvalidInputError):
        Ceiling(10, "explode")  # type: ignore[arg-type]


USAGE = TokenUsage(input=100, cache_read=900, output=50)  # 1 050 counted tokens per call


async def test_fail_mode_stops_the_attempt_that_crosses_it(db: Database) -> None:
    agent = RecordingAgent(usage=USAGE)
    outcome = await engine_with_hooks(db).start(chain(agent, Ceiling(2000)))
    assert outcome.status == "failed"
    assert outcome.error == (
        f"Stopped by the token ceiling: run {outcome.run_id} used 2,100 tokens of its "
        "2,000 tokens."
    )
    assert len(agent.prompts) == 2  # the third task never ran
    (crossing,) = await RunStore(db).list_attempts(outcome.run_id, "b")
    assert counted_tokens(crossing.tokens) == 1050  # stopped or not, its tokens are kept


async def test_warn_mode_runs_everything_and_records_warnings(db: Database) -> None:
    agent = RecordingAgent(usage=USAGE)
    outcome = await engine_with_hooks(db).start(chain(agent, Ceiling(1000, "warn")))
    assert outcome.status == "finished" and len(agent.prompts) == 3
    events = await RunStore(db).recent_events(100, run_id=outcome.run_id)
    assert sum(e.type == "warning" for e in events) == 2


async def test_skip_remaining_mode_skips_later_tasks(db: Database) -> None:
    agent = RecordingAgent(usage=USAGE)
    outcome = await engine_with_hooks(db).start(chain(agent, Ceiling(1000, "skip-remaining")))
    nodes = {n.node_id: n.state for n in await RunStore(db).list_nodes(outcome.run_id)}
    assert nodes == {"a": "finished", "b": "skipped", "c": "skipped"}
    assert len(agent.prompts) == 1


async def test_handoff_chain_spans_generations(db: Database) -> None:
    workflow = load_workflow(ROOT / "examples" / "context_handoff.py")
    engine = engine_with_hooks(db)
    first = await engine.start(workflow, {"goal": "migrate the suite", "increments": 8})
    final = await engine.run_chain(workflow, first)
    assert final.status == "finished"
    runs = RunStore(db)
    handoffs = list(reversed(await runs.list_handoffs()))
    assert [h.generation for h in handoffs] == [1, 2, 3]
    assert all(h.trigger == "ceiling" and "Token ceiling reached" in h.reason for h in handoffs)
    for before, after in zip(handoffs, handoffs[1:], strict=False):
        assert before.to_run_id == after.from_run_id
    last = await runs.get_run(final.run_id)
    assert last.generation == 3 and last.parent_run_id == handoffs[-1].from_run_id
    assert (await runs.get_run(handoffs[0].from_run_id)).status == "handed-off"
    state = handoffs[-1].carried_state
    assert state["steps_done"] == 6 and state["generation"] == 3  # the workflow's own distiller
    assert len(state["learnings"]) <= 10
    assert handoffs[-1].carried_bytes == len(json.dumps(state, separators=(",", ":")).encode())


async def test_a_failing_distiller_falls_back_to_the_default(db: Database) -> None:
    def broken(data: DistillInput) -> dict[str, Any]:
        raise ValueError("boom")

    agent = RecordingAgent(usage=USAGE)
    outcome = await engine_with_hooks(db).start(
        chain(agent, Ceiling(1000, "handoff", distill=broken)))
    assert outcome.status == "handed-off" and outcome.next_run_id
    handoff = (await RunStore(db).list_handoffs(from_run_id=outcome.run_id))[0]
    assert handoff.carried_state["generation"] == 1 and "goal" in handoff.carried_state
    events = await RunStore(db).recent_events(100, run_id=outcome.run_id)
    assert any(e.type == "warning" and "distiller failed" in e.payload["reason"] for e in events)


def test_default_distill_is_bounded() -> None:
    from engine.handoff import FinishedNode
    from store.model.run_records import RunRecord

    goal = json.dumps({"goal": "g" * 10_000})
    run = RunRecord("r", "w", None, "running", goal, None, None, None, 4, None,
                    0, None, None, None, 0, None, None, None, 0, 0, TokenUsage())
    finished = [FinishedNode("s", i, {"summary": f"s{i}", "learnings": [f"l{i}" * 400] * 2})
                for i in range(30)]
    state = default_distill(DistillInput(run, "why", "ceiling", None, finished))
    assert state["generation"] == 5 and state["last_summary"] == "s29"
    assert len(state["learnings"]) <= 10
    assert len(json.dumps(state, ensure_ascii=False).encode()) <= MAX_CARRIED_BYTES


async def test_tether_clear_hands_off_a_run_no_engine_is_running(
    db: Database, workspace: Workspace
) -> None:
    runs = RunStore(db)
    # The subprocess reads the wall clock: a run whose heartbeat is on the (older) manual clock
    # is stale there; the "live" run gets a heartbeat of the real now.
    stale = await runs.create_run("context-handoff", input={"goal": "g"})
    live = await runs.create_run("context-handoff", input={"goal": "g"})
    await db.execute(run_sql.UPDATE_HEARTBEAT,
                     {"now": time.time_ns() // 1_000_000, "run_id": live.run_id})
    tether = [sys.executable, "-m", "tui.cli.entry", "clear", "--workspace", str(workspace.root)]
    env = cli_env(db.workspace)
    done = subprocess.run([*tether, stale.run_id, "--reason", "too much residue"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    # An idle run is handed off at once; the message says how to start the new generation.
    assert done.stdout.startswith(f"Run {stale.run_id} handed off to r-")
    new_id = done.stdout.split()[5].rstrip(";")
    assert done.stdout.strip().endswith(f"--resume {new_id}")
    assert "tether run " in done.stdout
    assert (await runs.get_run(stale.run_id)).status == "handed-off"
    successor = await runs.get_run(new_id)
    assert successor.parent_run_id == stale.run_id and successor.generation == 1
    assert successor.status == "pending"  # resumable with tether run --resume
    handoff = (await runs.list_handoffs(to_run_id=new_id))[0]
    assert handoff.trigger == "person" and handoff.reason == "too much residue"
    requested = subprocess.run([*tether, live.run_id], capture_output=True, text=True, cwd=ROOT,
                               timeout=60, env=env)
    assert requested.returncode == 0 and "Clear requested" in requested.stdout
    after = await runs.get_run(live.run_id)
    assert after.status == "running" and after.clear_requested_at_ms is not None
    assert after.clear_reason == "cleared by a person"
    missing = subprocess.run([*tether, "r-nope"], capture_output=True, text=True, cwd=ROOT,
                             timeout=60, env=env)
    assert missing.returncode == 1 and "no run" in missing.stderr


async def test_a_ceiling_without_a_guard_is_refused_not_ignored(db: Database) -> None:
    from engine.run.engine import Engine

    with pytest.raises(InvalidInputError, match="enforces none"):
        await Engine(db).start(chain(RecordingAgent(), Ceiling(1000)))
    with pytest.raises(InvalidInputError, match="ceiling must be"):
        await engine_with_hooks(db).start(chain(RecordingAgent(), "lots"))
    assert await RunStore(db).list_runs() == []
