"""Workflow for the worker tests: a chain of slow simulated tasks; every agent invocation is
appended (with the worker's pid) to the file named by ``WORKER_LOG``. The node named by
``WORKER_GATE_NODE`` waits until the file ``WORKER_GATE`` exists, so a test can kill a worker
while that node's attempt is surely running."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from pydantic import BaseModel

from engine.agents.agent import AgentRequest, AgentResult
from engine.agents.simulated import SimulatedAgent
from engine.workflow.definition import Workflow

STEPS = 6


class Step(BaseModel):
    text: str


@dataclass
class LoggingAgent(SimulatedAgent):
    """The simulated agent, logging each invocation before it starts."""

    async def run(self, request: AgentRequest) -> AgentResult:
        line = f"{os.getpid()} {request.run_id} {request.node_id} {request.attempt}\n"
        fd = os.open(os.environ["WORKER_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        if request.node_id == os.environ.get("WORKER_GATE_NODE"):
            while not os.path.exists(os.environ["WORKER_GATE"]):
                await asyncio.sleep(0.02)
        return await super().run(request)


workflow = Workflow(
    "worker-chain",
    agents={"sim": LoggingAgent(latency_ms=int(os.environ.get("WORKER_LATENCY_MS", "400")))},
    default_agent="sim",
)
previous: list[str] = []
for index in range(STEPS):
    workflow.add_task(f"step{index}", f"Do step {index}.", depends_on=previous, output=Step)
    previous = [f"step{index}"]
