"""Helpers for the storage tests: the real CLI in a subprocess, seeded workspaces, file checks."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"


def tether(
    workspace: Path | None,
    *args: str,
    stdin: bytes = b"",
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``tether ARGS --workspace WORKSPACE`` in a subprocess (text output)."""
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    environment["PYTHONPATH"] = str(REPO_ROOT)
    environment["TETHER_SIM_LATENCY_MS"] = "0"
    environment.update(env or {})
    where = ("--workspace", str(workspace)) if workspace is not None else ()
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "tui.cli.entry", *args, *where],
        input=stdin, capture_output=True, cwd=cwd or REPO_ROOT, env=environment,
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode,
        done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"),
    )


def one_sentence(stderr: str) -> str:
    """The single line a refusal prints (``tether: ...``), checked to be exactly one."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tether: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def seed(workspace: Path) -> None:
    """A workspace with facts, notes and a finished run (every table has rows), written by the
    store and the real ``tether run``; no connection stays open afterwards."""
    asyncio.run(_seed_memory(workspace))
    from cli_harness import run_cli

    run = run_cli(["run", str(EXAMPLES / "fanout_review.py"), "--input",
                   json.dumps({"files": ["a.py", "b.py", "c.py"]}), "--workspace",
                   str(workspace)], cwd=workspace.parent)
    assert run.code == 0, run.stderr


async def _seed_memory(workspace: Path) -> None:
    from store.memory.memory_store import MemoryStore
    from store.workspace.layout import Workspace

    async with await MemoryStore.open(Workspace(workspace)) as memory:
        for index in range(40):
            await memory.set_fact("workflow:seed", f"k{index}", {"n": index, "text": "x" * 200})
        for index in range(20):
            await memory.save_note("workflow:seed",
                                   f"note {index} about pytest fixtures " + "y" * 200)


def file_digest(folder: Path) -> dict[str, str]:
    """Hashes of every file under ``folder``. Only for processes holding no connection to it."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def workspace_state(folder: Path) -> dict[str, str]:
    """:func:`file_digest` without what SQLite itself creates and removes around any reader:
    the shared-memory index (``-shm``) and an empty WAL."""
    state = file_digest(folder) if folder.exists() else {}
    state.pop("tether.db-shm", None)
    wal = folder / "tether.db-wal"
    if wal.is_file() and wal.stat().st_size == 0:
        state.pop("tether.db-wal", None)
    return state


def sqlite_dump(db: Path) -> list[str]:
    """The database's content as SQL (read-only; compares two states at the SQLite level)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def copy_workspace(source: Path, target: Path) -> Path:
    """A copy made while no process holds a connection to ``source``."""
    shutil.copytree(source, target, symlinks=True)
    return target
