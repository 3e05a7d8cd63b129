"""``tether doctor``: check a workspace without changing it, and say how to recover.

Every check reads: ``os.lstat``/``os.stat`` for files and permissions (they open nothing), and a
read-only SQLite connection for the database (``PRAGMA integrity_check`` in full, the schema
version, the journal mode, the runs marked running and their owners). Nothing is written; the
only optional change is removing a stale damage mark (:func:`clear_stale_damage_mark`).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from store.db.sqlite.database_file import (
    cannot_change,
    database_file_exists,
    read_file_info,
    readonly_uri,
)
from store.db.sqlite.sqlite_schema import SCHEMA_VERSION
from store.db.storage_errors import storage_error
from store.errors import TetherError
from store.runs.owners import owner_liveness
from store.workspace.damage import clear_damage, mark_path, recorded_damage
from store.workspace.layout import FIRST_WRITE, Workspace

OK, WARN, FAIL = "ok", "warn", "fail"
INTEGRITY_LINES = 5


@dataclass(frozen=True)
class Finding:
    """One check: its level (ok, warn, fail), what was checked, and one sentence."""

    level: str
    check: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """For ``--format json``."""
        return asdict(self)


def recovery_steps(workspace: Workspace) -> list[str]:
    """How to get the data of a damaged database back into a healthy one."""
    root = workspace.root
    salvaged = root.with_name(root.name + "-salvaged")
    return [
        "Stop every tether process using this workspace (dashboards, runs), then either:",
        f"  tether doctor --workspace {root} --salvage-to {salvaged}",
        "  (copies every row SQLite can still read into a new workspace; the damaged one is "
        "only read), then use that folder: tether --workspace " + str(salvaged) + " ...;",
        "or, with an sqlite3 built with the sqlite_dbpage table (sqlite.org builds are):",
        f"  sqlite3 {workspace.database_path} '.recover' | sqlite3 {salvaged / 'tether.db'}",
        f"Keep {root} until you have checked what was saved.",
    ]


def _mode_finding(check: str, path: Path) -> Finding:
    try:
        info = os.stat(path)
    except OSError as error:
        return Finding(FAIL, check, f"Cannot look at {path}: {error.strerror or error}.")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        wanted = "700" if stat.S_ISDIR(info.st_mode) else "600"
        return Finding(
            WARN, check,
            f"{path} is readable by others (mode {mode:o}); make it owner-only: "
            f"chmod {wanted} {path}.",
        )
    if info.st_uid != os.geteuid():
        return Finding(WARN, check, f"{path} belongs to user id {info.st_uid}, not to you.")
    return Finding(OK, check, f"{path} is owner-only (mode {mode:o}).")


def _permissions(workspace: Workspace) -> list[Finding]:
    found = [_mode_finding("permissions", workspace.root)]
    for path in (
        workspace.database_path,
        workspace.database_path.with_name("tether.db-wal"),
        workspace.database_path.with_name("tether.db-shm"),
        workspace.artifacts_dir,
    ):
        if os.path.lexists(path):
            found.append(_mode_finding("permissions", path))
    if not os.access(workspace.database_path, os.W_OK):
        found.append(Finding(
            WARN, "writable",
            f"{workspace.database_path} is read-only: reading commands work, writing ones fail.",
        ))
    return found


def _schema(workspace: Workspace) -> Finding:
    try:
        info = read_file_info(workspace.database_path)
    except TetherError as error:
        return Finding(FAIL, "schema", str(error))
    if info.empty:
        return Finding(WARN, "schema", f"{workspace.database_path} is empty; the next writing "
                       "command sets it up.")
    if info.schema_version < SCHEMA_VERSION:
        return Finding(WARN, "schema", f"Schema {info.schema_version} of {SCHEMA_VERSION}: the "
                       "next command that opens it upgrades it.")
    return Finding(OK, "schema", f"A Tether database, schema {info.schema_version}.")


def _database_checks(workspace: Workspace, now_ms: int) -> list[Finding]:
    """Integrity, journal mode and the owners of running runs, over one read-only connection."""
    db = workspace.database_path
    found: list[Finding] = []
    try:
        conn = sqlite3.connect(readonly_uri(db), uri=True, timeout=30)
    except sqlite3.Error as error:
        return [Finding(FAIL, "open", f"SQLite cannot open {db}: {error}.")]
    try:
        rows = conn.execute(f"PRAGMA integrity_check({INTEGRITY_LINES})").fetchall()
        verdicts = [
            " ".join(str(row[0]).replace("*** in database main ***", "").split()) for row in rows
        ]
        if verdicts == ["ok"]:
            found.append(Finding(OK, "integrity", "PRAGMA integrity_check: ok."))
        else:
            found.append(Finding(FAIL, "integrity", "PRAGMA integrity_check found damage: "
                                 + "; ".join(v.rstrip(".") for v in verdicts) + "."))
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        wal = db.with_name("tether.db-wal")
        wal_size = wal.stat().st_size if wal.exists() else 0
        if cannot_change(db):
            found.append(Finding(OK, "journal", "Read as it is on disk: its folder takes no new "
                                 "file, so nothing can write it now (journal mode not checked)."))
        elif mode == "wal":
            found.append(Finding(OK, "journal", f"WAL mode; the WAL holds {wal_size:,} bytes."))
        else:
            found.append(Finding(WARN, "journal", f"Journal mode is {mode}, not WAL: writers may "
                                 "wait on readers."))
        found.extend(_owners(conn, now_ms))
    except sqlite3.Error as error:
        problem = storage_error(error, db)
        found.append(Finding(FAIL, "integrity", str(problem) if problem else f"{error}."))
    finally:
        conn.close()
    return found


def _owners(conn: sqlite3.Connection, now_ms: int) -> list[Finding]:
    try:
        rows = conn.execute(
            "SELECT run_id, owner_id, heartbeat_at_ms FROM runs WHERE status = 'running' "
            "ORDER BY created_at_ms DESC LIMIT 50"
        ).fetchall()
    except sqlite3.OperationalError:
        return []  # an older schema without runs
    found = []
    for run_id, owner_id, heartbeat in rows:
        beat = f"heartbeat {max(0, now_ms - (heartbeat or now_ms)) // 1000} s ago"
        state = owner_liveness(owner_id)
        pid = (owner_id or "").split(":")[1] if owner_id and ":" in owner_id else "?"
        if state is True:
            found.append(Finding(OK, "runs", f"Run {run_id} is being executed by process {pid} "
                                 f"on this machine ({beat})."))
        elif state is False:
            found.append(Finding(WARN, "runs", f"Run {run_id} is marked running but its process "
                                 f"{pid} is gone; resume it with tether run WORKFLOW --resume "
                                 f"{run_id}."))
        else:
            found.append(Finding(OK, "runs", f"Run {run_id} belongs to a process this machine "
                                 f"cannot see ({owner_id or 'no owner recorded'}, {beat})."))
    return found


def examine(workspace: Workspace, now_ms: int) -> list[Finding]:
    """Every check of ``workspace``, in order. Changes nothing."""
    if not workspace.root.is_dir():
        return [Finding(FAIL, "workspace",
                        f"There is no Tether workspace at {workspace.root}; {FIRST_WRITE}.")]
    try:
        if not database_file_exists(workspace.database_path):
            # not found (exit 1) like a missing folder: nothing is wrong, it is not there yet
            return [Finding(FAIL, "workspace",
                            f"{workspace.root} holds no tether.db yet; {FIRST_WRITE}.")]
    except TetherError as error:
        return [Finding(FAIL, "database", str(error))]
    found = _permissions(workspace)
    damage = recorded_damage(workspace)
    if damage is not None:
        found.append(Finding(FAIL, "damage", f"A process found this database damaged: "
                             f"{damage.rstrip('.')}; no process writes to it until it is "
                             f"recovered (the mark is {mark_path(workspace)})."))
    schema = _schema(workspace)
    found.append(schema)
    if schema.level != FAIL:
        found.extend(_database_checks(workspace, now_ms))
    return found


def clear_stale_damage_mark(workspace: Workspace, findings: list[Finding]) -> bool:
    """Remove the damage mark when the full integrity check just passed; True if removed."""
    if any(f.check == "integrity" and f.level == OK for f in findings):
        return clear_damage(workspace)
    return False
