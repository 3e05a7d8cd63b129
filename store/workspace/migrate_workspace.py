"""``tether migrate --to postgresql://…``: copy a SQLite workspace into PostgreSQL.

Everything moves in one PostgreSQL transaction, so a failure leaves the target as it was:

- every table the two schemas share, by the columns they share (a SQLite column with no place
  in PostgreSQL is refused before anything is written, so nothing is silently dropped); rows keep
  their ids, and identity sequences continue after the largest copied id;
- what PostgreSQL derives instead of SQLite's FTS5 (a fact's ``search_vector``);
- every file under ``artifacts/`` into ``artifact_chunks``;
- then, still inside the transaction, the row count of every table and the number and bytes
  of artifact files are compared with the source; any difference rolls everything back.

The target must hold no Tether data yet (an empty schema, or a fresh workspace's).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as pgsql

from store.db.postgres.pg_database import PostgresDatabase
from store.db.sqlite.sqlite_database import SqliteDatabase
from store.errors import InvalidInputError, WorkspaceError
from store.runs.artifact_chunks import MAX_CHUNK_BYTES
from store.search.tsvector import derive_fact

# Parents before children (foreign keys); tables not named here follow, sorted.
COPY_ORDER = (
    "facts",
    "threads",
    "messages",
    "notes",
    "note_supersessions",
    "runs",
    "nodes",
    "attempts",
    "calls",
    "usage_rollups",
    "usage_hours",
    "memory_blocks",
    "handoffs",
    "steers",
    "task_cache",
    "events",
    "workers",
    "memory_vectors",
    "vector_progress",
)
# What PostgreSQL stores beside a copied row, computed from it.
DERIVED: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "facts": derive_fact,
}


@dataclass
class MigrationReport:
    """Rows per table and artifact files copied, as verified in the target."""

    tables: dict[str, int] = field(default_factory=dict)
    artifact_files: int = 0
    artifact_bytes: int = 0


def _is_source_table(name: str) -> bool:
    # FTS5 tables and their shadow tables are SQLite's index, rebuilt as tsvector columns.
    return not name.startswith("sqlite_") and "_fts" not in name


def _source_tables(conn: sqlite3.Connection) -> dict[str, list[str]]:
    names = [
        str(row[0])
        for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if _is_source_table(str(row[0]))
    ]
    return {
        name: [str(col[1]) for col in conn.execute(f'PRAGMA table_info("{name}")')]
        for name in names
    }


def _target_tables(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema()"
    ).fetchall()
    tables: dict[str, set[str]] = {}
    for table, column in rows:
        tables.setdefault(str(table), set()).add(str(column))
    return tables


# Logs the target rebuilds for itself (the note-change log only serves running processes'
# in-memory indexes, which a new workspace builds from scratch).
NOT_COPIED = frozenset({"note_changes"})
# Tables whose SQLite rowid other rows refer to (vectors name their note or fact by it): the
# rowid is kept, as the PostgreSQL ``seq`` that stands for it.
KEEP_ROWID = frozenset({"notes", "facts", "memory_vectors"})


def plan_copy(
    source: Mapping[str, list[str]], target: Mapping[str, set[str]]
) -> list[tuple[str, list[str]]]:
    """``(table, columns)`` to copy, parents first (pure; tested directly).

    Raises:
        WorkspaceError: a source table or column has no place in the target schema.
    """
    source = {t: c for t, c in source.items() if t not in NOT_COPIED}
    for table, columns in source.items():
        if table not in target:
            raise WorkspaceError(
                f"The table {table} has no place in the PostgreSQL schema of this Tether; "
                "nothing was copied."
            )
        missing = [column for column in columns if column not in target[table]]
        if missing:
            raise WorkspaceError(
                f"The column {table}.{missing[0]} has no place in the PostgreSQL schema of "
                "this Tether; nothing was copied."
            )
    ordered = [t for t in COPY_ORDER if t in source]
    ordered += sorted(t for t in source if t not in COPY_ORDER)
    return [
        (table, [*source[table], *(["seq"] if table in KEEP_ROWID and "seq" in target[table]
                                   else [])])
        for table in ordered
    ]


def artifact_files(root: Path) -> list[tuple[str, Path]]:
    """``(path inside artifacts/, file)`` for every regular file under ``root``, sorted."""
    found: list[tuple[str, Path]] = []
    if not root.is_dir():
        return found
    for folder, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


async def migrate_workspace(source: SqliteDatabase, target: PostgresDatabase) -> MigrationReport:
    """Copy ``source`` into ``target`` and verify (see the module docstring)."""
    return await target.native(lambda conn: _copy(source, target, conn))


def _copy(
    source: SqliteDatabase, target: PostgresDatabase, conn: psycopg.Connection[Any]
) -> MigrationReport:
    lite = sqlite3.connect(f"file:{source.workspace.database_path}?mode=ro", uri=True)
    lite.row_factory = sqlite3.Row
    try:
        plan = plan_copy(_source_tables(lite), _target_tables(conn))
        report = MigrationReport()
        with conn.transaction():
            _refuse_data(conn, [table for table, _ in plan])
            for table, columns in plan:
                _copy_table(lite, conn, table, columns)
            _continue_identities(conn, plan)
            files = artifact_files(source.workspace.artifacts_dir)
            _copy_artifacts(conn, files, target.clock.now_ms())
            report = _verify(lite, conn, plan, files)
            conn.execute("SELECT pg_notify(%s, '')", (target.channel,))
        return report
    finally:
        lite.close()


def _refuse_data(conn: psycopg.Connection[Any], tables: list[str]) -> None:
    for table in [*tables, "artifact_chunks"]:
        query = pgsql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(pgsql.Identifier(table))
        row = conn.execute(query).fetchone()
        if row is not None and row[0]:
            raise InvalidInputError(
                f"The target already holds Tether data (table {table} is not empty); "
                "migrate into an empty database or schema."
            )


def _copy_table(
    lite: sqlite3.Connection, conn: psycopg.Connection[Any], table: str, columns: list[str]
) -> None:
    derive = DERIVED.get(table)
    extra: list[str] = []
    if derive is not None:
        probe = {column: "" for column in columns}
        extra = list(derive({**probe, "body": "", "key": "", "value_json": ""}))
    names = pgsql.SQL(", ").join(pgsql.Identifier(c) for c in [*columns, *extra])
    order = "ORDER BY generation, created_at_ms" if table == "runs" else "ORDER BY rowid"
    has_rowid = table not in ("usage_rollups", "usage_hours")  # WITHOUT ROWID tables
    query = f'SELECT * FROM "{table}" {order if has_rowid or table == "runs" else ""}'
    copy = pgsql.SQL("COPY {} ({}) FROM STDIN").format(pgsql.Identifier(table), names)
    with conn.cursor().copy(copy) as writer:
        for row in lite.execute(query.replace("SELECT *", "SELECT rowid AS seq, *", 1)
                                if "seq" in columns else query):
            values = {column: row[column] for column in columns}
            derived = derive(values) if derive is not None else {}
            writer.write_row([*values.values(), *(derived[name] for name in extra)])


def _continue_identities(
    conn: psycopg.Connection[Any], plan: list[tuple[str, list[str]]]
) -> None:
    identities = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall()
    copied = {table: set(columns) for table, columns in plan}
    for table, column in identities:
        if column not in copied.get(str(table), set()):
            continue
        query = pgsql.SQL(
            "SELECT setval(pg_get_serial_sequence({t}, {c}), "
            "greatest(coalesce(max({col}), 0), 1), max({col}) IS NOT NULL) FROM {tbl}"
        ).format(
            t=pgsql.Literal(str(table)),
            c=pgsql.Literal(str(column)),
            col=pgsql.Identifier(str(column)),
            tbl=pgsql.Identifier(str(table)),
        )
        conn.execute(query)


def _copy_artifacts(
    conn: psycopg.Connection[Any], files: list[tuple[str, Path]], now_ms: int
) -> None:
    copy = "COPY artifact_chunks (path, offset_bytes, data, written_at_ms) FROM STDIN"
    with conn.cursor().copy(copy) as writer:
        for name, path in files:
            with path.open("rb") as handle:  # in pieces: a big log is never read whole
                offset = 0
                while True:
                    piece = handle.read(MAX_CHUNK_BYTES)
                    if not piece and offset:
                        break
                    writer.write_row([name, offset, piece, now_ms])
                    offset += len(piece)
                    if not piece:
                        break


def _verify(
    lite: sqlite3.Connection,
    conn: psycopg.Connection[Any],
    plan: list[tuple[str, list[str]]],
    files: list[tuple[str, Path]],
) -> MigrationReport:
    report = MigrationReport()
    for table, _columns in plan:
        expected = int(lite.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        query = pgsql.SQL("SELECT count(*) FROM {}").format(pgsql.Identifier(table))
        row = conn.execute(query).fetchone()
        copied = int(row[0]) if row else -1
        if copied != expected:
            raise WorkspaceError(
                f"Verification failed: {table} has {expected} rows in SQLite but {copied} "
                "in PostgreSQL; nothing was kept."
            )
        report.tables[table] = copied
    row = conn.execute(
        "SELECT count(DISTINCT path), coalesce(sum(length(data)), 0) FROM artifact_chunks"
    ).fetchone()
    expected_bytes = sum(path.stat().st_size for _, path in files)
    if row is None or (int(row[0]), int(row[1])) != (len(files), expected_bytes):
        raise WorkspaceError(
            f"Verification failed: {len(files)} artifact files ({expected_bytes} bytes) in the "
            f"workspace folder but {row and row[0]} ({row and row[1]} bytes) in PostgreSQL; "
            "nothing was kept."
        )
    report.artifact_files, report.artifact_bytes = len(files), expected_bytes
    return report

