"""Crash safety: kill -9 a ``tether run`` process at random moments, resume, and check that
every run finishes, every finished node ran exactly once, and the database is intact."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from engine_test_support import process_gone

WORKFLOW = Path(__file__).with_name("crash_workflow.py")
TRIALS = 20


def _tether(workspace: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CRASH_LOG": str(log), "TETHER_SIM_LATENCY_MS": "25"}
    return subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_kill_9_at_random_moments_then_resume(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    workspace = tmp_path / "ws"
    log = tmp_path / "invocations.log"
    # One undisturbed run measures how long a run takes here (start-up included), so the kills
    # land across the whole run on fast and slow machines alike.
    started = time.monotonic()
    first = _tether(workspace, log, "run", str(WORKFLOW))
    assert first.wait(timeout=60) == 0
    span = time.monotonic() - started
    killed_mid_run = 0
    for _ in range(TRIALS):
        before = _run_ids(workspace)
        process = _tether(workspace, log, "run", str(WORKFLOW))
        time.sleep(rng.uniform(0.2, 0.95) * span)
        if process.poll() is None:
            killed_mid_run += 1
        process.send_signal(signal.SIGKILL)
        process.wait()
        new = sorted(_run_ids(workspace) - before)
        for run_id in new:
            if _status(workspace, run_id) == "finished":
                continue
            resumed = _tether(workspace, log, "run", str(WORKFLOW), "--resume", run_id)
            _, err = resumed.communicate(timeout=60)
            assert resumed.returncode == 0, err.decode()
    assert killed_mid_run >= TRIALS // 4  # many kills really interrupted a run
    _check_exactly_once(workspace, log)


def _db(workspace: Path) -> sqlite3.Connection:
    return sqlite3.connect(workspace / "tether.db")


def _run_ids(workspace: Path) -> set[str]:
    if not (workspace / "tether.db").exists():
        return set()
    with _db(workspace) as conn:
        return {r[0] for r in conn.execute("SELECT run_id FROM runs")}


def _status(workspace: Path, run_id: str) -> str:
    with _db(workspace) as conn:
        return str(
            conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
        )


def _check_exactly_once(workspace: Path, log: Path) -> None:
    invoked: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for line in log.read_text().splitlines():
        run_id, node_id, iteration, attempt = line.split()
        invoked[(run_id, node_id, int(iteration))].append(int(attempt))
    with _db(workspace) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        statuses = [r[0] for r in conn.execute("SELECT status FROM runs")]
        assert statuses and set(statuses) == {"finished"}
        nodes = conn.execute("SELECT run_id, node_id, iteration, state FROM nodes").fetchall()
        assert nodes and {n[3] for n in nodes} == {"finished"}
        for run_id, node_id, iteration, _ in nodes:
            attempts = conn.execute(
                "SELECT attempt, state FROM attempts WHERE run_id = ? AND node_id = ? "
                "AND iteration = ?",
                (run_id, node_id, iteration),
            ).fetchall()
            finished = [a for a, s in attempts if s == "finished"]
            assert len(finished) == 1, (run_id, node_id, iteration, attempts)
            calls = invoked[(run_id, node_id, iteration)]
            # The agent ran at most once per recorded attempt, and never after the node
            # finished: a finished node is never executed again.
            assert len(calls) <= len(attempts), (node_id, calls, attempts)
            assert max(calls) == finished[0], (node_id, calls, attempts)
            assert len(calls) == len(set(calls))
        abandoned = conn.execute(
            "SELECT count(*) FROM attempts WHERE state = 'abandoned'"
        ).fetchone()[0]
        assert abandoned > 0  # some kills landed while an agent was running
        output = conn.execute("SELECT output_json FROM runs LIMIT 1").fetchone()[0]
        assert "polish" in json.loads(output)


LINGERING_AGENT = """
import json, os, signal, sys
sys.stdin.read()
daemon = os.environ["TETHER_ATTEMPT"] == "1" and bool(os.environ.get("AGENT_ESCAPES"))
if daemon and os.fork() == 0:
    os.setsid()  # a daemon it started, out of its process group: only the reaper finds it
else:
    daemon = False
with open(os.environ["AGENT_LOG"], "a") as log:
    log.write(f"{os.environ['TETHER_ATTEMPT']} {os.getpid()} {'daemon' if daemon else ''}\\n")
