"""Damaged, read-only and full workspaces: one sentence, exit code 3, nothing half-written.

- a damaged b-tree page anywhere is refused before any write (``PRAGMA quick_check`` when a
  writer opens a database of up to 32 MiB), leaving the file byte-identical;
- damage SQLite reports in the middle of a write is recorded, and no process writes after it;
  ``tether doctor`` says how to recover, and the recovered database is used again;
- a read-only database is read and called "read-only" when a write is asked;
- a full disk (a 4 MiB tmpfs in a private mount namespace, filled while ``tether run`` writes):
  one sentence and exit 3 for every write, reads still work, and the run is marked interrupted
  once space is freed.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from storage_support import (
    REPO_ROOT,
    copy_workspace,
    one_sentence,
    seed,
    sqlite_dump,
    tether,
    workspace_state,
)

import store.db.sqlite.sqlite_connection as connection_module
from store.errors import DamagedDatabaseError
from store.memory.memory_store import MemoryStore
from store.workspace.damage import mark_path
from store.workspace.layout import Workspace

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with rows in every table; no process holds it open afterwards."""
    workspace = tmp_path_factory.mktemp("seeded") / "ws"
    seed(workspace)
    assert not (workspace / "tether.db-wal").exists()  # checkpointed: all pages in the file
    return workspace


def btree_root_pages(db: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT name, rootpage FROM sqlite_master WHERE rootpage > 1 ORDER BY rootpage"
        ).fetchall()
    finally:
        conn.close()
    return [(str(name), int(page)) for name, page in rows]


