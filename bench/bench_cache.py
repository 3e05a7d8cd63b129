"""Cached generated workspaces for the benchmarks: a database Tether created and migrated,
filled once with raw ``sqlite3`` and reused until its folder is removed."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

from store.db.backends import open_database
from store.workspace.layout import Workspace


def cached(folder: Path) -> Workspace | None:
    """The workspace in ``folder`` when it was generated before by a Tether of this schema,
    else None (another checkout's schema is generated again)."""
    import json

    from store.db.sqlite.sqlite_schema import SCHEMA_VERSION

    marker = folder / "generated.json"
    if not marker.exists():
        return None
    try:
        facts = json.loads(marker.read_text("utf-8"))
    except ValueError:
        return None
    return Workspace(folder) if facts.get("schema_version") == SCHEMA_VERSION else None


def fresh(folder: Path) -> tuple[Workspace, sqlite3.Connection]:
    """A new, migrated workspace in ``folder`` and a raw connection in a transaction (the
    caller fills it, commits, and writes ``generated.json``)."""
    workspace = Workspace(folder)
    if folder.exists():
        shutil.rmtree(folder)

    async def migrate() -> None:
        db = await open_database(workspace, create=True)
        await db.close()

    asyncio.run(migrate())
    conn = sqlite3.connect(workspace.database_path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    return workspace, conn


def finish(workspace: Workspace, conn: sqlite3.Connection, facts: dict[str, object]) -> None:
    """Commit, analyse, close, and mark the workspace generated (``facts`` go in the marker)."""
    import json

    from store.db.sqlite.sqlite_schema import SCHEMA_VERSION

    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()
    marked = {**facts, "schema_version": SCHEMA_VERSION}
    (workspace.root / "generated.json").write_text(json.dumps(marked), "utf-8")


def size_and_rounds(doc: str, flag: str, size: int, rounds: int = 15) -> tuple[int, int]:
    """The command line of a generated-workspace benchmark: ``--<flag> N --rounds R``."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument(f"--{flag}", type=int, default=size)
    parser.add_argument("--rounds", type=int, default=rounds)
    args = parser.parse_args()
    return int(getattr(args, flag)), int(args.rounds)
