"""Salvage a damaged workspace database: copy every row SQLite can still read into a new one.

The damaged file is only read (a read-only connection). The new database is created by Tether's
own migrations, so it has the current schema, indexes and full-text triggers; rows are copied
table by table in rowid order, and a damaged page only costs the rows on it: a read that fails
skips ahead by a growing step until reading works again. Tables whose root page is destroyed
are reported as unreadable. SQLite's ``.recover`` can go further (it also scans orphaned pages)
but needs an ``sqlite3`` built with the ``sqlite_dbpage`` table, which many distributions lack.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from store.db.backends import open_database
from store.db.sqlite.database_file import readonly_uri
from store.errors import InvalidInputError
from store.workspace.layout import Workspace

_CHUNK = 500
_FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")
_MAX_SKIP = 1 << 40


@dataclass(frozen=True)
class TableSalvage:
    """What was saved of one table."""

    table: str
    rows: int
    problem: str | None = None


def _tables(conn: sqlite3.Connection) -> list[tuple[str, bool]]:
    """Ordinary tables of the new schema as (name, has_rowid); FTS indexes are rebuilt by the
    triggers as rows arrive, so their tables are not copied."""
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY rootpage"
    ).fetchall()
    tables = []
    for name, sql in rows:
        text = str(sql or "").upper()
        if "VIRTUAL TABLE" in text or str(name).endswith(_FTS_SHADOWS):
            continue
        tables.append((str(name), "WITHOUT ROWID" not in text))
    return tables


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in conn.execute(f'PRAGMA table_info("{table}")')]


def _copy_table(
    source: sqlite3.Connection, target: sqlite3.Connection, table: str, has_rowid: bool
) -> TableSalvage:
    try:
        wanted = set(_columns(source, table))
    except sqlite3.Error as error:
        return TableSalvage(table, 0, str(error))
    columns = [c for c in _columns(target, table) if c in wanted]
    if not columns:
        return TableSalvage(table, 0, "not in the damaged database")
    names = ", ".join(f'"{c}"' for c in columns)
    insert = (
        f'INSERT OR IGNORE INTO "{table}" ({names}) VALUES ({", ".join("?" * len(columns))})'
    )
    copied = 0
    problem: str | None = None
    if not has_rowid:
        try:
            rows = source.execute(f'SELECT {names} FROM "{table}"').fetchall()
        except sqlite3.Error as error:
            return TableSalvage(table, 0, str(error))
        target.executemany(insert, rows)
        return TableSalvage(table, len(rows))
    last = -(1 << 63)
    skip = 1
    while True:
        try:
            rows = source.execute(
                f'SELECT rowid, {names} FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT ?',
                (last, _CHUNK),
            ).fetchall()
        except sqlite3.Error as error:
            problem = problem or str(error)
            if skip > _MAX_SKIP:
                break
            last, skip = last + skip, skip * 4  # jump past the damaged page
            continue
        if not rows:
            break
        skip = 1
        target.executemany(insert, [tuple(row[1:]) for row in rows])
        copied += len(rows)
        last = int(rows[-1][0])
    return TableSalvage(table, copied, problem)


async def salvage(damaged: Path, target: Workspace) -> list[TableSalvage]:
    """Copy every readable row of ``damaged`` into a new workspace database at ``target``.

    Raises:
        InvalidInputError: ``target`` already holds a database.
    """
    if target.database_path.exists() or target.database_path.is_symlink():
        raise InvalidInputError(f"{target.database_path} already exists; name a new folder.")
    await (await open_database(target, create=True)).close()
    source = sqlite3.connect(readonly_uri(damaged), uri=True, timeout=30)
    destination = sqlite3.connect(target.database_path, isolation_level=None, timeout=30)
    try:
        destination.execute("PRAGMA foreign_keys = OFF")
        results = []
        for table, has_rowid in _tables(destination):
            destination.execute("BEGIN IMMEDIATE")
            result = _copy_table(source, destination, table, has_rowid)
            destination.execute("COMMIT")
            results.append(result)
        return results
    finally:
        source.close()
        destination.close()
