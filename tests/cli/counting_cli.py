"""``tether`` in a subprocess on a workspace whose workflow runs the counting agent
(tests/engine/fork_agent.py, which appends every invocation to ``$COUNT_FILE``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "tests" / "engine" / "fork_workflow.py"


def tether(workspace: Path, count: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``tether ARGS --workspace WORKSPACE`` with the counting agent's file set."""
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
        env={**os.environ, "COUNT_FILE": str(count)},
    )