def damage_page(db: Path, page: int, page_size: int = 4096) -> None:
    """Overwrite one page with garbage (no process holds a connection to ``db``)."""
    with db.open("r+b") as handle:
        handle.seek((page - 1) * page_size)
        handle.write(bytes([0xA5, 0x5A]) * (page_size // 2))


def test_a_damaged_btree_page_is_refused_before_any_write(
    seeded: Path, tmp_path: Path
) -> None:
    pages = btree_root_pages(seeded / "tether.db")
    chosen = pages[:: max(1, len(pages) // 12)][:12]
    assert len(chosen) == 12
    refused = []
    for index, (name, page) in enumerate(chosen):
        workspace = copy_workspace(seeded, tmp_path / f"case-{index}")
        damage_page(workspace / "tether.db", page)
        before = workspace_state(workspace)
        for args in (("memory", "set", "workflow:seed", "new", "1"),
                     ("notes", "add", "workflow:seed", "a note")):
            result = tether(workspace, *args)
            assert result.returncode == 3, (name, args, result.stdout, result.stderr)
            assert "is damaged" in one_sentence(result.stderr), name
        assert workspace_state(workspace) == before, name
        refused.append(name)
        doctor = tether(workspace, "doctor")
        assert doctor.returncode == 3 and ".recover" in doctor.stdout, (name, doctor.stdout)
    assert len(refused) == 12


async def test_damage_met_during_a_write_stops_every_later_write(
    seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = copy_workspace(seeded, tmp_path / "ws")
    db = workspace / "tether.db"
    facts_root = dict(btree_root_pages(db))["facts"]
    damage_page(db, facts_root)
    # A database too big to quick-check at open: the damage is met by the write itself.
    monkeypatch.setattr(connection_module, "QUICK_CHECK_MAX_BYTES", 0)
    memory = await MemoryStore.open(Workspace(workspace), create=False)
    try:
        with pytest.raises(DamagedDatabaseError, match="is damaged"):
            await memory.set_fact("workflow:seed", "new", 1)
        with pytest.raises(DamagedDatabaseError):  # this process writes nothing more
            await memory.save_note("workflow:seed", "after the damage")
    finally:
        await memory.close()
    assert mark_path(Workspace(workspace)).exists()
    later = tether(workspace, "notes", "add", "workflow:seed", "from another process")
    assert later.returncode == 3
    assert "found damaged earlier" in one_sentence(later.stderr)
    doctor = tether(workspace, "doctor")
    assert doctor.returncode == 3 and "damage" in doctor.stdout
    # Follow the recovery doctor prints: salvage into a new workspace, then use it.
    salvaged = tmp_path / "salvaged"
    saved = tether(workspace, "doctor", "--salvage-to", str(salvaged), "--format", "json")
    assert saved.returncode == 0, saved.stderr
    rows = {t["table"]: t for t in json.loads(saved.stdout)["tables"]}
    assert rows["notes"]["rows"] == 20 and rows["notes"]["problem"] is None
    assert rows["runs"]["rows"] == 1
    assert rows["facts"]["rows"] == 0 and rows["facts"]["problem"]  # its root page is gone
    assert tether(salvaged, "doctor").returncode == 0
    found = tether(salvaged, "notes", "search", "pytest", "--format", "json")
    # the search index was rebuilt
    assert found.returncode == 0 and json.loads(found.stdout)["items"]
    assert tether(salvaged, "memory", "set", "workflow:seed", "new", "1").returncode == 0
    # The damaged workspace is unchanged; once a healthy file replaces it, writes work again.
    assert mark_path(Workspace(workspace)).exists()
    (workspace / "damaged").mkdir()
    for path in workspace.glob("tether.db*"):
        path.rename(workspace / "damaged" / path.name)
    (salvaged / "tether.db").rename(workspace / "tether.db")
    after = tether(workspace, "doctor", "--clear-damage-mark")
    assert after.returncode == 0, after.stdout
    assert not mark_path(Workspace(workspace)).exists()
    assert tether(workspace, "notes", "add", "workflow:seed", "after recovery").returncode == 0


def read_only_prefix() -> tuple[str, ...]:
    """How to run a command for which a 0400 file is read-only: as root, without the
    capability that lets root ignore file permissions."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a 0400 file would still be writable")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--")


def test_a_read_only_database_is_read_and_called_read_only(seeded: Path, tmp_path: Path) -> None:
    workspace = copy_workspace(seeded, tmp_path / "ws")
    db = workspace / "tether.db"
    os.chmod(db, 0o400)
    prefix = read_only_prefix()
    before = sqlite_dump(db)
    got = tether(workspace, "memory", "get", "workflow:seed", "k1", prefix=prefix)
    assert got.returncode == 0 and json.loads(got.stdout)["n"] == 1, got.stderr
    for args in (("memory", "list"), ("notes", "list"), ("runs",), ("notes", "search", "pytest")):
        result = tether(workspace, *args, prefix=prefix)
        assert result.returncode == 0, (args, result.stderr)
        assert result.stderr == ""
    refused = tether(workspace, "memory", "set", "workflow:seed", "k1", "2", prefix=prefix)
    assert refused.returncode == 3
    sentence = one_sentence(refused.stderr)
    assert "read-only" in sentence and "damaged" not in sentence
    assert stat.S_IMODE(db.stat().st_mode) == 0o400  # never chmod-ed
    assert sqlite_dump(db) == before


def namespace_prefix() -> tuple[str, ...]:
    if shutil.which("unshare") is None:
        pytest.skip("unshare is needed to mount a small tmpfs for the disk-full test")
    probe = subprocess.run(["unshare", "--mount", "--map-root-user", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a mount namespace here: {probe.stderr.decode().strip()}")
    return ("unshare", "--mount", "--map-root-user")


def test_a_full_disk_is_one_sentence_and_the_run_is_marked_interrupted(tmp_path: Path) -> None:
    """Disk full for real: a 4 MiB tmpfs, filled with a file while ``tether run`` writes."""
    prefix = namespace_prefix()
    mount = tmp_path / "mnt"
    mount.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(
        [*prefix, sys.executable, str(HERE / "disk_full_scenario.py"), str(mount),
         str(HERE / "long_workflow.py")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["before"]["code"] == 0
    assert result["started"] and result["filled"] == "No space left on device"
    for step in ("set_while_full", "note_while_full"):
        assert result[step]["code"] == 3, result[step]
        assert "is full" in one_sentence(result[step]["stderr"])
    assert result["list_while_full"]["code"] == 0  # reads still work
    assert result["interrupted_seen"], result["run_stderr"]
    assert result["run_code"] == 3, result["run_stderr"]
    (run,) = json.loads(result["runs"]["stdout"])["items"]
    assert run["status"] == "failed"
    assert run["error"].startswith("Interrupted because the disk holding the workspace was full")
    assert result["after"]["code"] == 0 and result["get_kept"]["stdout"] == '"yes"\n'
    assert result["integrity"] == [["ok"]]
