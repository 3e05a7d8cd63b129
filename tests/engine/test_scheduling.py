"""Scheduling: concurrency limit, fan-out/fan-in, loops, retries with backoff, timeouts,
artifacts and metering, on a real database."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator

import pytest
from engine_test_support import ScriptedAgent, fail_first, run_workflow
from pydantic import BaseModel

from engine.agents.agent import AgentRequest
from engine.artifact_files import stream_log_path
from engine.hooks import EngineHooks, Progress
from engine.workflow.definition import Workflow
from engine.workflow.definition_error import WorkflowDefinitionError
from engine.workflow.policies import Backoff
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore


class Item(BaseModel):
    name: str
    size: int


class Step(BaseModel):
    n: int
    done: bool


async def test_concurrency_limit_and_fan_in_order(db: Database) -> None:
    agent = ScriptedAgent(delay_s=0.02, behaviour=lambda r, n: None)
    wf = Workflow("fan", agents={"simulated": agent}, concurrency=3)
    wf.add_task("root", "list things", output=Item)
    wf.fan_out("each", items=lambda ctx: list(range(7)), depends_on=["root"], output=Item)(
        lambda ctx: f"item {ctx.item} of {ctx.output('root').name}"
    )
    seen: list[list[int]] = []

    @wf.task(id="merge", depends_on=["each"])
    def merge(ctx) -> str:
        outputs = ctx.output("each")
        seen.append([len(outputs)])
        return f"merge {len(outputs)}"

    outcome = await run_workflow(db, wf)
    assert outcome.status == "finished"
    assert agent.max_running == 3
    assert seen == [[7]]
    nodes = await RunStore(db).list_nodes(outcome.run_id)
    assert {n.node_id for n in nodes} == {"root", "merge", *(f"each[{i}]" for i in range(7))}
    run = await RunStore(db).get_run(outcome.run_id)
    assert run.nodes_done == run.nodes_total == 9
    # Fan-in keeps item order, whatever order the copies finished in.
    node_outputs = {n.node_id: n.output for n in nodes}
    assert all(node_outputs[f"each[{i}]"] is not None for i in range(7))


async def test_loop_until_and_previous(db: Database) -> None:
    def behave(request: AgentRequest, n: int) -> str:
        return f'{{"n": {request.iteration}, "done": {str(request.iteration == 2).lower()}}}'

    agent = ScriptedAgent(behaviour=behave)
    wf = Workflow("loopy", agents={"simulated": agent})
    wf.add_task("start", "begin")
    loop = wf.loop(
        "work", until=lambda ctx: ctx.output("step").done, max_iterations=10, depends_on=["start"]
    )
    prompts: list[str] = []

    @loop.task(id="step", output=Step)
    def step(ctx) -> str:
        prev = ctx.previous("step")
        text = f"iteration {ctx.iteration} after {prev.n if prev else 'none'}"
        prompts.append(text)
        return text

    wf.add_task("after", lambda ctx: f"final n={ctx.output('step').n}", depends_on=["work"])
    outcome = await run_workflow(db, wf)
    assert outcome.status == "finished"
    assert prompts == ["iteration 0 after none", "iteration 1 after 0", "iteration 2 after 1"]
    iterations = await RunStore(db).node_iterations(outcome.run_id, "step")
    assert [n.iteration for n in iterations] == [0, 1, 2]
    attempts = await RunStore(db).list_attempts(outcome.run_id, "after")
    assert attempts[0].prompt is not None and "final n=2" in attempts[0].prompt


async def test_loop_stops_at_max_and_can_fail_on_max(db: Database) -> None:
    agent = ScriptedAgent(behaviour=lambda r, n: '{"n": 1, "done": false}')
    wf = Workflow("cap", agents={"simulated": agent})
    loop = wf.loop("l", until=lambda ctx: ctx.output("s").done, max_iterations=3)
    loop.task(id="s", output=Step)(lambda ctx: f"go {ctx.iteration}")
    assert (await run_workflow(db, wf)).status == "finished"
    assert agent.count("s") == 3
    strict = Workflow("cap2", agents={"simulated": agent})
    strict_loop = strict.loop("l", until=lambda ctx: False, max_iterations=2, fail_on_max=True)
    strict_loop.task(id="s", output=Step)(lambda ctx: "go")
    outcome = await run_workflow(db, strict)
    assert outcome.status == "failed" and "2 iterations" in (outcome.error or "")


async def test_retries_with_backoff_then_success_and_exhaustion(db: Database) -> None:
    agent = ScriptedAgent(behaviour=fail_first(2, node="flaky"))
    wf = Workflow("retry", agents={"simulated": agent})
    wf.add_task("flaky", "try", retries=2, backoff=Backoff(initial_s=0.01, factor=2, max_s=0.02))
    outcome = await run_workflow(db, wf)
    assert outcome.status == "finished"
    store = RunStore(db)
    attempts = await store.list_attempts(outcome.run_id, "flaky")
    assert [a.state for a in attempts] == ["failed", "failed", "finished"]
    assert attempts[0].error == "planned failure 1"
    # Each attempt carries exactly its own calls' tokens (never running totals): the failed
    # ones made no call.
    assert [a.tokens for a in attempts] == [TokenUsage(), TokenUsage(), agent.usage]
    assert (await store.get_run(outcome.run_id)).tokens == agent.usage

    agent2 = ScriptedAgent(behaviour=fail_first(5))
    wf2 = Workflow("retry2", agents={"simulated": agent2})
    wf2.add_task("flaky", "try", retries=1, backoff=0.01)
    outcome2 = await run_workflow(db, wf2)
    assert outcome2.status == "failed"
    assert "after 2 attempts: planned failure 2" in (outcome2.error or "")
    assert (await store.get_node(outcome2.run_id, "flaky")).state == "failed"


async def test_non_retryable_error_stops_retries(db: Database) -> None:
    agent = ScriptedAgent(behaviour=fail_first(1, retryable=False))
    wf = Workflow("fatal", agents={"simulated": agent})
    wf.add_task("a", "x", retries=5, backoff=0.01)
    assert (await run_workflow(db, wf)).status == "failed"
    assert agent.count("a") == 1


async def test_timeout_fails_the_attempt_and_retries(db: Database) -> None:
    calls = {"n": 0}

    async def slow_then_fast(request: AgentRequest, n: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            await asyncio.sleep(5)
        return None

    agent = ScriptedAgent(behaviour=slow_then_fast)
    wf = Workflow("slow", agents={"simulated": agent})
    wf.add_task("a", "x", timeout_s=0.1, retries=1, backoff=0.01)
    outcome = await run_workflow(db, wf)
    assert outcome.status == "finished"
    attempts = await RunStore(db).list_attempts(outcome.run_id, "a")
    assert attempts[0].state == "failed" and "timed out after 0.1 s" in (attempts[0].error or "")


async def test_artifacts_helper_and_stream_log(db: Database) -> None:
    agent = ScriptedAgent()
    wf = Workflow("art", agents={"simulated": agent})

    @wf.task(id="write")
    def write(ctx) -> str:
        ctx.artifacts.write_text("notes.md", "# hello")
        return "write"

    @wf.task(id="read", depends_on=["write"])
    def read(ctx) -> str:
        return "read " + ctx.artifacts.read_text("notes.md")

    outcome = await run_workflow(db, wf)
    attempts = await RunStore(db).list_attempts(outcome.run_id, "read")
    assert attempts[0].prompt == "read # hello"
    log = stream_log_path(db.workspace.artifacts_dir, outcome.run_id, "read", 0, 1)
    assert log.exists() and log.read_text() != ""


async def test_an_agent_bug_fails_the_attempt_not_the_engine(db: Database) -> None:
    def buggy(request: AgentRequest, n: int) -> str:
        if n == 1:
            raise KeyError("choices")
        return "fine"

    agent = ScriptedAgent(behaviour=buggy)
    wf = Workflow("bug", agents={"simulated": agent})
    wf.add_task("a", "x", retries=1, backoff=0.01)
    outcome = await run_workflow(db, wf)
    assert outcome.status == "finished"
    attempts = await RunStore(db).list_attempts(outcome.run_id, "a")
    assert [a.state for a in attempts] == ["failed", "finished"]
    assert attempts[0].error == "the agent raised KeyError: 'choices'"


async def test_a_fan_out_past_its_max_items_runs_none_of_them(db: Database) -> None:
    """A fan-out's items often come from the run's input or an agent's output; each one is an
    agent invocation. 1,001 files from the input made 1,001 invocations with no bound at
    all; now a fan-out has at most ``max_items`` (default 1,000) and fails before any runs."""
    agent = ScriptedAgent()
    wf = Workflow("wide", agents={"simulated": agent})
    wf.add_task("plan", "Plan the review.")
    wf.fan_out("each", items=lambda ctx: ctx.input["files"], depends_on=["plan"])(
        lambda ctx: f"Review {ctx.item}")
    outcome = await run_workflow(db, wf, {"files": [f"f{i}.py" for i in range(1001)]})
    assert outcome.status == "failed"
    assert outcome.error == ("Fan-out 'each' has more items than its max_items (1,000): none "
                             "of them ran (set max_items on the fan-out to allow more).")
    assert [node for node, _, _ in agent.invocations] == ["plan"]

    pulled: list[int] = []

    def endless(ctx: object) -> Iterator[int]:
        for n in itertools.count():
            pulled.append(n)
            yield n

    bounded = Workflow("endless", agents={"simulated": agent})
    bounded.fan_out("each", items=endless, max_items=3)(lambda ctx: f"Do {ctx.item}")
    assert (await run_workflow(db, bounded)).status == "failed"
    assert len(pulled) == 4  # read one past the bound, no further
    exact = Workflow("exact", agents={"simulated": agent})
    exact.fan_out("each", items=["a", "b", "c"], max_items=3)(lambda ctx: f"Do {ctx.item}")
    assert (await run_workflow(db, exact)).status == "finished"
    assert agent.count("each[2]") == 1
    with pytest.raises(WorkflowDefinitionError, match=r"has 4 items, more than its max_items"):
        exact.fan_out("more", items="abcd", max_items=3)(lambda ctx: "x")
    with pytest.raises(WorkflowDefinitionError, match="max_items must be a whole number"):
        exact.fan_out("zero", items="a", max_items=0)(lambda ctx: "x")


async def test_a_loop_stopped_by_its_bound_says_so(db: Database) -> None:
    """A loop whose until never held ended at max_iterations as if it had converged: the run
    finished and nothing said the last draft was one the loop gave up on. Now a warning event
    on the last round's node and a progress line say it (a loop that converged says nothing)."""
    agent = ScriptedAgent(behaviour=lambda r, n: '{"n": 1, "done": false}')
    seen: list[Progress] = []
    wf = Workflow("cap", agents={"simulated": agent})
    loop = wf.loop("refine", until=lambda ctx: ctx.output("s").done, max_iterations=3)
    loop.task(id="s", output=Step)(lambda ctx: f"go {ctx.iteration}")
    outcome = await run_workflow(db, wf, hooks=EngineHooks(on_progress=seen.append))
    assert outcome.status == "finished" and agent.count("s") == 3
    said = ("Loop 'refine' stopped at its max_iterations (3) without its until condition "
            "holding; what follows it gets the last round's outputs.")
    events = await RunStore(db).events_since(0, run_id=outcome.run_id)
    warned = [e for e in events if e.type == "warning"]
    assert [(e.node_id, e.iteration, json.loads(e.payload_json or "{}")) for e in warned] == [
        ("s", 2, {"reason": said})]
    assert [(p.node_id, p.iteration, p.detail) for p in seen if p.kind == "warning"] == [
        ("s", 2, said)]

    done = Workflow("done", agents={"simulated": ScriptedAgent(
        behaviour=lambda r, n: '{"n": 1, "done": true}')})
    done.loop("refine", until=lambda ctx: ctx.output("s").done, max_iterations=1).task(
        id="s", output=Step)(lambda ctx: "go")
    quiet = await run_workflow(db, done)
    events = await RunStore(db).events_since(0, run_id=quiet.run_id)
    assert quiet.status == "finished" and not [e for e in events if e.type == "warning"]
