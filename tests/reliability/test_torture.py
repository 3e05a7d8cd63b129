"""Torture: the real dashboard open while other ``tether`` processes read and write, many rounds.

The product's main use case. A dashboard process (the real app, driven through its keys by
Pilot in ``dashboard_driver.py``, with its file watcher, read-only tailing connection and
embedded engine) launches runs and edits facts while, in every round, several CLI processes set
facts, add notes, list, and run a workflow in their own engine, all at once. After each round:

- ``PRAGMA integrity_check`` is ok;
- every write a process acknowledged (exit 0, a printed id, a stored reply) is present;
- no ``tether.db``, ``-wal`` or ``-shm`` descriptor of the dashboard process points to a deleted
  file, and the WAL exists while the dashboard holds its connections (closing any descriptor of
  the database outside SQLite drops the process's locks, and the next CLI process to exit then
  deletes the WAL under the dashboard);
- the event number the dashboard's status line shows reaches the newest committed event.

Then everything quits and the checks run once more. ``TETHER_TORTURE_ROUNDS`` sets the number of
rounds (default 12).
"""

from __future__ import annotations

import json
import os
import select
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("dashboard_driver.py")
EXAMPLES = REPO_ROOT / "examples"
ROUNDS = int(os.environ.get("TETHER_TORTURE_ROUNDS", "12"))
REPLY_DEADLINE_S = 180.0
NS = "user:torture"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["TETHER_SIM_LATENCY_MS"] = "30"
    env["TETHER_SIM_FAILURE_RATE"] = "0"
    return env


def tether_process(workspace: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
        cwd=REPO_ROOT, env=environment(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


class Dashboard:
    """The dashboard driver process and its line protocol."""

    def __init__(self, workspace: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), str(workspace)],
            cwd=REPO_ROOT, env=environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        ready = self.read()
        assert ready.get("ready"), ready
        self.pid = int(ready["pid"])

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + REPLY_DEADLINE_S
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if readable:
                line = self.process.stdout.readline()
                if not line:
                    break
                return dict(json.loads(line))
            if self.process.poll() is not None:
                break
        self.process.kill()
        _, stderr = self.process.communicate(timeout=30)
        raise AssertionError(f"the dashboard stopped answering:\n{stderr[-4000:]}")

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.read()

    def quit(self) -> None:
        """Quit the dashboard through its protocol and check that it exited cleanly."""
        assert self.ask(op="quit")["return_code"] == 0
        assert self.process.wait(timeout=120) == 0

    def kill_if_running(self) -> None:
        """Kill the dashboard if a failed check left it running."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)

    def deleted_database_files(self) -> list[str]:
        """The dashboard's descriptors of tether.db* whose file was deleted under it."""
        found = []
        fd_dir = Path(f"/proc/{self.pid}/fd")
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if "tether.db" in target and target.endswith("(deleted)"):
                found.append(target)
        return found


@dataclass
class Acknowledged:
    """Every write some process reported as done."""

    facts: dict[str, Any] = field(default_factory=dict)
    notes: set[str] = field(default_factory=set)
    finished_runs: set[str] = field(default_factory=set)
    launched_runs: set[str] = field(default_factory=set)

    def record(self, kind: str, key: str, stdout: str, facts: dict[str, Any]) -> None:
        """What a CLI process that exited 0 acknowledged: a fact (``key`` of ``facts``), a
        note (the printed id) or a finished run (``--format json``)."""
        if kind == "fact":
            self.facts[key] = facts[key]
        elif kind == "note":
            self.notes.add(stdout.strip())
        elif kind == "run":
            self.finished_runs.add(json.loads(stdout)["run_id"])


def read_only(db: Path) -> sqlite3.Connection:
    # A reader in this process: it holds no other connection to the file, and SQLite is the
    # only thing that ever touches it here.
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)


