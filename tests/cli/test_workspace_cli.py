"""Workspace resolution, permissions, refusal of unusable files, and concurrent writers,
all through the real command line."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from memory_cli_support import REPO_ROOT, fingerprint, one_sentence, tether

from store.db.sqlite.sqlite_schema import APPLICATION_ID, SCHEMA_VERSION

NS = "workflow:code-review"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_first_write_creates_owner_only_workspace(tmp_path: Path) -> None:
    result = tether("memory", "set", NS, "k", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    ws = tmp_path / ".tether"
    assert _mode(ws) == 0o700
    assert _mode(ws / "tether.db") == 0o600
    assert _mode(ws / "artifacts") == 0o700


def test_the_embedder_lock_is_owner_only(tmp_path: Path) -> None:
    """The background embedder's lock (``embed.lock``, made by the first ``notes add`` or
    ``memory set`` once the semantic extra is installed) was created 0644: any local user
    could open it and hold its flock, and no embedder would ever run."""
    assert tether("memory", "set", NS, "k", "1", cwd=tmp_path).returncode == 0
    ws = tmp_path / ".tether"
    tether("memory", "reindex", "--quiet", "--workspace", str(ws))  # takes the lock
    assert _mode(ws / "embed.lock") == 0o600
    for path in ws.rglob("*"):
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path


def test_workspace_is_found_walking_up(tmp_path: Path) -> None:
    assert tether("memory", "set", NS, "k", '"top"', cwd=tmp_path).returncode == 0
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert tether("memory", "get", NS, "k", cwd=deep).stdout == '"top"\n'
    assert not (deep / ".tether").exists()


def test_environment_and_flag_override_discovery(tmp_path: Path) -> None:
    assert tether("memory", "set", NS, "k", '"discovered"', cwd=tmp_path).returncode == 0
    from_env = tmp_path / "env-ws"
    from_flag = tmp_path / "flag-ws"
    env = {"TETHER_WORKSPACE": str(from_env)}
    assert tether("memory", "set", NS, "k", '"env"', cwd=tmp_path, env=env).returncode == 0
    assert tether("memory", "set", NS, "k", '"flag"', "--workspace", str(from_flag),
                  cwd=tmp_path, env=env).returncode == 0
    assert (from_env / "tether.db").exists() and (from_flag / "tether.db").exists()
    assert tether("memory", "get", NS, "k", cwd=tmp_path).stdout == '"discovered"\n'
    assert tether("memory", "get", NS, "k", cwd=tmp_path, env=env).stdout == '"env"\n'
    # The flag works on the subcommand and on the top-level command, and beats the variable.
    for args in (("memory", "get", NS, "k", "--workspace", str(from_flag)),
                 ("--workspace", str(from_flag), "memory", "get", NS, "k")):
        assert tether(*args, cwd=tmp_path, env=env).stdout == '"flag"\n'


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()


def _corrupt(path: Path) -> None:
    _foreign(path)
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xde\xad\xbe\xef" * ((4096 - 100) // 4)
    path.write_bytes(bytes(data))


def _not_sqlite(path: Path) -> None:
    path.write_bytes(b"just some notes, not a database\n" * 10)


def _newer(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.execute("CREATE TABLE future (x)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "message", "code"),
    [
        (_foreign, "does not belong to Tether", 2),
        (_corrupt, "is damaged", 3),
        (_not_sqlite, "is not a SQLite database", 2),
        (_newer, "written by a newer Tether", 2),
    ],
    ids=["foreign", "corrupt", "not-sqlite", "newer"],
)
def test_unusable_database_files_are_refused_untouched(
    tmp_path: Path, make: object, message: str, code: int
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make(ws / "tether.db")  # type: ignore[operator]
    before = fingerprint(ws)
    for args in (("memory", "set", NS, "k", "1"), ("memory", "list"),
                 ("notes", "add", NS, "body")):
        result = tether(*args, "--workspace", str(ws))
        assert result.returncode == code, (args, result.stderr)
        assert message in one_sentence(result.stderr)
    assert fingerprint(ws) == before


def test_a_workspace_that_cannot_be_created_is_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = tether("memory", "set", NS, "k", "1", "--workspace", str(blocker))
    assert result.returncode == 2
    assert "Cannot open the workspace" in one_sentence(result.stderr)
    assert blocker.read_text() == "not a folder"


WRITER = """
import asyncio, json, sys, time
from pathlib import Path
from store.memory.memory_store import MemoryStore
from store.workspace.layout import Workspace

async def main(root, tag, seconds):
    store = await MemoryStore.open(Workspace(Path(root)))
    written = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            await store.set_fact("workflow:load", f"{tag}-{written}", {"n": written})
            await store.set_fact("workflow:load", "shared", tag)
            written += 1
            if written % 25 == 0:
                await store.save_note("workflow:load", f"note {tag} {written}")
    finally:
        await store.close()
    print(json.dumps({"written": written}))

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""


@pytest.mark.slow
def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert tether("memory", "set", NS, "seed", "0", "--workspace", str(ws)).returncode == 0
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ws), tag, "2.5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT, text=True,
        )
        for tag in ("a", "b")
    ]
    # Meanwhile the command line writes too, contending with both.
    cli_keys: list[str] = []
    started = time.monotonic()
    while time.monotonic() - started < 2.0:
        key = f"cli-{len(cli_keys)}"
        result = tether("memory", "set", "workflow:load", key, "true", "--workspace", str(ws))
        assert result.returncode == 0 and result.stderr == "", result.stderr
        cli_keys.append(key)
    counts = {}
    for tag, writer in zip(("a", "b"), writers, strict=True):
        out, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
        assert "locked" not in err and err == ""
        counts[tag] = json.loads(out)["written"]
    listing = tether("memory", "list", "workflow:load", "--format", "json", "--limit", "100000",
                     "--workspace", str(ws))
    keys = {fact["key"] for fact in json.loads(listing.stdout)["items"]}
    expected = {f"{tag}-{i}" for tag, n in counts.items() for i in range(n)}
    assert counts["a"] > 50 and counts["b"] > 50
    assert expected <= keys
    assert set(cli_keys) <= keys
    assert len(keys) == len(expected) + len(cli_keys) + 1  # + "shared"
