"""Artifacts of a run on a PostgreSQL workspace land in the database as the agent writes them,
so a dashboard on another host follows the log by offset (DatabaseLogTail)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_support import fresh_schema

from engine.artifact_files import RunArtifacts, stream_log_path
from engine.run.artifact_mirror import ArtifactMirror
from engine.run.wiring import open_engine
from engine.workflow.loader import load_workflow
from store.db.backends import open_database
from store.db.postgres.pg_database import PostgresDatabase
from store.errors import InvalidInputError
from store.runs.artifact_chunks import ArtifactChunks
from store.workspace.layout import Workspace
from tui.run_control import EXAMPLES_DIR
from tui.tailing import DatabaseLogTail

pytestmark = pytest.mark.postgresql


async def test_a_run_s_logs_are_in_the_database_and_followed_by_offset(tmp_path: Path) -> None:
    with fresh_schema("a") as url:
        workspace = Workspace(tmp_path / ".tether", database_url=url)
        async with await open_database(workspace) as db:
            assert isinstance(db, PostgresDatabase)
            engine = open_engine(db)
            workflow = load_workflow(EXAMPLES_DIR / "code_review.py")
            outcome = await engine.start(workflow, {"change": "retry flaky pytest fixtures"})
            assert outcome.status == "finished"
            chunks = ArtifactChunks(db)
            stored = await chunks.files(outcome.run_id)
            local = sorted(p for p in (workspace.artifacts_dir / outcome.run_id).rglob("*")
                           if p.is_file())
            assert [f.path for f in stored] == [
                p.relative_to(workspace.artifacts_dir).as_posix() for p in local
            ]
            for file, path in zip(stored, local, strict=True):
                assert await chunks.read(file.path) == path.read_bytes()
            # Follow a log that keeps growing, as a dashboard on another host does.
            log = stream_log_path(Path(""), "r-follow", "plan", 0, 1)
            folder = workspace.artifacts_dir / "r-follow"
            target = workspace.artifacts_dir / log
            target.parent.mkdir(parents=True)
            mirror = ArtifactMirror(chunks, workspace.artifacts_dir, folder)
            tail = DatabaseLogTail(chunks, log)
            target.write_text("first line\nsecond ha", encoding="utf-8")
            assert await mirror.sync() == 1
            assert await tail.read_new_lines_async() == ["first line"]
            with target.open("a", encoding="utf-8") as handle:
                handle.write("lf\nthird\n")
            await mirror.sync()
            assert await tail.read_new_lines_async() == ["second half", "third"]
            assert await mirror.sync() == 0  # nothing changed: nothing sent
            target.write_text("rewritten\n", encoding="utf-8")  # smaller: sent whole
            await mirror.sync()
            assert await chunks.read(log.as_posix()) == b"rewritten\n"


async def test_a_task_reads_an_artifact_another_host_wrote(tmp_path: Path) -> None:
    with fresh_schema("ah") as url:
        host_a = Workspace(tmp_path / "a" / ".tether", database_url=url)
        host_b = Workspace(tmp_path / "b" / ".tether", database_url=url)
        async with await open_database(host_a) as db:
            assert isinstance(db, PostgresDatabase)
            chunks = ArtifactChunks(db)
            written = RunArtifacts(host_a.artifacts_dir, "r-shared")
            written.write_text("plan.md", "step one\nstep two\n")
            written.write_bytes("empty.bin", b"")
            mirror = ArtifactMirror(chunks, host_a.artifacts_dir,
                                    host_a.artifacts_dir / "r-shared")
            assert await mirror.sync() == 2
            elsewhere = RunArtifacts(host_b.artifacts_dir, "r-shared", chunks.read_whole_now)
            assert elsewhere.read_text("plan.md") == "step one\nstep two\n"
            assert elsewhere.exists("empty.bin") and elsewhere.read_bytes("empty.bin") == b""
            assert not elsewhere.exists("missing.md")
            with pytest.raises(InvalidInputError, match="no artifact"):
                elsewhere.read_text("missing.md")
