"""Three tasks on two agents from config.toml (an OpenAI-compatible server): a priced model on
two of them, a model with no price on the third, so cost and unpriced calls both show."""

from __future__ import annotations

from engine import Workflow

workflow = Workflow("priced", default_agent="priced")
workflow.add_task("plan", "Plan a small change.")
workflow.add_task("check", "Check the plan.", depends_on=["plan"])
workflow.add_task("note", "Write a note.", depends_on=["plan"], agent="unpriced")
