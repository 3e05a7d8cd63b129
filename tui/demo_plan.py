"""What the demo starts: which example workflows, with which input, when.

Pure data, shared by ``tether demo`` (:mod:`tui.demo`) and the launch dialog, which offers the
same inputs as starting points (:mod:`tui.run_control`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DemoStep:
    """One run the demo starts: which example, with what input, how many seconds in."""

    example: str
    input: Any = None
    start_after_s: float = 0.0


DEMO_PLAN: tuple[DemoStep, ...] = (
    DemoStep("fanout_review.py", {"files": ["api.py", "store.py", "cli.py", "auth.py"]}, 0.0),
    DemoStep("code_review.py", {"change": "retry flaky pytest fixtures"}, 2.0),
    DemoStep("incident_runbook.py", {"incident": "queue backlog after deploy"}, 5.0),
    DemoStep("context_handoff.py", {"goal": "migrate the test suite to pytest"}, 8.0),
    # Recalls what the first review retained: its prompt starts with a memory block.
    DemoStep("code_review.py", {"change": "speed up pytest fixtures"}, 22.0),
    # Same input as the first fan-out: its cached "plan" task is a cache hit.
    DemoStep("fanout_review.py", {"files": ["api.py", "store.py", "cli.py", "auth.py"]}, 32.0),
    DemoStep("incident_runbook.py", {"incident": "disk full on the ingest workers"}, 42.0),
)
