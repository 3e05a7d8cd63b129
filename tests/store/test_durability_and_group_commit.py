"""The workspace durability setting (``[workspace] durability`` in config.toml, verified on every
connection that writes) and group commit (writes queued together share one transaction, each
keeping its own all-or-nothing meaning, committed in the order they were submitted)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pg_support import fresh_schema

from store.db.backends import open_database
from store.db.durability import check_durability, durability_from_config
from store.db.seam import Database
from store.db.sqlite.direct import DirectDatabase, run_now
from store.errors import InvalidInputError, NotFoundError
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[2]


def configure(workspace: Workspace, text: str) -> None:
    workspace.root.mkdir(parents=True, exist_ok=True)
    workspace.config_path.write_text(text)


# -- the setting ----------------------------------------------------------------------------


def test_durability_policy_reads_the_workspace_table() -> None:
    assert durability_from_config({}, "c") == "normal"
    assert durability_from_config({"workspace": {"durability": "FULL"}}, "c") == "full"
    assert check_durability("normal") == "normal"
    with pytest.raises(InvalidInputError, match="normal, full"):
        durability_from_config({"workspace": {"durability": "paranoid"}}, "c")
    with pytest.raises(InvalidInputError, match=r"\[workspace\] must be a table"):
        durability_from_config({"workspace": "full"}, "c")


async def test_full_is_in_effect_on_every_connection_that_writes(workspace: Workspace) -> None:
    configure(workspace, '[workspace]\ndurability = "full"\n')
    db = await open_database(workspace)
    try:
        store = RunStore(db)
        run = await store.create_run("w")
        await store.upsert_nodes(run.run_id, [("a", 0, "pending", [])])
        # An attempt's start is committed without a flush on the direct connection...
        await store.start_attempt(run.run_id, "a", 0, 1, agent="x")
        # ...and the attempt's end with one, on the worker connection.
        await store.finish_attempt(run.run_id, "a", 0, 1, "finished", node_state="finished")
        found = await db.writer_pragmas()
        assert set(found) == {"worker", "direct"}
        assert all(p == {"journal_mode": "wal", "synchronous": "full"} for p in found.values())
    finally:
        await db.close()
    direct = DirectDatabase.open_now(workspace)
    try:
        level = run_now(direct.fetch_value("PRAGMA synchronous"))
        assert (direct.durability, level) == ("full", 2)
    finally:
        run_now(direct.close())


async def test_normal_is_the_default(workspace: Workspace) -> None:
    db = await open_database(workspace)
    try:
        await MemoryStore(db).set_fact("global:x", "k", 1)
        found = await db.writer_pragmas()
        assert all(p == {"journal_mode": "wal", "synchronous": "normal"} for p in found.values())
        assert db.durability == "normal"
    finally:
        await db.close()


@pytest.mark.postgresql
@pytest.mark.parametrize(("level", "expected"), [("normal", "off"), ("full", "on")])
async def test_a_postgresql_workspace_commits_at_its_level(
    tmp_path: Path, level: str, expected: str
) -> None:
    """Every writing session of a PostgreSQL workspace runs at the configured level's
    synchronous_commit (read back when the session opens)."""
    with fresh_schema() as url:
        workspace = Workspace(tmp_path / ".tether", database_url=url)
        configure(workspace, f'[workspace]\ndurability = "{level}"\n')
        db = await open_database(workspace)
        try:
            await MemoryStore(db).set_fact("global:x", "k", 1)
            found = await db.run_read(
                lambda conn: conn.execute("SHOW synchronous_commit").fetchone()[0]
            )
            assert (db.durability, found) == (level, expected)
        finally:
            await db.close()


def test_an_unknown_level_is_one_sentence_and_changes_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "config.toml").write_text('[workspace]\ndurability = "sometimes"\n')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui.cli.entry",
            "memory",
            "set",
            "global:x",
            "k",
            "1",
            "--workspace",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "durability must be one of normal, full" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (workspace / "tether.db").exists()


# -- group commit ---------------------------------------------------------------------------


async def test_writes_submitted_together_share_one_commit(db: Database) -> None:
    memory = MemoryStore(db)
    before = db.writes.groups  # type: ignore[attr-defined]
    await asyncio.gather(*(memory.set_fact("global:g", f"k{i}", i) for i in range(20)))
    # One group (two if the first ran alone), on both backends.
    assert db.writes.groups - before <= 2  # type: ignore[attr-defined]
    assert [f.value for f in await memory.list_facts("global:g")] == sorted(
        range(20), key=lambda i: f"k{i}"
    )


def _good(i: int) -> Any:
    return lambda conn: conn.execute(
        "INSERT INTO events (at_ms, type) VALUES (?, ?)", (i, "good")
    ).rowcount


async def test_a_failing_write_is_undone_alone(db: Database) -> None:
    def bad(conn: Any) -> None:
        conn.execute("INSERT INTO events (at_ms, type) VALUES (0, 'bad')")
        raise NotFoundError("there is no such thing")

    results = await asyncio.gather(
        db.submit(_good(1)), db.submit(bad), db.submit(_good(2)), return_exceptions=True
    )
    assert isinstance(results[1], NotFoundError)
    assert results[0] == results[2] == 1
    types = [r[0] for r in await db.fetch_all("SELECT type FROM events ORDER BY seq")]
    assert types == ["good", "good"]  # the failing write left nothing; the others committed


async def test_a_statement_failing_later_in_the_group_is_its_writes_own(db: Database) -> None:
    """On PostgreSQL the statements of a group are pipelined: an error the server reports
    after the write that caused it has returned still goes to that write alone."""

    def breaks_a_constraint(conn: Any) -> None:
        conn.execute("INSERT INTO events (at_ms, type) VALUES (?, NULL)", (0,))  # nobody reads

    results = await asyncio.gather(
        db.submit(_good(1)), db.submit(breaks_a_constraint), db.submit(_good(2)),
        return_exceptions=True,
    )
    assert results[0] == results[2] == 1
    assert isinstance(results[1], Exception) and "null" in str(results[1]).lower()
    types = [r[0] for r in await db.fetch_all("SELECT type FROM events ORDER BY seq")]
    assert types == ["good", "good"]


async def test_groups_keep_committing_after_many_failed_groups(db: Database) -> None:
    """A group that fails in the middle of its pipeline leaves the connection as usable as
    before: PostgreSQL never prepared what the aborted pipeline carried, so no later write
    may count on it (psycopg prepares a statement on its fifth execution; before, every
    group on a connection failed with 'prepared statement does not exist' from then on)."""

    def breaks_a_constraint(conn: Any) -> None:
        conn.execute("INSERT INTO events (at_ms, type) VALUES (?, NULL)", (0,))

    def two_good(conn: Any) -> None:
        conn.executemany("INSERT INTO events (at_ms, type) VALUES (?, ?)",
                         [(0, "good"), (1, "good")])

    for round_ in range(30):
        results = await asyncio.gather(
            db.submit(_good(round_)), db.submit(breaks_a_constraint), db.submit(two_good),
            return_exceptions=True,
        )
        assert results[0] == 1 and results[2] is None, (round_, results)
        assert isinstance(results[1], Exception) and "null" in str(results[1]).lower()
    assert await db.submit(_good(99)) == 1
    count = await db.fetch_all("SELECT count(*) FROM events WHERE type = 'good'")
    assert count[0][0] == 91


@pytest.mark.postgresql
async def test_unflushed_writes_skip_the_wal_flush_only_when_alone(tmp_path: Path) -> None:
    """At ``full`` on PostgreSQL a group made only of ``flush=False`` writes commits with
    ``synchronous_commit=off``; one flushed write in the group makes the whole group wait."""
    with fresh_schema() as url:
        workspace = Workspace(tmp_path / ".tether", url)
        configure(workspace, '[workspace]\ndurability = "full"\n')
        db = await open_database(workspace)
        try:
            def setting(conn: Any) -> str:
                return str(conn.execute("SHOW synchronous_commit").fetchone()[0])

            assert await db.submit(setting, flush=False) == "off"
            mixed = await asyncio.gather(db.submit(setting, flush=False), db.submit(setting))
            assert mixed == ["on", "on"]
            assert await db.submit(setting) == "on"
        finally:
            await db.close()


async def test_writes_commit_in_the_order_submitted(db: Database) -> None:
    store = RunStore(db)
    await asyncio.gather(*(store.append_event("warning", payload={"n": i}) for i in range(30)))
    events = await store.events_since(0)
    assert [e.payload["n"] for e in events] == list(range(30))


async def test_close_commits_what_is_queued(any_workspace: Workspace) -> None:
    workspace = any_workspace
    db = await open_database(workspace)
    queued = [
        db.submit(
            lambda conn, i=i: conn.execute(
                "INSERT INTO events (at_ms, type) VALUES (?, 'queued')", (i,)
            )
        )
        for i in range(5)
    ]
    await db.close()
    assert all(future.done() for future in queued)
    reopened = await open_database(workspace)
    try:
        assert await reopened.fetch_value("SELECT count(*) FROM events") == 5
    finally:
        await reopened.close()


def test_a_value_read_later_is_read_at_once_unless_reading_waits() -> None:
    """``read_later``: SQLite reads at once; a connection whose reads wait for the server
    (PostgreSQL's pipelined groups) gets a deferred value, resolved to the same answer."""
    from store.db.seam import Deferred, read_later, resolved

    class Waits:
        waits_for_results = True

    reads: list[int] = []

    def read() -> int:
        reads.append(1)
        return 7

    assert read_later(object(), read) == 7 and reads == [1]
    later = read_later(Waits(), read)
    assert isinstance(later, Deferred) and reads == [1]  # nothing read yet
    assert resolved(later) == 7 and reads == [1, 1]
    assert resolved(3) == 3
