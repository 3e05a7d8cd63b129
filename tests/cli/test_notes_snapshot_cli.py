"""Term-index snapshots through real ``tether`` processes: every one-shot search is a fresh
process that maps the workspace's snapshot, and must answer exactly like a long-lived index
that watched every change (inserts, accepts, rejects, supersessions), like an index built
from scratch, and still right when the snapshot is damaged or cannot be written."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from memory_cli_support import REPO_ROOT, tether

from store.memory.memory_store import MemoryStore
from store.search.term_index import TermIndex
from store.search.term_snapshot import SNAPSHOT_MIN_NOTES, SNAPSHOT_TAIL_NOTES
from store.workspace.layout import Workspace

WORDS = ["deploy", "retry", "parser", "flaky", "fixture", "cache", "budget", "lint", "module",
         "timeout", "canary", "rollback", "schema", "migration", "queue", "worker", "lease",
         "token"]
NAMESPACES = ("workflow:alpha", "workflow:beta", "user:gamma")
QUERIES = [
    ("deploy",), ("retry parser",), ("flaky fixture cache",), ("queue", "--namespace",
                                                              "workflow:alpha"),
    ("what did we decide about the canary rollback?",), ("lease token worker",),
]


def write_notes(path: Path, count: int, seed: int, prefix: str) -> None:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    with path.open("w") as handle:
        for i in range(count):
            body = " ".join(rng.choices(WORDS, weights=weights, k=rng.randint(3, 12)))
            handle.write(json.dumps({"id": f"{prefix}{i}", "namespace": NAMESPACES[i % 3],
                                     "body": body, "status": "pending" if i % 13 == 0
                                     else "accepted"}) + "\n")


def run_ok(*args: str) -> str:
    done = tether(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli_search(ws: Path, query: tuple[str, ...]) -> list[tuple[str, float, str, list[str]]]:
    out = run_ok("notes", "search", *query, "--limit", "15", "--format", "json",
                 "--workspace", str(ws))
    return [(h["id"], round(h["score"], 4), h["mode"], h["matched_terms"])
            for h in json.loads(out)["items"]]


async def store_search(store: MemoryStore, query: tuple[str, ...]
                       ) -> list[tuple[str, float, str, list[str]]]:
    namespace = query[2] if len(query) > 1 else None
    hits = await store.search_notes(query[0], namespace=namespace, limit=15)
    return [(h.note.id, round(h.score, 4), h.mode, list(h.matched)) for h in hits]


@pytest.fixture
async def seeded(tmp_path: Path) -> AsyncIterator[Path]:
    ws = tmp_path / "ws"
    source = tmp_path / "notes.jsonl"
    write_notes(source, SNAPSHOT_MIN_NOTES * 4, seed=1, prefix="a")
    run_ok("notes", "import", str(source), "--workspace", str(ws))
    yield ws


def snapshots(ws: Path) -> dict[str, bytes]:
    folder = ws / "index"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


async def test_fresh_processes_answer_like_a_warm_index_after_every_change(
    seeded: Path, tmp_path: Path
) -> None:
    ws = seeded
    async with await MemoryStore.open(Workspace(ws)) as warm:  # a long-lived process
        first = [await store_search(warm, q) for q in QUERIES]
        assert [cli_search(ws, q) for q in QUERIES] == first  # the first builds and saves
        saved = snapshots(ws)
        assert len(saved) >= 2  # the workspace index and workflow:alpha's
        assert [cli_search(ws, q) for q in QUERIES] == first  # these map the snapshots
        assert snapshots(ws) == saved  # nothing new to save
        # Changes by other processes: notes, a decision each way, a supersession.
        new = run_ok("notes", "add", "workflow:alpha", "deploy the canary after the rollback",
                     "--status", "pending", "--supersedes", "a3", "--supersedes", "a6",
                     "--workspace", str(ws)).strip()
        run_ok("notes", "accept", new, "--workspace", str(ws))
        run_ok("notes", "accept", "a0", "--workspace", str(ws))  # was pending
        run_ok("notes", "reject", "a2", "--workspace", str(ws))
        run_ok("notes", "add", "workflow:beta", "retry the parser with a budget",
               "--workspace", str(ws))
        expected = [await store_search(warm, q) for q in QUERIES]
        assert expected != first
        assert [cli_search(ws, q) for q in QUERIES] == expected
        assert snapshots(ws) == saved  # a short tail is re-read, not saved
        # A long tail: the next search saves again, and the one after reads nothing old.
        more = tmp_path / "more.jsonl"
        write_notes(more, SNAPSHOT_TAIL_NOTES * 3, seed=2, prefix="b")
        run_ok("notes", "import", str(more), "--workspace", str(ws))
        expected = [await store_search(warm, q) for q in QUERIES]
        assert [cli_search(ws, q) for q in QUERIES] == expected
        assert snapshots(ws) != saved
        assert [cli_search(ws, q) for q in QUERIES] == expected
    # And exactly what an index built from scratch answers.
    async with await MemoryStore.open(Workspace(ws)) as store:
        from store.search import term_index

        scratch = TermIndex(None)
        original, term_index.index_for = term_index.index_for, lambda db: scratch  # type: ignore[assignment]
        try:
            assert [await store_search(store, q) for q in QUERIES] == expected
        finally:
            term_index.index_for = original  # type: ignore[assignment]


async def test_a_damaged_snapshot_is_ignored_and_replaced(seeded: Path) -> None:
    ws = seeded
    expected = [cli_search(ws, q) for q in QUERIES]
    for path in (ws / "index").iterdir():
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        path.write_bytes(bytes(raw))
    damaged = snapshots(ws)
    assert [cli_search(ws, q) for q in QUERIES] == expected
    repaired = snapshots(ws)
    assert repaired.keys() == damaged.keys()
    assert all(repaired[name] != damaged[name] for name in damaged)  # rebuilt and replaced
    assert [cli_search(ws, q) for q in QUERIES] == expected
    assert snapshots(ws) == repaired


def readonly_index_command(index: Path, args: list[str]) -> list[str] | None:
    """A command running ``tether ARGS`` with ``index`` read-only: a read-only bind mount in
    a private mount namespace (as root, where permissions do not stop writes), or the
    folder's permissions otherwise; None when neither is possible here."""
    python = [sys.executable, "-m", "tui.cli.entry", *args]
    if os.geteuid() != 0:
        index.chmod(0o555)
        return python
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return None
    script = ('mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"')
    return ["unshare", "-m", "sh", "-c", script, str(index), *python]


