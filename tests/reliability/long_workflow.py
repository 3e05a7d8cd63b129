"""A workflow of 60 short sequential tasks whose agent writes to its stream log and answers
with a few kilobytes: enough writes, spread over seconds, to fill a small disk mid-run."""

import asyncio

from engine.agents.agent import AgentResult
from engine.workflow.definition import Workflow


class Chatty:
    name = "chatty"
    native_structured_output = False
    simulated = False

    async def run(self, request):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.05)
        request.stream("working " * 250 + "\n")
        return AgentResult(text="answer " * 300)


workflow = Workflow("long", agents={"chatty": Chatty()}, default_agent="chatty")
previous = None
for index in range(60):
    workflow.add_task(f"step-{index}", f"step {index}",
                      depends_on=[previous] if previous else None)
    previous = f"step-{index}"
