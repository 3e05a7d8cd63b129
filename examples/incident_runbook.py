"""Incident runbook: lessons are proposed for review as pending notes superseding older ones.

``postmortem`` writes the incident's postmortem and retains it in the ``incident-runbook`` bank
as an accepted note. ``lessons`` is offered the memory tools: it recalls the runbook, then calls
``remember`` with ``propose=true`` and ``supersedes=[the notes it recalled]``. The proposal is a
*pending* note, so it changes nothing yet: the older notes stay live until a person accepts it
(``tether notes accept ID`` or ``a`` in the dashboard's Memory view), which retires them in one
write; rejecting it leaves them as they were.

    tether run examples/incident_runbook.py --input '{"incident": "queue backlog after deploy"}'
    tether notes list workflow:incident-runbook --status pending   # the review queue

Offline with the simulated agent; about a second.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine import MemoryConfig, Workflow

BANK = "incident-runbook"


class Incident(BaseModel):
    incident: str
    service: str = "ingest"


class Postmortem(BaseModel):
    summary: str
    root_cause: str
    lessons: list[str]


class Lessons(BaseModel):
    summary: str
    runbook_changes: list[str]


workflow = Workflow(
    "incident-runbook",
    input_model=Incident,
    agents={"oncall": {"type": "simulated", "latency_ms": 10, "seed": 11}},
    default_agent="oncall",
    description="Write a postmortem and propose runbook lessons for human review.",
)


@workflow.task(
    id="postmortem",
    output=Postmortem,
    memory=MemoryConfig(bank=BANK, recall="off", retain="on-complete"),
)
def postmortem(ctx: Any) -> str:
    """The postmortem, retained as an accepted runbook note."""
    return (
        f"Write the postmortem for the incident '{ctx.input.incident}' on the "
        f"{ctx.input.service} service: summary, root cause and lessons."
    )


@workflow.task(
    id="lessons",
    depends_on=["postmortem"],
    output=Lessons,
    memory=MemoryConfig(bank=BANK, recall="auto", tools=True),
)
def lessons(ctx: Any) -> str:
    """Recall the runbook and propose updated lessons (pending) that supersede older ones."""
    report = ctx.output("postmortem")
    cause = report.root_cause.rstrip(".")  # the agent's sentence may end with its own period
    return (
        f"Postmortem lessons succeeded with summary and root cause for {ctx.input.service}: "
        f"{report.summary} Root cause: {cause}. Recall the runbook, then propose "
        "updated runbook lessons for review with remember(propose=true), superseding the "
        "notes they replace."
    )
