"""Context handoff: a long loop that breaches its token ceiling and continues in fresh runs.

Each ``step`` makes one increment towards the goal. The simulated agent's context grows with
every loop iteration (as a real agent's would), so the run reaches its 60k-token ceiling after
two steps; ``on_exceeded="handoff"`` then stops dispatching, distils the run (goal, generation,
last summary, last ten learnings, plus this workflow's own ``steps_done`` counter) and starts a
fresh run of the same workflow that reads the distilled state as ``ctx.continuation``. With the
default eight increments the chain spans four generations (three handoffs).

    tether run examples/context_handoff.py --input '{"goal": "migrate the test suite"}'
    tether runs                       # the chain: handed-off runs and the final finished one

Offline with the simulated agent; a few seconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine import Ceiling, DistillInput, Workflow, default_distill

MAX_CONTEXT_TOKENS = 60_000


class Goal(BaseModel):
    goal: str
    increments: int = 8


class Step(BaseModel):
    summary: str
    learnings: list[str]
    done: bool


def distill(data: DistillInput) -> dict[str, Any]:
    """The default distillation plus how many increments are done across generations."""
    state = default_distill(data)
    before = int((data.previous or {}).get("steps_done", 0))
    state["steps_done"] = before + sum(1 for node in data.finished if node.node_id == "step")
    return state


def steps_done(ctx: Any) -> int:
    """Increments finished by earlier generations (0 on a cold start)."""
    return int((ctx.continuation or {}).get("steps_done", 0))


workflow = Workflow(
    "context-handoff",
    input_model=Goal,
    ceiling=Ceiling(MAX_CONTEXT_TOKENS, on_exceeded="handoff", distill=distill),
    agents={"worker": {"type": "simulated", "latency_ms": 5, "seed": 3}},
    default_agent="worker",
    description="A loop that hands off to a fresh run whenever its context budget is spent.",
)

work = workflow.loop(
    "work",
    until=lambda ctx: steps_done(ctx) + ctx.iteration + 1 >= ctx.input.increments,
    max_iterations=50,
)


@work.task(id="step", output=Step)
def step(ctx: Any) -> str:
    """One increment, with the distilled state of earlier generations in front of it."""
    carried = ctx.continuation or {}
    lines = [f"Goal: {ctx.input.goal}"]
    if carried:
        lines.append(
            f"Fresh context, generation {carried.get('generation')}. "
            f"Prior summary: {carried.get('last_summary') or '(none)'}"
        )
        learnings = carried.get("learnings") or []
        if learnings:
            lines.append("Known so far:\n" + "\n".join(f"- {item}" for item in learnings))
    done = steps_done(ctx) + ctx.iteration
    lines.append(
        f"Make increment {done + 1} of {ctx.input.increments}. Record what you learned; "
        "distil wrong paths to 'tried X, failed because Y'."
    )
    return "\n\n".join(lines)
