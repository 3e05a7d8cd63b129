"""Workflow used by the crash-safety test: fan-out, fan-in and a loop on the simulated agent,
with every agent invocation appended to the file named by ``CRASH_LOG``."""

from __future__ import annotations

import os
from dataclasses import dataclass

from pydantic import BaseModel

from engine.agents.agent import AgentRequest, AgentResult
from engine.agents.simulated import SimulatedAgent
from engine.workflow.definition import Workflow


class Part(BaseModel):
    name: str
    size: int


class Step(BaseModel):
    text: str
    done: bool


@dataclass
class LoggingAgent(SimulatedAgent):
    """The simulated agent, logging each invocation before it starts."""

    async def run(self, request: AgentRequest) -> AgentResult:
        line = f"{request.run_id} {request.node_id} {request.iteration} {request.attempt}\n"
        fd = os.open(os.environ["CRASH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        return await super().run(request)


workflow = Workflow(
    "crash-test",
    agents={"sim": LoggingAgent(latency_ms=25, seed=3)},
    default_agent="sim",
    concurrency=3,
)
workflow.add_task("plan", "Plan the parts.", output=Part)
workflow.fan_out("part", items=list(range(6)), depends_on=["plan"], output=Part)(
    lambda ctx: f"Build part {ctx.item} of {ctx.output('plan').name}."
)
workflow.add_task(
    "merge", lambda ctx: f"Merge {len(ctx.output('part'))} parts.", depends_on=["part"], output=Part
)
loop = workflow.loop(
    "polish", until=lambda ctx: ctx.iteration >= 2, max_iterations=5, depends_on=["merge"]
)
loop.task(id="step", output=Step)(lambda ctx: f"Polish round {ctx.iteration}.")
