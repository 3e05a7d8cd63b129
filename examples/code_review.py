"""Code review with memory: each run recalls what earlier reviews retained.

The ``review`` task recalls from the ``code-review`` bank (its own prompt is the query) and,
when it succeeds, retains a digest of its findings as an accepted note. Run it twice: the second
run's prompt starts with a memory block holding what the first run retained.

    tether run examples/code_review.py --input '{"change": "retry flaky pytest fixtures"}'
    tether run examples/code_review.py --input '{"change": "speed up pytest fixtures"}'
    tether node review --run <second run id>      # the memory block that review saw

Offline: the simulated agent answers (deterministic for a seed, a few seconds per run).
"""

from __future__ import annotations

from pydantic import BaseModel

from engine import MemoryConfig, TaskContext, Workflow


class Change(BaseModel):
    change: str
    repository: str = "tether"


class Review(BaseModel):
    summary: str
    findings: list[str]
    approve: bool


workflow = Workflow(
    "code-review",
    input_model=Change,
    agents={"reviewer": {"type": "simulated", "latency_ms": 20, "seed": 7}},
    default_agent="reviewer",
    description="Review a change, recalling lessons retained by earlier reviews.",
)


@workflow.task(
    id="review",
    output=Review,
    memory=MemoryConfig(bank="code-review", recall="auto", retain="on-complete"),
)
def review(ctx: TaskContext) -> str:
    """Review the change with whatever earlier reviews of this repository taught us."""
    return (
        f"Review the change '{ctx.input.change}' in the {ctx.input.repository} repository "
        "(pytest suite, fixtures, flaky tests). List concrete findings and decide whether to "
        "approve."
    )
