"""The workflow the fork tests fork: plan -> sections (a fan-out) -> draft -> review, and a
side task nothing depends on, all on the counting agent (fork_agent.py, a real subprocess)."""

import sys
from pathlib import Path

from pydantic import BaseModel

from engine import Workflow
from engine.agents.cli.command import CommandAgent


class Goal(BaseModel):
    goal: str
    parts: list[str] = ["intro", "body"]


AGENT = CommandAgent(command=[sys.executable, str(Path(__file__).with_name("fork_agent.py"))],
                     preset="json", pass_env=["COUNT_FILE"])
workflow = Workflow("fork-demo", agents={"counting": AGENT}, default_agent="counting",
                    input_model=Goal)
workflow.add_task("plan", lambda ctx: f"Plan the report on {ctx.input.goal}")
workflow.add_task("sections", lambda ctx: f"Write the {ctx.item} section",
                  items=lambda ctx: ctx.input.parts, depends_on=["plan"])
workflow.add_task("draft", lambda ctx: f"Draft from {len(ctx.output('sections'))} sections",
                  depends_on=["sections"])
workflow.add_task("review", lambda ctx: f"Review: {ctx.output('draft')}", depends_on=["draft"])
workflow.add_task("side", lambda ctx: "Check the references")
