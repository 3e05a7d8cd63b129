"""A bad workflow definition fails with one clear sentence before anything runs."""

from __future__ import annotations

import pytest
from engine_test_support import ScriptedAgent, run_workflow
from pydantic import BaseModel

from engine.workflow.definition import Workflow
from engine.workflow.definition_error import WorkflowDefinitionError
from engine.workflow.policies import CachePolicy
from store.db.seam import Database
from store.runs.run_store import RunStore


class Out(BaseModel):
    text: str


def _wf() -> Workflow:
    return Workflow("wf", agents={"simulated": ScriptedAgent()})


def test_cycle_is_named() -> None:
    wf = _wf()
    wf.add_task("a", "do a", depends_on=["c"])
    wf.add_task("b", "do b", depends_on=["a"])
    wf.add_task("c", "do c", depends_on=["b"])
    with pytest.raises(WorkflowDefinitionError, match=r"cycle .*a -> .*b.* -> .*c|cycle"):
        wf.validate()


def test_unknown_dependency_and_duplicate_id() -> None:
    wf = _wf()
    wf.add_task("a", "do a", depends_on=["missing"])
    with pytest.raises(WorkflowDefinitionError, match="'missing', which is not declared"):
        wf.validate()
    with pytest.raises(WorkflowDefinitionError, match="declared twice"):
        wf.add_task("a", "again")


def test_empty_static_prompt_and_bad_options() -> None:
    wf = _wf()
    with pytest.raises(WorkflowDefinitionError, match="empty prompt"):
        wf.add_task("a", "   ")
    with pytest.raises(WorkflowDefinitionError, match="pydantic model"):
        wf.add_task("b", "x", output=dict)  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match="retries"):
        wf.add_task("c", "x", retries=-1)
    with pytest.raises(WorkflowDefinitionError, match="scope"):
        CachePolicy(scope="forever")
    with pytest.raises(WorkflowDefinitionError, match="id"):
        wf.add_task("../etc", "x")
    loop = wf.loop("l", until=lambda ctx: True, max_iterations=2)
    assert loop.body == []
    wf.add_task("d", "x")
    with pytest.raises(WorkflowDefinitionError, match="Loop 'l' has no tasks"):
        wf.validate()


def test_depending_into_a_loop_body_is_refused() -> None:
    wf = _wf()
    loop = wf.loop("l", until=lambda ctx: True, max_iterations=2)
    loop.task(id="inner")(lambda ctx: "x")
    wf.add_task("after", "y", depends_on=["inner"])
    with pytest.raises(WorkflowDefinitionError, match="depend on the loop 'l'"):
        wf.validate()


async def test_root_prompt_rendering_empty_fails_before_any_row(db: Database) -> None:
    wf = _wf()
    wf.add_task("a", lambda ctx: ctx.input.get("text", ""))
    with pytest.raises(WorkflowDefinitionError, match="rendered an empty prompt"):
        await run_workflow(db, wf, {"text": ""})
    assert await RunStore(db).list_runs() == []


async def test_dependent_prompt_rendering_empty_fails_the_node(db: Database) -> None:
    agent = ScriptedAgent(behaviour=lambda r, n: '{"text": ""}')
    wf = Workflow("wf", agents={"simulated": agent})
    wf.add_task("a", "produce", output=Out)
    wf.add_task("b", lambda ctx: ctx.output("a").text, depends_on=["a"], retries=3)
    outcome = await run_workflow(db, wf)
    assert outcome.status == "failed"
    assert "empty prompt" in (outcome.error or "")
    node = await RunStore(db).get_node(outcome.run_id, "b")
    assert node.state == "failed" and node.attempts == 0
    assert agent.count("b") == 0
