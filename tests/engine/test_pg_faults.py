"""PostgreSQL faults during a multi-worker drain, with real ``tether worker`` processes:

* every session of the workspace is cut with ``pg_terminate_backend``, three times while runs
  are in flight;
* the role's privileges on every table are revoked, held until the workers have hit the
  refusal, then granted back.

Through both: every queued run finishes, no run fails, every node's agent runs exactly once,
each run's token totals equal the sum of its attempts and of its call rows (no call lost or
doubled), the workers keep claiming and exit cleanly, and no traceback (``Task exception was
never retrieved``, ``LeaseLost``) reaches their terminal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from pg_support import fresh_schema

from store.workspace.layout import DATABASE_URL_ENV_VAR

pytestmark = pytest.mark.postgresql

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = Path(__file__).with_name("worker_workflow.py")
RUNS = 6
DEADLINE_S = 180.0
Conn = psycopg.Connection[tuple[object, ...]]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (a database read) until it holds; fail after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def count(conn: Conn, sql: str, *params: object) -> int:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0] or 0)


def terminate_tether_sessions(conn: Conn) -> int:
    return count(conn, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM "
                       "pg_stat_activity WHERE application_name LIKE 'tether%%' "
                       "AND pid <> pg_backend_pid() AND usename = current_user "
                       "AND datname = current_database()) AS k")


@contextmanager
def draining(tmp_path: Path, url: str, workers: int = 2, lease_s: float = 20,
             errs: list[str] | None = None) -> Iterator[tuple[Conn, list[str]]]:
    """Queue RUNS runs, start ``workers`` workers; yields an admin connection and the run ids;
    afterwards stops the workers and checks what every fault test promises (with a lease
    shorter than the fault, a node in flight may run again: its attempt was abandoned)."""
    (tmp_path / ".tether").mkdir(mode=0o700, exist_ok=True)
    log = tmp_path / "invocations.log"
    log.touch()
    env = {**os.environ, DATABASE_URL_ENV_VAR: url, "WORKER_LOG": str(log),
           "PYTHONPATH": str(ROOT), "WORKER_LATENCY_MS": "150"}
    queued = [subprocess.run([sys.executable, "-m", "tui.cli.entry", "run", str(WORKFLOW),
                              "--queue"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=60) for _ in range(RUNS)]
    assert all(q.returncode == 0 for q in queued), [q.stderr for q in queued]
    run_ids = [q.stdout.strip() for q in queued]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", "worker", "--concurrency", "2",
         "--lease-seconds", str(lease_s), "--poll-seconds", "0.2",
         "--workflows", str(WORKFLOW.parent)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(workers)]
    conn = psycopg.connect(url, autocommit=True)
    errs = [] if errs is None else errs
    try:
        yield conn, run_ids
        wait_for(lambda: count(conn, "SELECT count(*) FROM runs WHERE status = 'finished'")
                 == RUNS, "every run to finish")
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            errs.append(err)
    try:
        assert [p.returncode for p in procs] == [0] * workers, errs
        for err in errs:
            for word in ("Traceback", "Task exception", "LeaseLost", "psycopg"):
                assert word not in err, err
        statuses = Counter(str(r[0]) for r in conn.execute("SELECT status FROM runs"))
        assert statuses == {"finished": RUNS}, statuses
        if lease_s < 20:
            return
        # Each node's agent ran exactly once: no drop made a finished node run again.
        invocations = Counter(tuple(line.split()[1:3]) for line in log.read_text().splitlines())
        assert len(invocations) == RUNS * 6 and set(invocations.values()) == {1}, invocations
        for (run_id,) in conn.execute("SELECT run_id FROM runs"):
            totals = conn.execute(
                "SELECT r.input_tokens + r.cache_read_tokens + r.output_tokens, "
                "(SELECT sum(input_tokens + cache_read_tokens + output_tokens) FROM attempts a "
                " WHERE a.run_id = r.run_id), "
                "(SELECT sum(input_tokens + cache_read_tokens + output_tokens) FROM calls c "
                " WHERE c.run_id = r.run_id), "
                "(SELECT count(*) FROM calls c WHERE c.run_id = r.run_id) "
                "FROM runs r WHERE r.run_id = %s", (run_id,)).fetchone()
            assert totals is not None
            assert totals[0] == totals[1] == totals[2] and totals[3] == 6, (run_id, totals)
    finally:
        conn.close()


def test_runs_ride_out_terminated_sessions(tmp_path: Path) -> None:
    with fresh_schema("ft") as url, draining(tmp_path, url) as (conn, _):
        for done in (1, RUNS * 2, RUNS * 4):
            wait_for(lambda n=done: count(conn, "SELECT count(*) FROM nodes WHERE "
                                                "state = 'finished'") >= n,
                     f"{done} finished nodes")
            assert terminate_tether_sessions(conn) >= 1


def test_runs_ride_out_a_privilege_revoke(tmp_path: Path) -> None:
    with fresh_schema("fr") as url, draining(tmp_path, url) as (conn, _):
        schema = url.split("search_path%3D")[-1]
        wait_for(lambda: count(conn, "SELECT count(*) FROM nodes WHERE state = 'finished'")
                 >= RUNS, "runs in flight")
        rolled_back = count(conn, "SELECT xact_rollback FROM pg_stat_database "
                                  "WHERE datname = current_database()")
        conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{schema}" FROM CURRENT_USER')
        try:
            # Held until the workers' writes have been refused a few times (each refusal rolls
            # a transaction back), so the revoke surely lands in the middle of the drain.
            wait_for(lambda: count(conn, "SELECT xact_rollback FROM pg_stat_database WHERE "
                                         "datname = current_database()") >= rolled_back + 10,
                     "the workers to meet the revoke")
        finally:
            conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO CURRENT_USER')


def test_an_outage_longer_than_the_lease_puts_runs_back_on_the_queue(tmp_path: Path) -> None:
    errs: list[str] = []
    with fresh_schema("fl") as url, draining(tmp_path, url, lease_s=3, errs=errs) as (conn, _):
        schema = url.split("search_path%3D")[-1]
        wait_for(lambda: count(conn, "SELECT count(*) FROM nodes WHERE state = 'finished'")
                 >= RUNS, "runs in flight")
        # Writes refused (reads still work, so this connection can watch the leases lapse).
        conn.execute(f'REVOKE INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" '
                     "FROM CURRENT_USER")
        try:
            wait_for(lambda: count(conn, "SELECT count(*) FROM runs WHERE status = 'running' "
                                         "AND lease_expires_at_ms < %s",
                                   int(time.time() * 1000) - 3000) >= 1,
                     "a lease to lapse during the outage")
        finally:
            conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO CURRENT_USER')
    # Every run finished and no traceback was printed (checked by draining); a run whose
    # lease lapsed was given back with a sentence naming the cause.
    said = "".join(errs)
    assert "interrupted (Interrupted because the workspace database refused this role; it goes "\
           "back to the queue.)" in said, said
