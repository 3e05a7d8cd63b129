"""A worker runs only the workflow files it was told to trust (``--workflows DIR``): a queued
run whose recorded file lies elsewhere is failed with a sentence saying so, and that file is
never imported (it would leave a marker if it were). Real ``tether run --queue`` and
``tether worker`` processes on one SQLite workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FLOW = textwrap.dedent('''
    import os
    from pathlib import Path
    from engine import Workflow
    marker = os.environ.get("IMPORT_MARKER")
    if marker:
        Path(marker, Path(__file__).parent.name).touch()
    workflow = Workflow("chosen", agents={"sim": {"type": "simulated", "latency_ms": 1}},
                        default_agent="sim")
    workflow.add_task("only", "Do the one thing.")
''')


def _tether(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(tmp_path / "ws")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def test_a_worker_refuses_workflow_files_outside_its_folders(tmp_path: Path) -> None:
    trusted, elsewhere, markers = tmp_path / "trusted", tmp_path / "elsewhere", tmp_path / "m"
    for folder in (trusted, elsewhere, markers):
        folder.mkdir()
    for folder in (trusted, elsewhere):
        (folder / "flow.py").write_text(FLOW)
    queued = {}
    for folder in (trusted, elsewhere):
        done = _tether(tmp_path, "run", str(folder / "flow.py"), "--queue", env={})
        assert done.returncode == 0, done.stderr
        queued[folder.name] = done.stdout.strip()
    worker = _tether(tmp_path, "worker", "--exit-when-idle", "--poll-seconds", "0.1",
                     "--workflows", str(trusted), env={"IMPORT_MARKER": str(markers)})
    assert worker.returncode == 0, worker.stderr
    assert "Traceback" not in worker.stderr
    listed = _tether(tmp_path, "runs", "--format", "json", env={})
    runs = {run["run_id"]: run for run in json.loads(listed.stdout)["items"]}
    assert runs[queued["trusted"]]["status"] == "finished"
    refused = runs[queued["elsewhere"]]
    assert refused["status"] == "failed"
    assert "runs only workflow files under the folders it trusts" in refused["error"]
    assert str(elsewhere / "flow.py") in refused["error"]
    assert sorted(p.name for p in markers.iterdir()) == ["trusted"]  # never imported
