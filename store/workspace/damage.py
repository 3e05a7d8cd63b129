"""The damage mark: once SQLite reports the workspace database corrupt, no process writes to it.

The first process that meets SQLITE_CORRUPT/NOTADB writes ``damaged.json`` next to the database
(the database itself cannot be trusted to hold the news). Every later writer checks the mark when
it opens the workspace and refuses with one sentence; readers still read. The mark names the
file by device and inode, so a recovered database put in its place (a new file) is not refused;
``tether doctor`` removes a mark once a full integrity check passes again.

Only ``os.stat`` touches the database file here: opening and closing any descriptor of it
would drop the SQLite locks this process holds (see store/db/sqlite/database_file.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from store.workspace.layout import Workspace

DAMAGE_MARK = "damaged.json"


def mark_path(workspace: Workspace) -> Path:
    """Where the damage mark of ``workspace`` lives."""
    return workspace.root / DAMAGE_MARK


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def record_damage(workspace: Workspace, message: str) -> None:
    """Remember that the current database file is damaged (best effort: the disk may be full)."""
    identity = _identity(workspace.database_path)
    if identity is None:
        return
    document = {
        "device": identity[0],
        "inode": identity[1],
        "message": message,
        "found_at_ms": int(time.time() * 1000),
    }
    target = mark_path(workspace)
    temp = target.with_name(f".{DAMAGE_MARK}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        os.replace(temp, target)


def recorded_damage(workspace: Workspace) -> str | None:
    """The sentence recorded when the current database file was found damaged, or None."""
    target = mark_path(workspace)
    try:
        document = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    if _identity(workspace.database_path) != (document.get("device"), document.get("inode")):
        return None  # the database was replaced since (recovered): the mark is about another file
    return str(document.get("message") or "the database was found damaged")


def clear_damage(workspace: Workspace) -> bool:
    """Remove the damage mark; True when there was one."""
    try:
        mark_path(workspace).unlink()
    except FileNotFoundError:
        return False
    return True