if os.environ["TETHER_ATTEMPT"] == "1":
    signal.pause()  # works on and on, as a coding agent does, until something stops it
print(json.dumps({"output": "done", "usage": {"input_tokens": 10, "output_tokens": 2}}))
"""


def _start_lingering_agent(
    tmp_path: Path, escapes: bool
) -> tuple[Path, Path, subprocess.Popen[bytes], Path]:
    """A real `tether run` of one task whose command agent works until stopped: the
    workspace, the workflow, the engine's process and the log where each agent process writes
    its attempt and pid (two lines for attempt 1 when ``escapes``)."""
    workspace, agent_log = tmp_path / "ws", tmp_path / "agents.log"
    workspace.mkdir()
    script = tmp_path / "agent.py"
    script.write_text(LINGERING_AGENT)
    escape = ", AGENT_ESCAPES = \"1\"" if escapes else ""
    (workspace / "config.toml").write_text(
        "[agents.worker]\ntype = \"command\"\npreset = \"json\"\n"
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(script))}]\n"
        f"env = {{ AGENT_LOG = {json.dumps(str(agent_log))}{escape} }}\n")
    workflow = tmp_path / "work.py"
    workflow.write_text("from engine import Workflow\n\nworkflow = Workflow('work', "
                        "default_agent='worker')\nworkflow.add_task('t', 'Do the work.')\n")
    engine = _tether(workspace, tmp_path / "unused.log", "run", str(workflow))
    deadline = time.monotonic() + 60
    while len(_agent_pids(agent_log)) < (2 if escapes else 1):
        assert engine.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    return workspace, workflow, engine, agent_log


def _agent_pids(agent_log: Path) -> list[int]:
    text = agent_log.read_text() if agent_log.exists() else ""
    return [int(line.split()[1]) for line in text.splitlines(keepends=True)
            if line.endswith("\n")]


def test_a_killed_engine_takes_its_agent_with_it(tmp_path: Path) -> None:
    """kill -9 of `tether run` left its agent CLI working, and spending, on (it runs in its
    own session, so nothing stopped it) until it next printed into the closed pipe or a resume
    on the same host reaped it. The engine's watchdog now kills the agent's process group the
    moment the engine dies, with no resume."""
    _, _, engine, agent_log = _start_lingering_agent(tmp_path, escapes=False)
    (agent,) = _agent_pids(agent_log)
    try:
        engine.send_signal(signal.SIGKILL)
        engine.wait()
        deadline = time.monotonic() + 10
        while not process_gone(agent):
            assert time.monotonic() < deadline, "the agent outlived its engine"
            time.sleep(0.02)
    finally:
        if not process_gone(agent):
            os.kill(agent, signal.SIGKILL)


def test_a_resumed_run_stops_the_agent_its_killed_engine_left(tmp_path: Path) -> None:
    """kill -9 of `tether run` left its command agent running, and `tether run --resume`
    started a second agent beside it: two agents spending on, and editing, the same work. The
    engine's watchdog stops the agent's group, but a process the agent moved out of it (a
    daemon) is left; the resumed run stops the processes that name the run in their
    environment before it dispatches anything."""
    workspace, workflow, engine, agent_log = _start_lingering_agent(tmp_path, escapes=True)
    escaped = 0
    try:
        escaped = [int(line.split()[1]) for line in agent_log.read_text().splitlines()
                   if line.endswith("daemon")][0]
        engine.send_signal(signal.SIGKILL)
        engine.wait()
        assert not process_gone(escaped)  # the engine is dead; the agent's daemon is not
        (run_id,) = _run_ids(workspace)
        resumed = _tether(workspace, tmp_path / "unused.log", "run", str(workflow),
                          "--resume", run_id)
        _, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err.decode()
        assert process_gone(escaped), "the first agent's daemon still runs beside the resumed one"
        assert "left running" in err.decode()
        assert [line.split()[0] for line in agent_log.read_text().splitlines()] == ["1", "1", "2"]
        with _db(workspace) as conn:
            (payload,) = conn.execute(
                "SELECT payload_json FROM events WHERE type = 'executor.reaped'").fetchone()
        assert escaped in json.loads(payload)["pids"]
    finally:
        if engine.poll() is None:
            engine.kill()
        if escaped and not process_gone(escaped):
            os.kill(escaped, signal.SIGKILL)
