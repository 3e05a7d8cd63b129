"""Riding out dropped PostgreSQL connections (store/db/postgres/pg_retry.py), on a real server:
reads and writes after every session was terminated, a transaction's fate looked up by its
id, a refusal that outlasts the window as one sentence; and the classification, pure."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import fresh_schema
from psycopg import errors as pg_errors

from store.db.backends import open_database
from store.db.postgres.pg_retry import is_transient, outage_sentence
from store.errors import DatabaseUnavailable
from store.memory.memory_store import MemoryStore
from store.workspace.layout import Workspace

pytestmark = pytest.mark.postgresql


def test_which_failures_are_waited_out() -> None:
    assert is_transient(psycopg.OperationalError("server closed the connection"),
                        role_can_write=False)
    assert is_transient(pg_errors.AdminShutdown(), role_can_write=False)
    assert is_transient(pg_errors.InsufficientPrivilege(), role_can_write=True)
    assert not is_transient(pg_errors.InsufficientPrivilege(), role_can_write=False)
    assert not is_transient(pg_errors.UniqueViolation(), role_can_write=True)
    sentence = outage_sentence(psycopg.OperationalError("gone\n  away"),
                               "postgresql://u:pw-secret@h/db", 31.2)
    assert sentence == ("Cannot reach the workspace database postgresql://u:***@h/db: gone away "
                        "(retried for 31 s).")


@pytest.fixture
async def workspace(tmp_path: Path) -> AsyncIterator[tuple[Any, str]]:
    with fresh_schema("rt") as url:
        async with await open_database(Workspace(tmp_path / ".tether", url)) as db:
            yield db, url


def _terminate(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                     "application_name = 'tether' AND pid <> pg_backend_pid() "
                     "AND usename = current_user AND datname = current_database()")


async def test_reads_and_writes_after_every_session_was_cut(
    workspace: tuple[Any, str],
) -> None:
    db, url = workspace
    memory = MemoryStore(db)
    await memory.set_fact("workflow:x", "k", 1)
    _terminate(url)
    assert (await memory.get_fact("workflow:x", "k")).value == 1  # type: ignore[union-attr]
    _terminate(url)
    await memory.set_fact("workflow:x", "k", 2)
    _terminate(url)
    note = await memory.save_note("workflow:x", "after the drops")
    assert [n.id for n in await memory.list_notes("workflow:x")] == [note.id]
    assert (await memory.get_fact("workflow:x", "k")).value == 2  # type: ignore[union-attr]


async def test_a_cut_commit_is_resolved_by_its_transaction_id(workspace: tuple[Any, str]) -> None:
    db, url = workspace
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE scratch (a int)")
            committed = conn.execute("SELECT pg_current_xact_id()::text").fetchone()
        conn.execute("BEGIN")
        conn.execute("INSERT INTO scratch VALUES (1)")
        aborted = conn.execute("SELECT pg_current_xact_id()::text").fetchone()
        conn.execute("ROLLBACK")
    assert committed is not None and aborted is not None
    deadline = time.monotonic() + 10
    assert db._committed(committed[0], deadline) is True
    assert db._committed(aborted[0], deadline) is False


async def test_a_refusal_that_outlasts_the_window_is_one_sentence(
    workspace: tuple[Any, str],
) -> None:
    db, url = workspace
    db.retry_window_s = 0.3
    schema = url.split("search_path%3D")[-1]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{schema}" FROM CURRENT_USER')
        try:
            with pytest.raises(DatabaseUnavailable, match="refused this role .permission denied"):
                await MemoryStore(db).set_fact("workflow:x", "k", 1)
        finally:
            conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO CURRENT_USER')
    await MemoryStore(db).set_fact("workflow:x", "k", 1)  # works again at once


async def test_a_call_whose_own_session_is_cut_runs_again_on_a_fresh_one(
    workspace: tuple[Any, str],
) -> None:
    from store.db.postgres.pg_database import ride_out

    db, url = workspace
    pool = db._pool
    sessions: list[int] = []

    def call() -> int:
        with pool.connection() as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            sessions.append(row[0])
            if len(sessions) == 1:  # the server ends this very session mid-call
                conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            return int(row[0])

    # What opening a workspace does with each of its first queries (a 10 s window).
    assert ride_out(call, pool, url, 10.0, role_can_write=False) == sessions[-1]
    assert len(sessions) == 2 and sessions[0] != sessions[1]

    def always_cut() -> None:
        with pool.connection() as conn:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    sentence = r"^Cannot reach the workspace database postgresql://\S*: .*\(retried for \d+ s\)\.$"
    with pytest.raises(DatabaseUnavailable, match=sentence):
        ride_out(always_cut, pool, url, 0.3, role_can_write=False)