async def test_a_read_only_index_folder_is_read_but_never_written(
    seeded: Path, tmp_path: Path
) -> None:
    ws = seeded
    cli_search(ws, QUERIES[0])  # saves the snapshots
    more = tmp_path / "more.jsonl"
    write_notes(more, SNAPSHOT_TAIL_NOTES * 2, seed=3, prefix="c")
    run_ok("notes", "import", str(more), "--workspace", str(ws))  # a tail worth saving
    run_ok("notes", "reject", "a5", "--workspace", str(ws))
    before = snapshots(ws)
    async with await MemoryStore.open(Workspace(ws)) as store:
        from store.search import term_index

        scratch = TermIndex(None)
        original, term_index.index_for = term_index.index_for, lambda db: scratch  # type: ignore[assignment]
        try:
            expected = [await store_search(store, q) for q in QUERIES]
        finally:
            term_index.index_for = original  # type: ignore[assignment]
    index = ws / "index"
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    for query in QUERIES:
        args = ["notes", "search", *query, "--limit", "15", "--format", "json",
                "--workspace", str(ws)]
        command = readonly_index_command(index, args)
        if command is None:
            pytest.skip("cannot make a folder read-only here (root without mount namespaces)")
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        hits = [(h["id"], round(h["score"], 4), h["mode"], h["matched_terms"])
                for h in json.loads(done.stdout)["items"]]
        assert hits == expected[QUERIES.index(query)]
    if os.geteuid() != 0:
        index.chmod(0o700)
    assert snapshots(ws) == before  # nothing written, no temporary file left


async def test_an_index_path_that_cannot_be_a_folder_changes_nothing(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    source = tmp_path / "notes.jsonl"
    write_notes(source, SNAPSHOT_MIN_NOTES * 2, seed=4, prefix="d")
    run_ok("notes", "import", str(source), "--workspace", str(ws))
    (ws / "index").write_text("not a folder")
    first = [cli_search(ws, q) for q in QUERIES]
    assert (ws / "index").read_text() == "not a folder"
    (ws / "index").unlink()
    assert [cli_search(ws, q) for q in QUERIES] == first  # built, now saved
    assert snapshots(ws)
