"""Term-index snapshots over real SQLite workspaces: a fresh index read from a snapshot (plus
the tail since) answers exactly like a warm index that saw every change, and like one built
from scratch; a damaged, foreign, stale or pruned-past snapshot is never used."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.memory.note_values import NoteInput
from store.search.bank_arrays import LIVE, STATUS_CODES, WORKSPACE, Scope
from store.search.search_policy import INDEX_TERMS_VERSION
from store.search.term_index import TermIndex, index_for
from store.search.term_snapshot import (
    SNAPSHOT_MIN_NOTES,
    SNAPSHOT_TAIL_NOTES,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from store.workspace.layout import Workspace

WORDS = ["deploy", "retry", "parser", "flaky", "fixture", "cache", "budget", "lint", "module",
         "timeout", "canary", "rollback", "schema", "migration", "queue", "worker", "lease",
         "token"]
BANK = "workflow:alpha"
OTHER = "workflow:beta"
QUERIES = [("deploy",), ("retry", "parser"), ("flaky", "fixture", "cache"), ("queue",),
           ("deploy", "retry")]
SCOPES = [LIVE, Scope((STATUS_CODES["accepted"], STATUS_CODES["pending"]), True)]


def notes(count: int, seed: int, prefix: str) -> list[NoteInput]:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return [
        NoteInput(BANK if i % 3 else OTHER,
                  " ".join(rng.choices(WORDS, weights=weights, k=rng.randint(3, 12))),
                  id=f"{prefix}{i}", status="pending" if i % 11 == 0 else "accepted")
        for i in range(count)
    ]


async def answers(db: Database, index: TermIndex) -> list[object]:
    """Every query over the bank and over the workspace, both modes, two scopes."""

    def read(conn: sqlite3.Connection) -> list[object]:
        out: list[object] = []
        for terms in QUERIES:
            for namespaces in ([BANK], None):
                for scope in SCOPES:
                    for require_all in (True, False):
                        found = index.search(conn, namespaces, terms, limit=15,
                                             require_all=require_all, scope=scope)
                        out.append([(r.rowid, round(r.score, 5), r.matched) for r in found])
        return out

    return await db.run_read(read)


async def fresh_answers(workspace: Workspace, snapshot: bool = True) -> tuple[list[object],
                                                                             TermIndex]:
    """What a new process sees: a new database handle and a new index (with or without the
    workspace's snapshots)."""
    async with await MemoryStore.open(workspace) as store:
        index = index_for(store.db) if snapshot else TermIndex(None)
        return await answers(store.db, index), index


def events(index: TermIndex, kind: str) -> list[tuple[str, str, str]]:
    return [event for event in index.history if event[0] == kind]


@pytest.fixture
async def store(workspace: Workspace) -> AsyncIterator[MemoryStore]:
    memory = await MemoryStore.open(workspace)
    await memory.save_notes(notes(SNAPSHOT_MIN_NOTES * 2, seed=1, prefix="a"))
    yield memory
    await memory.close()


async def test_a_fresh_index_equals_the_warm_one_after_every_kind_of_change(
    store: MemoryStore, workspace: Workspace
) -> None:
    warm = index_for(store.db)
    first = await answers(store.db, warm)
    saved = {event[1] for event in events(warm, "saved")}
    assert saved == {BANK, WORKSPACE}  # built, big enough, saved
    for namespace in saved:
        path = snapshot_path(workspace.root, namespace)
        assert path.stat().st_mode & 0o777 == 0o600
    assert (workspace.root / "index").stat().st_mode & 0o777 == 0o700
    fresh, index = await fresh_answers(workspace)
    assert fresh == first
    assert {event[1] for event in events(index, "loaded")} == {BANK, WORKSPACE}
    assert not events(index, "built")
    # Another process changes things: new notes, a decision each way, a supersession.
    async with await MemoryStore.open(workspace) as other:
        await other.save_notes(notes(40, seed=2, prefix="b"))
        await other.accept_note("a11")  # was pending
        await other.reject_note("a1")
        await other.save_note(BANK, "deploy with a canary and a rollback", note_id="c1",
                              supersedes=["a2", "a4"])
        await other.save_note(BANK, "deploy retry proposal", note_id="c2", status="pending",
                              supersedes=["a5"])
    warm_now = await answers(store.db, warm)
    assert warm_now != first
    fresh, index = await fresh_answers(workspace)
    assert fresh == warm_now
    assert events(index, "loaded") and not events(index, "built")
    rebuilt, _ = await fresh_answers(workspace, snapshot=False)
    assert rebuilt == warm_now


async def test_a_long_tail_is_saved_so_the_next_process_reads_little(
    store: MemoryStore, workspace: Workspace
) -> None:
    await answers(store.db, index_for(store.db))
    await store.close()
    async with await MemoryStore.open(workspace) as other:
        await other.save_notes(notes(SNAPSHOT_TAIL_NOTES * 2, seed=3, prefix="d"))
    fresh, index = await fresh_answers(workspace)
    loaded = dict((event[1], int(event[2])) for event in events(index, "loaded"))
    assert loaded[WORKSPACE] == SNAPSHOT_TAIL_NOTES * 2  # its tail, then saved again
    assert {event[1] for event in events(index, "saved")} >= {WORKSPACE}
    again, index = await fresh_answers(workspace)
    assert again == fresh
    # Both banks read with nothing left to apply: their tails were saved, and saved unmerged
    # (the workspace's delta segment is the tail, read back as it was).
    loaded = dict((event[1], int(event[2])) for event in events(index, "loaded"))
    assert loaded == {BANK: 0, WORKSPACE: 0}
    assert not events(index, "built") and not events(index, "rejected")
    assert index.banks[WORKSPACE].delta_notes == SNAPSHOT_TAIL_NOTES * 2
    scratch, _ = await fresh_answers(workspace, snapshot=False)
    assert again == scratch


@pytest.mark.parametrize("arrays", ["last one empty", "all empty"])
def test_an_empty_array_takes_no_room_and_reads_back(tmp_path: Path, arrays: str) -> None:
    data = {"first": np.arange(5, dtype=np.int32), "empty": np.zeros(0, dtype=np.float32)}
    if arrays == "all empty":
        data["first"] = np.zeros(0, dtype=np.int32)
    meta = {"namespace": BANK, "terms_version": INDEX_TERMS_VERSION, "rowid_mark": 0,
            "change_mark": 0, "fingerprint": [], "change_fingerprint": None}
    path = snapshot_path(tmp_path, BANK)
    size = write_snapshot(path, meta, data)
    assert path.stat().st_size == size
    entries = {e["name"]: e for e in read_snapshot(path, BANK).meta["arrays"]}
    assert entries["empty"]["offset"] == 0 and entries["empty"]["bytes"] == 0
    read = read_snapshot(path, BANK).arrays
    for name, array in data.items():
        assert read[name].dtype == array.dtype and np.array_equal(read[name], array)
    if arrays == "last one empty":  # the file ends with the last array's data
        assert path.read_bytes()[-20:] == data["first"].tobytes()


def damage(path: Path, at: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[at:at + len(data)] = data
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("how", ["array byte", "header byte", "truncated", "magic", "empty",
                                 "another bank"])
async def test_a_damaged_or_foreign_snapshot_is_ignored_and_replaced(
    store: MemoryStore, workspace: Workspace, how: str
) -> None:
    expected = await answers(store.db, index_for(store.db))
    await store.close()
    path = snapshot_path(workspace.root, BANK)
    size = path.stat().st_size
    if how == "array byte":
        damage(path, size - 3, b"\xff")
    elif how == "header byte":
        damage(path, 40, b"#")
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: size // 2])
    elif how == "magic":
        damage(path, 0, b"NOT-TETHER")
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(snapshot_path(workspace.root, WORKSPACE).read_bytes())
    fresh, index = await fresh_answers(workspace)
    assert fresh == expected
    assert [event[1] for event in events(index, "rejected")] == [BANK]
    assert BANK in {event[1] for event in events(index, "built")}
    assert BANK in {event[1] for event in events(index, "saved")}  # replaced by a good one
    again, index = await fresh_answers(workspace)
    assert again == expected and not events(index, "rejected")


async def test_a_snapshot_of_another_database_or_a_newer_state_is_not_used(
    store: MemoryStore, workspace: Workspace, tmp_path: Path
) -> None:
    await answers(store.db, index_for(store.db))
    await store.close()
    backup = tmp_path / "backup.db"
    copy_database(workspace.root / "tether.db", backup)
    # Later notes and a fresh snapshot, then the backup is restored: the snapshot is ahead.
    async with await MemoryStore.open(workspace) as other:
        await other.save_notes(notes(SNAPSHOT_TAIL_NOTES * 2, seed=4, prefix="e"))
        await answers(other.db, index_for(other.db))
    copy_database(backup, workspace.root / "tether.db")
    expected, _ = await fresh_answers(workspace, snapshot=False)
    fresh, index = await fresh_answers(workspace)
    assert fresh == expected
    assert "newer than the database" in events(index, "rejected")[0][2]
    # Same rowids, other notes (the restored backup took new notes since): ids differ.
    async with await MemoryStore.open(workspace) as other:
        await other.save_notes(notes(SNAPSHOT_TAIL_NOTES * 2, seed=5, prefix="f"))
        await answers(other.db, index_for(other.db))
    copy_database(backup, workspace.root / "tether.db")
    async with await MemoryStore.open(workspace) as other:
        await other.save_notes(notes(SNAPSHOT_TAIL_NOTES * 3, seed=6, prefix="g"))
    expected, _ = await fresh_answers(workspace, snapshot=False)
    fresh, index = await fresh_answers(workspace)
    assert fresh == expected
    assert "another note at rowid" in events(index, "rejected")[0][2]


async def test_a_change_log_pruned_past_the_snapshot_forces_a_rebuild(
    store: MemoryStore, workspace: Workspace
) -> None:
    await answers(store.db, index_for(store.db))
    await store.accept_note("a0")  # logs changes after the snapshot's mark
    await store.reject_note("a3")
    await store.close()
    conn = sqlite3.connect(workspace.root / "tether.db")
    with conn:
        # A pruner keeps the newest entries; here everything up to the last one goes.
        conn.execute("DELETE FROM note_changes WHERE seq < (SELECT max(seq) FROM note_changes)")
    conn.close()
    expected, _ = await fresh_answers(workspace, snapshot=False)
    fresh, index = await fresh_answers(workspace)
    assert fresh == expected
    assert "pruned" in events(index, "rejected")[0][2]


def copy_database(source: Path, target: Path) -> None:
    """Copy a workspace database through SQLite's backup API (never as a file)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
