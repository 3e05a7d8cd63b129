"""``tether migrate --to``: a real SQLite workspace (runs with logs, facts, notes, threads)
moves into PostgreSQL with every row and artifact file, verified; the copy answers like the
original; a target with data, or a password on the command line, is refused and nothing
changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pg_support import fresh_schema

from engine.run.wiring import open_engine
from engine.workflow.loader import load_workflow
from store.clock import ManualClock
from store.db.backends import open_database
from store.db.postgres.pg_database import PostgresDatabase
from store.memory.memory_store import MemoryStore
from store.runs.artifact_chunks import ArtifactChunks
from store.runs.run_store import RunStore
from store.workspace.layout import DATABASE_URL_ENV_VAR, Workspace
from store.workspace.migrate_workspace import plan_copy
from tui.run_control import EXAMPLES_DIR

ROOT = Path(__file__).resolve().parents[2]


def tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != DATABASE_URL_ENV_VAR}
    return subprocess.run([sys.executable, "-m", "tui.cli.entry", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


async def _seed(workspace: Workspace) -> str:
    clock = ManualClock()
    async with await open_database(workspace, clock=clock) as db:
        memory = MemoryStore(db)
        await memory.set_fact("workflow:code-review", "answer", {"use": "pytest -x"})
        old = await memory.save_note("workflow:code-review", "Run ruff before pytest.")
        await memory.save_note("workflow:code-review", "Run ruff, mypy, then pytest.",
                               supersedes=[old.id], status="pending")
        thread = await memory.create_thread("workflow:chat", "triage")
        await memory.save_message(thread.thread_id, "user", "the queue is slow")
        engine = open_engine(db)
        workflow = load_workflow(EXAMPLES_DIR / "code_review.py")
        outcome = await engine.start(workflow, {"change": "retry flaky pytest fixtures"})
        assert outcome.status == "finished"
        return outcome.run_id


@pytest.mark.postgresql
async def test_migrate_copies_everything_and_the_copy_answers_the_same(tmp_path: Path) -> None:
    source = Workspace(tmp_path / ".tether")
    run_id = await _seed(source)
    logs = sorted(p for p in source.artifacts_dir.rglob("*") if p.is_file())
    assert logs  # the simulated agent streamed its logs
    with fresh_schema("m") as url:
        done = tether("migrate", "--to", url, "--workspace", str(source.root),
                      "--format", "json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["artifact_files"] == len(logs)
        async with await open_database(source, create=False) as lite:
            for table, rows in report["tables"].items():
                assert await lite.fetch_value(f'SELECT count(*) FROM "{table}"') == rows
            lite_runs = RunStore(lite)
            lite_nodes = await lite_runs.list_nodes(run_id)
            lite_hits = await MemoryStore(lite).search_notes("pytest ruff", status="any")
        target = Workspace(tmp_path / ".tether", database_url=url)
        async with await open_database(target, create=False) as pg:
            assert isinstance(pg, PostgresDatabase)
            memory = MemoryStore(pg)
            fact = await memory.get_fact("workflow:code-review", "answer")
            assert fact is not None and fact.value == {"use": "pytest -x"}
            hits = await memory.search_notes("pytest ruff", status="any")
            assert [(h.note.id, h.note.status) for h in hits] == [
                (h.note.id, h.note.status) for h in lite_hits
            ]
            assert await RunStore(pg).list_nodes(run_id) == lite_nodes
            chunks = ArtifactChunks(pg)
            for path in logs:
                name = path.relative_to(source.artifacts_dir).as_posix()
                assert await chunks.read(name) == path.read_bytes()
            # Ids continue after the copied ones.
            await RunStore(pg).append_event("after-migrate")
            assert await RunStore(pg).last_event_seq() == report["tables"]["events"] + 1
        again = tether("migrate", "--to", url, "--workspace", str(source.root), cwd=tmp_path)
        assert again.returncode == 2 and "already holds Tether data" in again.stderr
    with fresh_schema("m") as url:  # as text: one line per table, counted in words
        shown = tether("migrate", "--to", url, "--workspace", str(source.root), cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        lines = {line.split()[0]: line.split(None, 1)[1] for line in shown.stdout.splitlines()
                 if line and not line.startswith("Copied")}
        assert lines["threads"] == "1 row" and lines["messages"] == "1 row"
        assert lines["events"] == f"{report['tables']['events']:,} rows"
        assert lines["artifacts"].startswith(f"{len(logs)} file{'' if len(logs) == 1 else 's'} (")


def test_a_password_on_the_command_line_is_refused(tmp_path: Path) -> None:
    done = tether("migrate", "--to", "postgresql://u:s3cret@127.0.0.1/db",
                  "--workspace", str(tmp_path / ".tether"), cwd=tmp_path)
    assert done.returncode == 2
    assert "s3cret" not in done.stderr and "PGPASSWORD" in done.stderr


def test_a_column_without_a_place_is_refused_before_copying() -> None:
    target = {"facts": {"namespace", "key"}}
    with pytest.raises(Exception, match="facts.extra has no place"):
        plan_copy({"facts": ["namespace", "key", "extra"]}, target)
    assert plan_copy({"facts": ["namespace", "key"]}, target) == [("facts", ["namespace", "key"])]
