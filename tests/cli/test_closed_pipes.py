"""Output nobody reads is dropped, never fatal: ``tether run ... | head`` (progress on a closed
pipe) still runs every node to the end and exits with the run's own status, and ``tether runs
| head`` (hot path), ``tether node | head`` and ``tether memory list | head`` (click) end
quietly with no traceback. Real processes, real pipes closed by the reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GATED = textwrap.dedent('''
    import asyncio, os
    from dataclasses import dataclass
    from engine import SimulatedAgent, Workflow

    @dataclass
    class Gated(SimulatedAgent):
        async def run(self, request):
            while not os.path.exists(os.environ["GATE"]):
                await asyncio.sleep(0.01)
            return await super().run(request)

    workflow = Workflow("gated", agents={"sim": Gated(latency_ms=1)}, default_agent="sim")
    workflow.add_task("first", "Do one thing.")
    workflow.add_task("second", "Do another.", depends_on=["first"])
''')


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "GATE": str(tmp_path / "gate"),
            "TETHER_SIM_LATENCY_MS": "1"}


def _tether(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(tmp_path / "ws")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path), cwd=tmp_path,
    )


def _runs(tmp_path: Path) -> list[dict]:
    listed = subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", "runs", "--format", "json", "--workspace",
         str(tmp_path / "ws")], capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["items"]


def test_a_run_whose_progress_pipe_closes_still_finishes(tmp_path: Path) -> None:
    workflow = tmp_path / "gated.py"
    workflow.write_text(GATED)
    process = _tether(tmp_path, "run", str(workflow))
    assert process.stdout is not None and process.stderr is not None
    first = process.stderr.readline()
    assert b"running" in first
    # The reader goes away (| head -1): every later progress line, the summary and the
    # output hit a closed pipe.
    process.stderr.close()
    process.stdout.close()
    (tmp_path / "gate").touch()
    assert process.wait(timeout=120) == 0
    [run] = _runs(tmp_path)
    assert run["status"] == "finished" and run["nodes_done"] == run["nodes_total"] == 2


def test_listings_into_a_closed_pipe_end_quietly(tmp_path: Path) -> None:
    (tmp_path / "gate").touch()
    workflow = tmp_path / "gated.py"
    workflow.write_text(GATED)
    done = _tether(tmp_path, "run", str(workflow))
    done.communicate(timeout=120)
    assert done.returncode == 0
    run_id = _runs(tmp_path)[0]["run_id"]
    for args in (("runs",), ("runs", "--format", "jsonl"), ("node", "first", "--run", run_id),
                 ("memory", "list")):
        process = _tether(tmp_path, *args)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # closed before the command writes a byte
        err = process.stderr.read().decode()
        assert process.wait(timeout=60) == 0, (args, err)
        assert "Traceback" not in err and "BrokenPipe" not in err and "Exception" not in err
