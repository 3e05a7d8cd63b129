"""Two tasks on the simulated agent, no memory: the quickest run that exports something."""

from __future__ import annotations

from engine import Workflow

workflow = Workflow(
    "tiny",
    agents={"sim": {"type": "simulated", "latency_ms": 5, "seed": 1}},
    default_agent="sim",
)
workflow.add_task("plan", "Plan a small change.")
workflow.add_task("check", "Check the plan.", depends_on=["plan"])
