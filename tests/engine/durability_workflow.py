"""Workflow used by the group-commit durability test: a wide fan-out of instant nodes (so many
finish at the same moment and share commits) and a chain after it, with every agent invocation
appended to the file named by ``CRASH_LOG``."""

from __future__ import annotations

import os

from engine.agents.agent import AgentRequest, AgentResult, ModelCall
from engine.workflow.definition import Workflow
from store.model.token_lanes import TokenUsage


class InstantLoggingAgent:
    """Logs each invocation before it runs, reports one call and answers at once."""

    name = "instant"
    native_structured_output = False
    simulated = True

    async def run(self, request: AgentRequest) -> AgentResult:
        line = f"{request.run_id} {request.node_id} {request.iteration} {request.attempt}\n"
        fd = os.open(os.environ["CRASH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        await request.on_call(ModelCall(TokenUsage(input=10, cache_read=90, output=5), "instant"))
        return AgentResult(text=f"done {request.node_id}")


workflow = Workflow(
    "group-commit",
    agents={"instant": InstantLoggingAgent()},
    default_agent="instant",
    concurrency=8,
)
workflow.add_task("plan", "Plan the items.")
workflow.add_task(
    "item",
    lambda ctx: f"Item {ctx.item} after {ctx.output('plan')}.",
    depends_on=["plan"],
    items=list(range(300)),
)
previous = "item"
for step in range(100):
    workflow.add_task(f"step{step}", f"Step {step}.", depends_on=[previous])
    previous = f"step{step}"
