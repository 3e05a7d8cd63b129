"""Handoffs carry progress: the ceiling snippet of docs/workflows.md on four tickets finishes in
at most three generations without running any node twice (agent invocations counted per node
across the chain), and the chains that cannot progress end with their sentence."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from engine_test_support import ScriptedAgent

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall
from engine.agents.simulated import SimulatedAgent
from engine.ceiling import DEFAULT_MAX_GENERATIONS, Ceiling
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.run_end import RunOutcome
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from engine.workflow.loader import load_workflow
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore

DOCS = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"
TICKETS = {"files": ["TICKET-1", "TICKET-2", "TICKET-3", "TICKET-4"]}


def docs_snippet() -> str:
    """The Python block after the ceiling-snippet marker in docs/workflows.md."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- ceiling-snippet[^>]*-->\s*```python\n(.*?)```", text, re.DOTALL)
    assert found, "docs/workflows.md lost its ceiling snippet"
    return found.group(1)


class Counting(SimulatedAgent):
    """The simulated agent, counting its invocations per node."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.per_node: Counter[str] = Counter()

    async def run(self, request: AgentRequest) -> AgentResult:
        self.per_node[request.node_id] += 1
        return await super().run(request)


async def run_chain(db: Database, workflow: Workflow, raw_input: Any = None) -> list[RunOutcome]:
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
    outcomes = [await engine.start(workflow, raw_input)]
    while outcomes[-1].status == "handed-off" and outcomes[-1].next_run_id:
        outcomes.append(await engine.resume(workflow, outcomes[-1].next_run_id))
    return outcomes


async def test_the_docs_ceiling_snippet_finishes_in_three_generations_at_most(
    db: Database, tmp_path: Path
) -> None:
    path = tmp_path / "review.py"
    path.write_text(docs_snippet(), encoding="utf-8")
    workflow = load_workflow(path)
    # The docs' config: a simulated agent with a 36k context, so the tickets need ~230k tokens.
    agent = Counting(name="simulated", base_context_tokens=36_000, latency_ms=0)
    workflow.agents["simulated"] = agent
    outcomes = await run_chain(db, workflow, TICKETS)
    assert outcomes[-1].status == "finished", outcomes[-1].error
    assert 2 <= len(outcomes) <= 3
    nodes = ["plan", "review[0]", "review[1]", "review[2]", "review[3]", "report"]
    assert agent.per_node == Counter({node: 1 for node in nodes})  # nothing ran twice
    store = RunStore(db)
    spent = sum([(await store.get_run(o.run_id)).tokens for o in outcomes], TokenUsage())
    assert 200_000 < spent.total < 280_000  # ~230k in all, not a multiple of it
    first, last = outcomes[0].run_id, outcomes[-1].run_id
    final = {n.node_id: n for n in await store.list_nodes(last)}
    assert final["plan"].carried_from == first and final["plan"].attempts == 0
    assert final["report"].carried_from is None and final["report"].attempts == 1
    assert all(node.state == "finished" for node in final.values())
    assert await store.list_attempts(last, "plan") == []  # carried: no attempt
    events = await store.recent_events(500, run_id=last)
    assert any(e.type == "node.state" and e.payload.get("carried_from") == first
               for e in events)


def two_tasks(agent: Any, ceiling: Ceiling, *, carry_plan: bool = True) -> Workflow:
    workflow = Workflow("progress", agents={"a": agent}, default_agent="a", ceiling=ceiling)
    workflow.add_task("plan", "Plan the work.", carry=carry_plan)
    workflow.add_task("big", "Do the big part.", depends_on=["plan"], retries=3, backoff=0.0)
    workflow.add_task("last", "Finish.", depends_on=["big"])
    return workflow


class BigFails(ScriptedAgent):
    """Reports its call, then fails (transient) on the node "big", as a session that spent
    tokens and died of an overload would."""

    async def run(self, request: AgentRequest) -> AgentResult:
        if request.node_id != "big":
            return await super().run(request)
        self.invocations.append((request.node_id, request.iteration, request.attempt))
        await request.on_call(ModelCall(self.usage, "test-model"))
        raise AgentError("API Error: Overloaded")


async def test_a_generation_that_finishes_nothing_ends_the_chain(db: Database) -> None:
    # Generation 0 finishes plan (35k tokens, more than the 30k ceiling) and hands off;
    # generation 1 carries plan, and big spends 35k and fails: it finished nothing.
    agent = BigFails(usage=TokenUsage(input=35_000))
    outcomes = await run_chain(db, two_tasks(agent, Ceiling(30_000, "handoff")))
    assert [o.status for o in outcomes] == ["handed-off", "failed"]
    assert outcomes[-1].error is not None
    assert outcomes[-1].error.startswith("No progress in generation 1: it used 35,000 tokens")
    assert Counter(node for node, _, _ in agent.invocations) == Counter(plan=1, big=1)
    assert await RunStore(db).list_handoffs(from_run_id=outcomes[-1].run_id) == []


async def test_a_first_generation_that_finishes_nothing_cannot_fit(db: Database) -> None:
    agent = BigFails(usage=TokenUsage(input=50_000))
    workflow = Workflow("fit", agents={"a": agent}, default_agent="a",
                        ceiling=Ceiling(30_000, "handoff"))
    workflow.add_task("big", "Do it all.", retries=3, backoff=0.0)
    (outcome,) = await run_chain(db, workflow)
    assert outcome.status == "failed"
    assert outcome.error == (
        "This run cannot fit its 30,000-token ceiling: generation 0 used 50,000 tokens without "
        "finishing a node (its largest attempt used 50,000), and a fresh generation would "
        "start over; raise the ceiling or split the task."
    )
    assert len(agent.invocations) == 1
    assert await RunStore(db).list_handoffs() == []


async def test_tasks_that_rerun_every_generation_and_alone_fill_the_ceiling_cannot_fit(
    db: Database,
) -> None:
    agent = ScriptedAgent(usage=TokenUsage(input=40_000))
    (outcome,) = await run_chain(db, two_tasks(agent, Ceiling(30_000, "handoff"),
                                               carry_plan=False))
    assert outcome.status == "failed"
    assert "the tasks that run again in every generation (carry=False) used 40,000" in (
        outcome.error or "")
    assert len(agent.invocations) == 1


async def test_a_changed_input_runs_again_and_the_chain_is_bounded(db: Database) -> None:
    assert Ceiling(1).max_generations == DEFAULT_MAX_GENERATIONS == 10
    # Each generation's prompt reads the distilled state: nothing carries, so the default
    # bound of generations ends the chain.
    agent = ScriptedAgent(usage=TokenUsage(input=600))
    workflow = Workflow("bounded", agents={"a": agent}, default_agent="a",
                        ceiling=Ceiling(1000, "handoff", max_generations=3))
    workflow.add_task("one", lambda ctx: f"Step one, generation {ctx.continuation}")
    workflow.add_task("two", lambda ctx: f"Step two, generation {ctx.continuation}",
                      depends_on=["one"])
    workflow.add_task("three", "Step three.", depends_on=["two"])
    outcomes = await run_chain(db, workflow)
    assert [o.status for o in outcomes] == ["handed-off", "handed-off", "failed"]
    assert "generation 2 is the last of 3" in (outcomes[-1].error or "")
    assert Counter(node for node, _, _ in agent.invocations) == Counter(one=3, two=3)


def test_carry_must_be_a_bool() -> None:
    with pytest.raises(Exception, match="carry must be true or false"):
        Workflow("w").add_task("t", "x", carry="no")
