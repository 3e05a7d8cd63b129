"""Example: review a change set with a fan-out, a fan-in and a refinement loop.

Runs offline with the simulated agent in a few seconds:

    tether run examples/fanout_review.py --input '{"files": ["api.py", "db.py", "cli.py"]}'

Set ``TETHER_SIM_LATENCY_MS`` to make the simulated agent slower (the dashboard demo does).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from engine import Backoff, CachePolicy, TaskContext, Workflow


class ReviewInput(BaseModel):
    files: list[str] = Field(default_factory=lambda: ["api.py", "store.py", "cli.py"], min_length=1)
    goal: str = "Find bugs and risky changes before merging."


class Plan(BaseModel):
    summary: str
    focus: list[str]


class FileReview(BaseModel):
    file: str
    findings: list[str]
    severity: int = Field(ge=0, le=3)


class Report(BaseModel):
    summary: str
    blocking: bool


class Draft(BaseModel):
    text: str
    done: bool


workflow = Workflow(
    "fanout-review",
    input_model=ReviewInput,
    agents={"reviewer": {"type": "simulated", "latency_ms": 120, "seed": 7}},
    default_agent="reviewer",
    concurrency=4,
    description="Plan, review each file in parallel, merge the findings, refine a summary.",
)


@workflow.task(id="plan", output=Plan, cache=CachePolicy(scope="workflow", version=1))
def plan(ctx: TaskContext) -> str:
    files = ", ".join(ctx.input.files)
    return f"Goal: {ctx.input.goal}\nFiles in the change: {files}\nWrite a short review plan."


@workflow.fan_out(
    id="review",
    items=lambda ctx: ctx.input.files,
    item_key=lambda file: file.replace("/", "_"),
    depends_on=["plan"],
    output=FileReview,
    retries=2,
    backoff=Backoff(initial_s=0.05, factor=2, max_s=1),
    timeout_s=60,
)
def review(ctx: TaskContext) -> str:
    focus = "; ".join(ctx.output("plan").focus)
    return f"Review the file {ctx.item}. Focus on: {focus}. Report findings with a severity 0-3."


@workflow.task(id="report", depends_on=["review"], output=Report)
def report(ctx: TaskContext) -> str:
    lines = [
        f"- {r.file}: severity {r.severity}, {len(r.findings)} finding(s)"
        for r in ctx.output("review")
    ]
    return "Merge these file reviews into one report:\n" + "\n".join(lines)


refine = workflow.loop(
    "refine", until=lambda ctx: ctx.output("draft").done, max_iterations=4, depends_on=["report"]
)


@refine.task(id="draft", output=Draft)
def draft(ctx: TaskContext) -> str:
    previous = ctx.previous("draft")
    start = previous.text if previous else ctx.output("report").summary
    return (
        f"Round {ctx.iteration + 1}: tighten this review summary for the pull request; "
        f"set done when it needs no further edits.\n\n{start}"
    )
