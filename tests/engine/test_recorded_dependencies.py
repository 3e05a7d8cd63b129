"""What a node row records as its dependencies is what it waited for, so the run graph draws
its edges and the timeline its waits and critical path: a loop's first body task waits for
the loop's dependencies, and a task depending on a loop waits for the loop's body tasks.
Before, the refinement loop of the fanout-review example sat in the graph's first column with
no edge from the report it waited for, and the critical path began at the loop."""

from __future__ import annotations

from engine_test_support import ScriptedAgent, run_workflow
from pydantic import BaseModel

from engine.agents.agent import AgentRequest
from engine.workflow.definition import Workflow
from store.clock import ManualClock
from store.db.seam import Database
from store.read.timeline import build_timeline
from store.runs.run_store import RunStore
from tui.graph_layout import build_graph


class Step(BaseModel):
    n: int
    done: bool


def chained() -> Workflow:
    wf = Workflow("chained", agents={"simulated": ScriptedAgent()})
    wf.add_task("start", "begin")
    loop = wf.loop("work", until=lambda ctx: ctx.output("step").done, max_iterations=3,
                   depends_on=["start"])
    loop.task(id="step", output=Step)(lambda ctx: f"step {ctx.iteration}")
    loop.task(id="check", depends_on=["step"])(lambda ctx: "check the step")
    wf.add_task("after", "wrap up", depends_on=["work"])
    return wf


def test_recorded_dependencies_name_node_ids() -> None:
    wf = chained()
    assert wf.recorded_dependencies("start") == []
    assert wf.recorded_dependencies("step") == ["start"]  # the loop's, though it names none
    assert wf.recorded_dependencies("check") == ["step"]  # it starts after step, not the loop
    assert wf.recorded_dependencies("after") == ["step", "check"]  # the loop's body


async def test_the_graph_and_timeline_follow_a_loop(db: Database, clock: ManualClock) -> None:
    def behave(request: AgentRequest, n: int) -> str | None:
        clock.advance(100)  # each node ends later than the one before it
        if request.node_id == "step":
            return f'{{"n": {request.iteration}, "done": {str(request.iteration == 1).lower()}}}'
        return None

    wf = chained()
    agent = ScriptedAgent(behaviour=behave)
    wf.agents["simulated"] = agent
    outcome = await run_workflow(db, wf)
    assert outcome.status == "finished" and len(agent.invocations) == 6  # 1 + 2×2 + 1
    store = RunStore(db)
    nodes = await store.list_nodes(outcome.run_id)
    graph = build_graph(nodes)
    columns = [[box.key for box in column] for column in graph.columns]
    assert columns == [["start"], ["step"], ["check"], ["after"]]
    timeline = build_timeline(await store.get_run(outcome.run_id), nodes, clock.now_ms())
    # An iteration is linked to the same node's iteration before it (the rows do not say
    # which other body tasks an iteration waited for), so check#0 is not on the path.
    assert timeline.critical_path == ["start#0", "step#0", "step#1", "check#1", "after#0"]
    step_0 = next(bar for bar in timeline.bars if bar.node.key == "step#0")
    start = next(bar for bar in timeline.bars if bar.node.key == "start#0")
    assert step_0.ready_ms == start.node.finished_at_ms  # it waited for start, not queued