def assert_acknowledged(acked: Acknowledged, facts: dict[str, str], notes: set[str],
                        runs: dict[str, str]) -> None:
    """Every acknowledged write is among the stored facts (key: value JSON), note ids and runs
    (id: status)."""
    for key, value in acked.facts.items():
        assert key in facts, f"acknowledged fact {key} is missing"
        assert json.loads(facts[key]) == value, key
    assert acked.notes <= notes, acked.notes - notes
    for run_id in acked.finished_runs:
        assert runs.get(run_id) == "finished", (run_id, runs.get(run_id))
    assert acked.launched_runs <= set(runs), acked.launched_runs - set(runs)


def check_workspace(db: Path, acked: Acknowledged) -> int:
    """Integrity and every acknowledged write; returns the newest event sequence number."""
    conn = read_only(db)
    try:
        verdict = conn.execute("PRAGMA integrity_check").fetchall()
        assert verdict == [("ok",)], verdict
        facts = dict(conn.execute(
            "SELECT key, value_json FROM facts WHERE namespace = ?", (NS,)).fetchall())
        notes = {row[0] for row in conn.execute("SELECT id FROM notes")}
        runs = dict(conn.execute("SELECT run_id, status FROM runs").fetchall())
        assert_acknowledged(acked, facts, notes, runs)
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
    finally:
        conn.close()


def cli_round(workspace: Path, round_no: int, acked: Acknowledged) -> None:
    """Several CLI processes at once: writers, readers and a foreground engine run."""
    facts = {f"cli-{round_no}-{i}": {"round": round_no, "i": i} for i in range(3)}
    started: list[tuple[str, str, subprocess.Popen[str]]] = []
    for key, value in facts.items():
        started.append(("fact", key, tether_process(
            workspace, "memory", "set", NS, key, json.dumps(value))))
    started.append(("note", "", tether_process(
        workspace, "notes", "add", "workflow:torture", f"note of round {round_no}")))
    started.append(("read", "", tether_process(workspace, "runs", "--format", "json")))
    started.append(("read", "", tether_process(workspace, "memory", "list", NS)))
    if round_no % 2 == 0:
        started.append(("run", "", tether_process(
            workspace, "run", str(EXAMPLES / "fanout_review.py"), "--format", "json",
            "--input", json.dumps({"files": [f"r{round_no}.py", "b.py"]}))))
    for kind, key, process in started:
        stdout, stderr = process.communicate(timeout=REPLY_DEADLINE_S)
        assert process.returncode == 0, (kind, key, stderr)
        assert "locked" not in stderr.lower(), stderr
        acked.record(kind, key, stdout, facts)


def wait_for_event(dashboard: Dashboard, newest: int) -> dict[str, Any]:
    deadline = time.monotonic() + REPLY_DEADLINE_S
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = dashboard.ask(op="status")
        if (status.get("event") or 0) >= newest:
            return status
        time.sleep(0.2)
    raise AssertionError(f"the dashboard shows event #{status.get('event')}, not #{newest}: "
                         f"{status}")


def test_dashboard_beside_cli_processes_keeps_the_workspace_intact(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    db = workspace / "tether.db"
    first = tether_process(workspace, "memory", "set", NS, "seed", "0")
    assert first.wait(timeout=120) == 0
    acked = Acknowledged(facts={"seed": 0})
    dashboard = Dashboard(workspace)
    try:
        for round_no in range(ROUNDS):
            launched = dashboard.ask(op="launch", tag=f"torture round {round_no}")
            acked.launched_runs.add(launched["run_id"])
            value = {"edited": round_no}
            stored = dashboard.ask(op="set_fact", namespace=NS, key=f"dash-{round_no}",
                                   value_json=json.dumps(value))
            assert stored == {"stored": True}
            acked.facts[f"dash-{round_no}"] = value
            cli_round(workspace, round_no, acked)
            assert dashboard.deleted_database_files() == [], f"round {round_no}"
            assert db.with_name("tether.db-wal").exists(), f"round {round_no}: WAL gone"
            newest = check_workspace(db, acked)
            status = wait_for_event(dashboard, newest)
            assert status["problem"] is None, status
        dashboard.quit()
    finally:
        dashboard.kill_if_running()
    check_workspace(db, acked)
