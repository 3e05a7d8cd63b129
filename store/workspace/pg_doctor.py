"""``tether doctor`` on a team workspace (PostgreSQL): check it without changing it.

Over one read-only session (nothing is migrated or written): can the server be reached with
these credentials, is the schema Tether's and current, may this role write, is the
workspace's durability level kept (``synchronous_commit``), which runs are marked running and
whether their lease still stands (a lapsed one waits for a worker to take it over), how many
queued runs wait, and which workers reported recently. The same findings as the SQLite
doctor (:mod:`store.workspace.doctor`), so the command prints and exits the same way.
"""

from __future__ import annotations

from typing import Any

from store.errors import DatabaseUnavailable, NotFoundError, TetherError, WorkspaceError
from store.model.run_records import STALE_AFTER_MS
from store.model.wording import plural
from store.workspace.doctor import FAIL, OK, WARN, Finding
from store.workspace.layout import Workspace

RUNS_SHOWN = 50


async def examine_postgres(workspace: Workspace, now_ms: int) -> list[Finding]:
    """Every check of the PostgreSQL workspace, in order. Changes nothing."""
    from store.db.postgres.pg_database import PostgresDatabase

    where = workspace.describe()
    try:
        db = await PostgresDatabase.open(workspace, create=False, read_only=True)
    except NotFoundError as error:
        return [Finding(FAIL, "workspace", f"{str(error).rstrip('.')}: the first write creates "
                        "its tables (tether run WORKFLOW, tether notes add NAMESPACE BODY), or "
                        "tether migrate --to URL moves a SQLite workspace there.")]
    except DatabaseUnavailable as error:
        return [Finding(FAIL, "database", str(error))]
    except WorkspaceError as error:
        return [Finding(FAIL, "schema", str(error))]
    try:
        return await _findings(db, where, now_ms)
    except TetherError as error:
        return [Finding(FAIL, "database", str(error))]
    finally:
        await db.close()


async def _findings(db: Any, where: str, now_ms: int) -> list[Finding]:
    from store.runs import queue_sql
    from store.runs.run_queue import RunQueue

    version = await db.fetch_value("SHOW server_version")
    found = [
        Finding(OK, "database", f"PostgreSQL {version} at {where}, schema {db.schema_name}."),
        Finding(OK, "schema", "A Tether workspace, schema up to date."),
    ]
    if db.role_can_write:
        found.append(Finding(OK, "role", "This role may read and write the workspace."))
    else:
        found.append(Finding(WARN, "role", "This role may only read the workspace: reading "
                             "commands and dashboards work, writing ones fail."))
    found.append(Finding(OK, "durability", f"Durability {db.durability} is kept by every "
                         "writing session (synchronous_commit)."))
    queue = RunQueue(db)
    rows = await db.fetch_all(queue_sql.RUNNING_LEASES, {"limit": RUNS_SHOWN})
    for run_id, owner_id, heartbeat, lease in rows:
        beat = max(0, now_ms - (heartbeat or now_ms)) // 1000
        if lease is not None and lease <= now_ms:
            found.append(Finding(WARN, "runs", f"Run {run_id} is marked running but its "
                                 f"lease lapsed (heartbeat {beat} s ago); a tether worker "
                                 "takes it over at its next claim."))
        elif now_ms - (heartbeat or 0) > STALE_AFTER_MS and lease is None:
            found.append(Finding(WARN, "runs", f"Run {run_id} is marked running but its "
                                 f"heartbeat is {beat} s old; resume it with tether run "
                                 f"WORKFLOW --resume {run_id}."))
        else:
            found.append(Finding(OK, "runs", f"Run {run_id} is being executed by "
                                 f"{owner_id or 'an unnamed process'} (heartbeat {beat} s "
                                 "ago)."))
    depth = await queue.queue_depth()
    workers = [w for w in await queue.list_workers(since_ms=now_ms) if w.is_alive(now_ms)]
    level = WARN if depth and not workers else OK
    found.append(Finding(level, "queue", f"{plural(depth, 'queued run')}, "
                         f"{plural(len(workers), 'live worker')}" + (
        ": start tether worker to run them." if level == WARN else ".")))
    return found
