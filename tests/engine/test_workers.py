"""Workers on a PostgreSQL workspace, as a team runs them: two ``tether worker`` processes and
a dashboard (the real app, headless) in a third share one workspace; the worker running a run
is killed with ``kill -9`` mid-run and the other one finishes it. No finished node runs twice,
the killed worker's attempt is abandoned, and the new attempts carry the new fencing token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from pg_support import fresh_schema

from store.workspace.layout import DATABASE_URL_ENV_VAR

pytestmark = pytest.mark.postgresql

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = Path(__file__).with_name("worker_workflow.py")
FOLLOWER = Path(__file__).with_name("dashboard_follower.py")
DEADLINE_S = 90.0


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_workers_and_a_dashboard_a_killed_worker_is_replaced(tmp_path: Path) -> None:
    with fresh_schema("w") as url:
        log = tmp_path / "invocations.log"
        log.touch()
        (tmp_path / ".tether").mkdir(mode=0o700)
        gate = tmp_path / "gate"
        env = {**os.environ, DATABASE_URL_ENV_VAR: url, "WORKER_LOG": str(log),
               "PYTHONPATH": str(ROOT), "WORKER_GATE_NODE": "step2", "WORKER_GATE": str(gate),
               "WORKER_LATENCY_MS": "100"}

        def tether(*args: str) -> subprocess.Popen[str]:
            return subprocess.Popen(
                [sys.executable, "-m", "tui.cli.entry", *args], cwd=tmp_path, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )

        queued = tether("run", str(WORKFLOW), "--queue")
        out, err = queued.communicate(timeout=60)
        assert queued.returncode == 0, err
        run_id = out.strip()
        follower = subprocess.Popen(
            [sys.executable, str(FOLLOWER), run_id], cwd=tmp_path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert follower.stdout is not None and follower.stdout.readline().strip() == "ready"
        workers = [tether("worker", "--lease-seconds", "2", "--poll-seconds", "0.5",
                          "--workflows", str(WORKFLOW.parent))
                   for _ in range(2)]
        conn = psycopg.connect(url, autocommit=True)
        try:
            def row() -> tuple[object, ...]:
                found = conn.execute(
                    "SELECT status, owner_id, nodes_done, lease_token FROM runs "
                    "WHERE run_id = %s", (run_id,)).fetchone()
                assert found is not None
                return tuple(found)

            def gated_attempt() -> bool:
                return conn.execute(
                    "SELECT 1 FROM attempts WHERE run_id = %s AND node_id = 'step2' "
                    "AND state = 'running'", (run_id,)).fetchone() is not None

            def agent_waiting() -> bool:
                return any(line.split()[2] == "step2" for line in log.read_text().splitlines())

            # Kill in the middle of an attempt: its row says running and its agent has started
            # (it waits at the gate), two nodes finished.
            _wait_for(lambda: gated_attempt() and agent_waiting(), "step2's agent to be running")
            holder_pid = int(str(row()[1]).split(":")[1])
            holder = next(w for w in workers if w.pid == holder_pid)
            survivor = next(w for w in workers if w.pid != holder_pid)
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=30)
            gate.touch()
            finished_before = {
                r[0] for r in conn.execute(
                    "SELECT node_id FROM nodes WHERE run_id = %s AND state = 'finished'",
                    (run_id,)).fetchall()
            }
            _wait_for(lambda: row()[0] == "finished", "the other worker to finish the run")
            status, owner, done, token = row()
            assert str(owner).split(":")[1] == str(survivor.pid)
            assert done == 6 and token == 2
            attempts = conn.execute(
                "SELECT node_id, attempt, state, lease_token FROM attempts WHERE run_id = %s "
                "ORDER BY node_id, attempt", (run_id,)).fetchall()
        finally:
            conn.close()
        # Every node finished exactly once; nodes finished before the kill never ran again.
        finished = Counter(a[0] for a in attempts if a[2] == "finished")
        assert finished == {f"step{i}": 1 for i in range(6)}
        invoked = Counter(line.split()[2] for line in log.read_text().splitlines())
        assert finished_before == {"step0", "step1"}
        assert invoked == {"step0": 1, "step1": 1, "step2": 2, "step3": 1, "step4": 1, "step5": 1}
        for node, _attempt, state, lease in attempts:
            if state == "abandoned":
                assert (node, lease) == ("step2", 1)
            if node not in finished_before:
                assert lease == (2 if state == "finished" else 1)
        # The dashboard's tail, in its own process, saw both claims and the finish.
        seen, _ = follower.communicate(timeout=60)
        assert follower.returncode == 0
        lines = seen.splitlines()
        assert lines[-1].startswith("workers ") and "held" in lines[-1]
        types = [line.split()[1] for line in lines[:-1]]
        assert all(line.split()[3] == "live" for line in lines[:-1])
        assert types.count("run.claimed") == 2 and "attempt.abandoned" in types
        assert any(a[2] == "abandoned" for a in attempts)
        assert types[-1] == "run.status"
        survivor.send_signal(signal.SIGTERM)
        _, survivor_err = survivor.communicate(timeout=60)
        assert survivor.returncode == 0, survivor_err
        assert f"{run_id} finished" in survivor_err



def test_a_worker_rides_out_a_dropped_database_connection(tmp_path: Path) -> None:
    with fresh_schema("wr") as url:
        (tmp_path / ".tether").mkdir(mode=0o700)
        log = tmp_path / "invocations.log"
        env = {**os.environ, DATABASE_URL_ENV_VAR: url, "WORKER_LOG": str(log),
               "PYTHONPATH": str(ROOT), "WORKER_LATENCY_MS": "10"}
        worker = subprocess.Popen(
            [sys.executable, "-m", "tui.cli.entry", "worker", "--poll-seconds", "0.2",
             "--workflows", str(WORKFLOW.parent)],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                _wait_for(lambda: _has_worker(conn), "the worker to register")
                # Every pooled connection of the worker (and its listener) is cut at once.
                killed = conn.execute(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM "
                    "pg_stat_activity WHERE application_name LIKE 'tether%%' "
                    # Only this workspace's: other databases on the server are not ours.
                    "AND pid <> pg_backend_pid() AND usename = current_user "
                    "AND datname = current_database()) AS k").fetchone()
                assert killed is not None and killed[0] >= 1
                queued = subprocess.run(
                    [sys.executable, "-m", "tui.cli.entry", "run", str(WORKFLOW), "--queue"],
                    cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
                assert queued.returncode == 0, queued.stderr
                run_id = queued.stdout.strip()

                def finished() -> bool:
                    row = conn.execute(
                        "SELECT status FROM runs WHERE run_id = %s", (run_id,)).fetchone()
                    return row is not None and row[0] == "finished"

                _wait_for(finished, "the worker to run the queued run after the drop")
        finally:
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        assert f"{run_id} finished" in err


def _has_worker(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    tables = conn.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
        "AND table_name = 'workers'").fetchone()
    if tables is None:
        return False
    return conn.execute("SELECT 1 FROM workers WHERE stopped_at_ms IS NULL").fetchone() is not None
