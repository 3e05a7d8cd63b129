"""A workflow's own budget (``Workflow(..., budget=Budget(...))``): the same keys as
``[budget]``, checked the same way, beside the config's; each test counts agent invocations."""

from __future__ import annotations

from collections import Counter

import pytest
from engine_test_support import ScriptedAgent

from engine import Budget
from engine.agents.agent import AgentRequest, AgentResult, ModelCall
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig, parse_config
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.clock import ManualClock
from store.db.seam import Database
from store.errors import InvalidInputError
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.budget_log import utc_day
from store.runs.run_store import RunStore


class Priced(ScriptedAgent):
    """Reports one $0.40 call per attempt."""

    async def run(self, request: AgentRequest) -> AgentResult:
        self.invocations.append((request.node_id, request.iteration, request.attempt))
        await request.on_call(ModelCall(TokenUsage(input=100), "priced-1", cost_usd=0.40))
        return AgentResult(text="done")


def chain(agent: ScriptedAgent, steps: int, **options: object) -> Workflow:
    workflow = Workflow("nightly", agents={"a": agent}, default_agent="a", **options)
    for index in range(steps):
        workflow.add_task(f"t{index}", f"Step {index}.",
                          depends_on=[f"t{index - 1}"] if index else None)
    return workflow


async def start(db: Database, workflow: Workflow, config: EngineConfig | None = None):
    engine = Engine(db, config=config or EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
    return await engine.start(workflow)


def test_a_workflow_budget_is_checked_like_the_config_one() -> None:
    assert Workflow("w", budget={"day_usd": 20}).budget == Budget(day_usd=20.0)
    assert Workflow("w", budget=Budget(run_tokens=5)).budget.run_tokens == 5
    assert Workflow("w").budget == Budget()
    for bad, said in [
        ({"day_usd": 0}, "Workflow 'w': budget.day_usd must be a number of dollars > 0."),
        ({"hourly_usd": 1}, "Workflow 'w': unknown budget setting 'hourly_usd'."),
        (5, "Workflow 'w': budget must be a table of budget settings."),
        (Budget(run_usd=-1), "Workflow 'w': budget.run_usd must be a number of dollars > 0."),
    ]:
        with pytest.raises(InvalidInputError) as raised:
            Workflow("w", budget=bad)  # type: ignore[arg-type]
        assert str(raised.value) == said


async def test_a_workflow_run_budget_stops_the_run_at_its_dollars(db: Database) -> None:
    agent = Priced()
    workflow = chain(agent, 5, budget=Budget(run_usd=1.0))
    outcome = await start(db, workflow)
    assert outcome.status == "failed"
    assert outcome.error == (
        f"Stopped by the workflow's run budget (budget run_usd): run {outcome.run_id} spent "
        "$1.20 of its $1.00.")
    # $0.40 each: the third call crossed $1.00 and nothing started after it.
    assert Counter(node for node, _, _ in agent.invocations) == Counter(t0=1, t1=1, t2=1)
    record = await RunStore(db).get_run(outcome.run_id)
    assert {"scope": "run", "unit": "usd", "max": 1.0, "on_exceeded": "fail",
            "source": "workflow"} in record.budgets


async def test_a_workflow_daily_budget_counts_the_whole_workspace(
    db: Database, clock: ManualClock
) -> None:
    store = RunStore(db)
    other = await store.create_run("elsewhere")
    await store.record_call(CallUsage(other.run_id, "n", 0, 1, "api", TokenUsage(input=10),
                                      cost_usd=2.9, finished_at_ms=clock.now_ms()))
    day = utc_day(clock.now_ms())
    agent = Priced()
    # The config allows $40 a day; this workflow only $3.
    config = parse_config({"budget": {"day_usd": 40}, "engine": {"poll_interval_s": 0.02}})
    outcome = await start(db, chain(agent, 4, budget={"day_usd": 3.0}), config)
    assert outcome.status == "failed"
    assert outcome.error == (
        f"Stopped by the workflow's daily budget (budget day_usd): the workspace on {day} "
        "spent $3.30 of its $3.00.")
    assert len(agent.invocations) == 1  # $2.90 + $0.40 passed $3.00 on the first call
    alerts = [e.payload for e in await store.recent_events(500, run_id=outcome.run_id)
              if e.type == "budget.alert"]
    # The workflow's budget alerted at 100 % (50 and 80 were passed by the other run's
    # spend before this run started: alerted at its start); the config's $40 at none.
    assert [(a["source"], a["threshold"]) for a in alerts] == [
        ("workflow", 50), ("workflow", 80), ("workflow", 100)]
    record = await store.get_run(outcome.run_id)
    assert {"scope": "day", "unit": "usd", "max": 3.0, "on_exceeded": "fail",
            "source": "workflow", "day": day} in record.budgets
