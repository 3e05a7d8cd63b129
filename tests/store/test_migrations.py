"""Opening, migrating and refusing workspace database files."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from store.db.backends import open_database
from store.db.sqlite.sqlite_connection import split_statements
from store.db.sqlite.sqlite_schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from store.errors import NotFoundError, WorkspaceError
from store.workspace.layout import Workspace


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_migration_splits_into_complete_statements() -> None:
    for script in MIGRATIONS:
        statements = split_statements(script)
        assert statements
        assert all(sqlite3.complete_statement(s) for s in statements)


async def test_new_workspace_records_version_and_identity(workspace: Workspace) -> None:
    db = await open_database(workspace)
    try:
        assert await db.fetch_value("PRAGMA user_version") == SCHEMA_VERSION
        assert await db.fetch_value("PRAGMA application_id") == APPLICATION_ID
        assert str(await db.fetch_value("PRAGMA journal_mode")).lower() == "wal"
        assert await db.fetch_value("PRAGMA foreign_keys") == 1
    finally:
        await db.close()


async def test_reopening_is_idempotent(workspace: Workspace) -> None:
    for _ in range(2):
        db = await open_database(workspace)
        await db.close()
    db = await open_database(workspace)
    try:
        assert await db.fetch_value("PRAGMA user_version") == SCHEMA_VERSION
    finally:
        await db.close()


async def test_missing_workspace_is_not_created_when_reading(workspace: Workspace) -> None:
    with pytest.raises(NotFoundError):
        await open_database(workspace, create=False)
    assert not workspace.root.exists()


async def test_newer_schema_is_refused_and_left_untouched(workspace: Workspace) -> None:
    db = await open_database(workspace)
    await db.close()
    conn = sqlite3.connect(workspace.database_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    before = _digest(workspace.database_path)
    with pytest.raises(WorkspaceError, match="newer Tether"):
        await open_database(workspace)
    assert _digest(workspace.database_path) == before


async def test_foreign_sqlite_file_is_refused_and_left_untouched(workspace: Workspace) -> None:
    workspace.root.mkdir(parents=True)
    conn = sqlite3.connect(workspace.database_path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.commit()
    conn.close()
    before = _digest(workspace.database_path)
    with pytest.raises(WorkspaceError, match="does not belong to Tether"):
        await open_database(workspace)
    assert _digest(workspace.database_path) == before


@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a database\n" * 100, b"SQLite format 3\x00" + b"\xff" * 4000],
    ids=["not-sqlite", "corrupt-header"],
)
async def test_unusable_file_is_refused_and_left_untouched(
    workspace: Workspace, content: bytes
) -> None:
    workspace.root.mkdir(parents=True)
    workspace.database_path.write_bytes(content)
    with pytest.raises(WorkspaceError, match="untouched"):
        await open_database(workspace)
    assert workspace.database_path.read_bytes() == content


async def test_calls_recorded_before_the_table_existed_are_back_filled(
    workspace: Workspace,
) -> None:
    from store.db.sqlite import sqlite_schema
    from store.db.sqlite.sqlite_database import SqliteDatabase
    from store.read.usage_reads import usage_over_time

    T0 = 1_767_225_600_000
    workspace.ensure()
    conn = sqlite3.connect(workspace.database_path)
    conn.execute("PRAGMA journal_mode = WAL")
    before = MIGRATIONS.index(sqlite_schema._MIGRATION_OBSERVE)
    for migration in MIGRATIONS[:before]:
        for statement in split_statements(migration):
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {before}")
    conn.execute(
        "INSERT INTO runs (run_id, workflow, status, created_at_ms, updated_at_ms) "
        "VALUES ('r-old', 'w', 'finished', 0, 0)"
    )
    conn.execute(
        "INSERT INTO calls (run_id, node_id, attempt, agent, model, input_tokens, "
        "context_tokens, bucket, started_at_ms, finished_at_ms, cost_usd) "
        f"VALUES ('r-old', 'n', 1, 'sim', 'm', 7, 7, '<50k', {T0 + 5}, {T0 + 6}, 0.25)"
    )
    conn.commit()
    conn.close()
    # The workspace opens and migrates the rest of the way; the calls already there count.
    db = await SqliteDatabase.open(workspace)
    try:
        rows = await usage_over_time(db, by="model", since_ms=T0, until_ms=T0 + 86_400_000)
        assert [(r.key, r.calls, r.tokens.input, r.cost.usd) for r in rows] == [
            ("m", 1, 7, 0.25)
        ]
    finally:
        await db.close()
