"""Torture on a PostgreSQL workspace whose connections are cut, many rounds.

The team setup: the real dashboard (driven by Pilot in ``dashboard_driver.py``, with its
embedded engine and its LISTEN connection), two ``tether worker`` processes draining the queue,
and in every round several CLI processes that set facts, add notes, list, queue runs and run a
workflow in their own engine, all at once. In every round, while those processes work, every
session of the workspace is cut with ``pg_terminate_backend`` (twice). A drop is far shorter
than a worker's lease and than the retry window, so after each round:

- every write a process acknowledged (exit 0, a printed id, a stored reply) is present;
- every process exited 0 (nothing failed because of a drop) and none printed a traceback;
- no run is ``failed``: the queued ones finish on the workers, the foreground ones in the CLI;
- the dashboard's status line shows no problem once its connections are back.

At the end: the workers stop cleanly (exit 0, no traceback, no ``Task exception was never
retrieved``), every run's token totals equal the sum of its call rows (no call lost or doubled)
and the counts are printed. ``TETHER_PG_TORTURE_ROUNDS`` sets the number of rounds (default 6).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import fresh_schema
from test_torture import NS, REPO_ROOT, Acknowledged, Dashboard, assert_acknowledged

from store.workspace.layout import DATABASE_URL_ENV_VAR

ROUNDS = int(os.environ.get("TETHER_PG_TORTURE_ROUNDS", "6"))
DEADLINE_S = 300.0
EXAMPLES = REPO_ROOT / "examples"
TRACEBACK_WORDS = ("Traceback", "Task exception", "LeaseLost", "psycopg.")
Conn = psycopg.Connection[tuple[Any, ...]]

pytestmark = [pytest.mark.slow, pytest.mark.postgresql, pytest.mark.timeout(1800)]


def environment(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env.update({"PYTHONPATH": str(REPO_ROOT), "TETHER_SIM_LATENCY_MS": "30",
                "TETHER_SIM_FAILURE_RATE": "0", DATABASE_URL_ENV_VAR: url})
    return env


def tether(workspace: Path, url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", *args], cwd=workspace, env=environment(url),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def cut_every_session(conn: Conn) -> int:
    """Terminate every Tether session of this workspace's database; how many were cut."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name LIKE 'tether%%' AND pid <> pg_backend_pid() "
        "AND usename = current_user AND datname = current_database()) AS k").fetchone()
    return int(row[0]) if row else 0


def check_acknowledged(conn: Conn, acked: Acknowledged) -> None:
    facts = dict(conn.execute("SELECT key, value_json FROM facts WHERE namespace = %s", (NS,))
                 .fetchall())
    notes = {row[0] for row in conn.execute("SELECT id FROM notes")}
    runs = dict(conn.execute("SELECT run_id, status FROM runs").fetchall())
    assert_acknowledged(acked, facts, notes, runs)
    failed = conn.execute("SELECT run_id, error FROM runs WHERE status = 'failed'").fetchall()
    assert failed == [], failed


def cli_round(workspace: Path, url: str, round_no: int, acked: Acknowledged, admin: Conn,
              queued: set[str]) -> int:
    """Several CLI processes at once while every session is cut twice; returns the cuts."""
    facts = {f"cli-{round_no}-{i}": {"round": round_no, "i": i} for i in range(3)}
    started: list[tuple[str, str, subprocess.Popen[str]]] = [
        ("fact", key, tether(workspace, url, "memory", "set", NS, key, json.dumps(value)))
        for key, value in facts.items()
    ]
    started += [
        ("note", "", tether(workspace, url, "notes", "add", "workflow:torture",
                            f"note of round {round_no}")),
        ("read", "", tether(workspace, url, "runs", "--format", "json")),
        ("read", "", tether(workspace, url, "memory", "list", NS)),
        ("queue", "", tether(workspace, url, "run", str(EXAMPLES / "fanout_review.py"),
                             "--queue", "--input",
                             json.dumps({"files": [f"q{round_no}.py", "c.py"]}))),
    ]
    if round_no % 2 == 0:
        started.append(("run", "", tether(
            workspace, url, "run", str(EXAMPLES / "fanout_review.py"), "--format", "json",
            "--input", json.dumps({"files": [f"r{round_no}.py", "b.py"]}))))
    cuts = cut_every_session(admin)
    first = True
    for kind, key, process in started:
        stdout, stderr = process.communicate(timeout=DEADLINE_S)
        if first:  # the rest are still at work: cut them again
            cuts += cut_every_session(admin)
            first = False
        assert process.returncode == 0, (kind, key, stderr)
        for word in TRACEBACK_WORDS:
            assert word not in stderr, (kind, stderr)
        if kind == "queue":
            queued.add(stdout.strip())
        else:
            acked.record(kind, key, stdout, facts)
    return cuts


