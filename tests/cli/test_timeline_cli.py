"""``tether runs --timeline RUN`` and ``tether node NODE --run RUN --timeline`` as a person
runs them (real processes, after a real ``tether run``). They crashed with "no running event
loop": the short commands drive the store without one, and the timeline's build asked for a
worker thread of the loop."""

from __future__ import annotations

import json
from pathlib import Path

from memory_cli_support import tether

from tui.run_control import EXAMPLES_DIR

FAST = {"TETHER_SIM_LATENCY_MS": "1"}


def test_timelines_from_the_command_line(tmp_path: Path) -> None:
    workspace = str(tmp_path / "ws")
    ran = tether("run", str(EXAMPLES_DIR / "fanout_review.py"), "--workspace", workspace,
                 "--input", '{"files": ["api.py", "store.py"]}', "--format", "json", env=FAST)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]

    shown = tether("runs", "--timeline", run_id, "--workspace", workspace)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"Run {run_id} (fanout-review) finished")
    # The refinement loop waits for the report (its loop's dependency): on the critical path
    # after it, and waiting on dependencies (never queued) until the report ends.
    path = next(line for line in lines if line.startswith("Critical path: "))
    assert "report#0 → draft#0" in path, path
    def waiting_cells(key: str) -> int:
        line = next(line for line in lines if line.lstrip("* ").startswith(key))
        bar = line.split(key, 1)[1].strip()
        return len(bar) - len(bar.lstrip("·"))

    assert waiting_cells("draft#0") > waiting_cells("report#0") > 0

    as_json = tether("runs", "--timeline", run_id, "--workspace", workspace, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["critical_path"][-1].startswith("draft#")

    node = tether("node", "report", "--run", run_id, "--timeline", "--workspace", workspace)
    assert node.returncode == 0, node.stderr
    assert "report#0" in node.stdout


def test_a_one_node_run_reads_as_one_node_iteration(tmp_path: Path) -> None:
    # Seen on a new user's first `tether run`: "finished · 1 node iterations · 510ms".
    workspace = str(tmp_path / "ws")
    ran = tether("run", str(EXAMPLES_DIR / "code_review.py"), "--workspace", workspace,
                 "--input", '{"change": "fix the cache key"}', "--format", "json", env=FAST)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    node = tether("node", "review", "--run", run_id, "--timeline", "--workspace", workspace)
    assert node.returncode == 0, node.stderr
    assert " · 1 node iteration · " in node.stdout.splitlines()[0], node.stdout
