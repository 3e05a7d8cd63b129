"""Group commit keeps what a finished node means: ``kill -9`` of ``tether run`` right after
nodes finish (workspace at ``durability = "full"``) loses no completion the engine
acknowledged, and no node recorded finished ever runs again when the run is resumed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

WORKFLOW = Path(__file__).with_name("durability_workflow.py")
ROOT = Path(__file__).resolve().parents[2]
KILL_AFTER = (5, 60, 170, 330, 380)  # acknowledged completions before the kill, per trial
DEADLINE_S = 120


def _start(workspace: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tui.cli.entry",
            "run",
            str(WORKFLOW),
            *args,
            "--workspace",
            str(workspace),
        ],
        env={**os.environ, "CRASH_LOG": str(log)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )


def _acknowledged(line: bytes) -> str | None:
    """The node a progress line reports finished (printed only after its commit returned)."""
    parts = line.decode().split()
    if len(parts) >= 3 and parts[2] == "finished" and parts[1] != "run":
        return parts[1]
    return None


def _finished_nodes(workspace: Path, run_id: str) -> set[str]:
    with sqlite3.connect(workspace / "tether.db") as conn:
        rows = conn.execute(
            "SELECT node_id FROM nodes WHERE run_id = ? AND state = 'finished'", (run_id,)
        )
        return {row[0] for row in rows}


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", KILL_AFTER)
def test_kill_9_right_after_completions_loses_nothing_acknowledged(
    tmp_path: Path, kill_after: int
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "config.toml").write_text('[workspace]\ndurability = "full"\n')
    log = tmp_path / "invocations.log"
    process = _start(workspace, log)
    assert process.stderr is not None
    acknowledged: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(acknowledged) < kill_after and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        node = _acknowledged(line)
        if node is not None:
            acknowledged.append(node)
    process.send_signal(signal.SIGKILL)  # at once: more group commits are in flight
    process.wait()
    assert len(acknowledged) == kill_after, "the run ended before the kill"

    with sqlite3.connect(workspace / "tether.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone()
    recorded = _finished_nodes(workspace, run_id)
    assert set(acknowledged) <= recorded  # no acknowledged completion was lost
    invoked_before = len(log.read_text().splitlines())

    resumed = _start(workspace, log, "--resume", run_id)
    _, err = resumed.communicate(timeout=DEADLINE_S)
    assert resumed.returncode == 0, err.decode()

    invocations: dict[str, list[int]] = defaultdict(list)
    later: set[str] = set()
    for index, line in enumerate(log.read_text().splitlines()):
        _, node_id, _, attempt = line.split()
        invocations[node_id].append(int(attempt))
        if index >= invoked_before:
            later.add(node_id)
    assert not later & recorded  # no node recorded finished ran again
    with sqlite3.connect(workspace / "tether.db") as conn:
        assert conn.execute("SELECT status FROM runs").fetchone()[0] == "finished"
        nodes = conn.execute("SELECT node_id, state, attempts FROM nodes").fetchall()
        assert len(nodes) == 1 + 300 + 100 and {state for _, state, _ in nodes} == {"finished"}
        for node_id, _, attempts in nodes:
            # At most one invocation per recorded attempt, never an attempt number twice (the
            # attempt's start is committed before the agent runs), the last one finished it.
            calls = invocations[node_id]
            assert len(calls) == len(set(calls)) and set(calls) <= set(range(1, attempts + 1))
            assert max(calls) == attempts, node_id