def wait_until_finished(admin: Conn, run_ids: set[str]) -> None:
    """Poll (a database read) until every queued run finished; fail after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        rows = dict(admin.execute("SELECT run_id, status FROM runs WHERE run_id = ANY(%s)",
                                  (list(run_ids),)).fetchall())
        if all(rows.get(run_id) == "finished" for run_id in run_ids):
            return
        assert "failed" not in rows.values(), rows
        if time.monotonic() > deadline:
            raise AssertionError(f"queued runs did not finish: {rows}")
        time.sleep(0.2)


def settled(dashboard: Dashboard) -> None:
    """The dashboard's status line reports no problem once its connections are back."""
    deadline = time.monotonic() + DEADLINE_S
    while (status := dashboard.ask(op="status"))["problem"] is not None:
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


def test_team_workspace_rides_out_dropped_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "project"
    (workspace / ".tether").mkdir(parents=True, mode=0o700)
    with fresh_schema("tt") as url, psycopg.connect(url, autocommit=True) as admin:
        seed = tether(workspace, url, "memory", "set", NS, "seed", "0")
        assert seed.wait(timeout=120) == 0
        acked = Acknowledged(facts={"seed": 0})
        workers = [tether(workspace, url, "worker", "--concurrency", "2", "--lease-seconds",
                          "20", "--poll-seconds", "0.2", "--workflows", str(EXAMPLES))
                   for _ in range(2)]
        monkeypatch.setenv(DATABASE_URL_ENV_VAR, url)  # the dashboard driver's workspace
        dashboard = Dashboard(workspace / ".tether")
        queued: set[str] = set()
        cuts = 0
        try:
            for round_no in range(ROUNDS):
                acked.launched_runs.add(
                    dashboard.ask(op="launch", tag=f"pg torture {round_no}")["run_id"])
                value = {"edited": round_no}
                stored = dashboard.ask(op="set_fact", namespace=NS, key=f"dash-{round_no}",
                                       value_json=json.dumps(value))
                assert stored == {"stored": True}
                acked.facts[f"dash-{round_no}"] = value
                cuts += cli_round(workspace, url, round_no, acked, admin, queued)
                wait_until_finished(admin, queued)
                check_acknowledged(admin, acked)
                settled(dashboard)
            dashboard.quit()
        finally:
            dashboard.kill_if_running()
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            outputs = [worker.communicate(timeout=120) for worker in workers]
        assert [w.returncode for w in workers] == [0, 0], [err for _, err in outputs]
        for _, err in outputs:
            for word in TRACEBACK_WORDS:
                assert word not in err, err
        check_acknowledged(admin, acked)
        statuses = Counter(str(r[0]) for r in admin.execute("SELECT status FROM runs"))
        mismatched = admin.execute(
            "SELECT r.run_id FROM runs r WHERE r.status = 'finished' AND "
            "r.input_tokens + r.output_tokens <> (SELECT coalesce(sum(input_tokens + "
            "output_tokens), 0) FROM calls c WHERE c.run_id = r.run_id)").fetchall()
        assert mismatched == [], mismatched
        print(f"\npg torture: {ROUNDS} rounds, {cuts} sessions cut, runs {dict(statuses)}, "
              f"{len(acked.facts)} facts, {len(acked.notes)} notes acknowledged and present, "
              "0 failed, 0 tracebacks")
