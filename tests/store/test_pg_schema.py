"""Opening a PostgreSQL workspace: migrations recorded, concurrent openers, and refusals that
leave the database untouched (foreign tables, a newer Tether, no workspace when reading)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_support import fresh_schema

from store.db.backends import open_database
from store.db.postgres.pg_schema import SCHEMA_VERSION
from store.errors import NotFoundError, WorkspaceError
from store.workspace.layout import Workspace

pytestmark = pytest.mark.postgresql


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema("o") as value:
        yield value


def _tables(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema()").fetchall()
    return {str(row[0]) for row in rows}


async def test_concurrent_first_opens_migrate_once(url: str, tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".tether", database_url=url)
    dbs = await asyncio.gather(*(open_database(workspace) for _ in range(4)))
    for db in dbs:
        await db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        meta = dict(conn.execute("SELECT key, value FROM tether_meta").fetchall())
    assert meta == {"application": "tether", "schema_version": str(SCHEMA_VERSION)}


async def test_reading_a_missing_workspace_creates_nothing(url: str, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no Tether workspace"):
        await open_database(Workspace(tmp_path / ".tether", database_url=url), create=False)
    assert _tables(url) == set()


async def test_foreign_tables_are_refused_and_left_alone(url: str, tmp_path: Path) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(WorkspaceError, match="do not belong to Tether"):
        await open_database(Workspace(tmp_path / ".tether", database_url=url))
    assert _tables(url) == {"invoices"}


async def test_a_newer_schema_is_refused(url: str, tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".tether", database_url=url)
    await (await open_database(workspace)).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE tether_meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(WorkspaceError, match="newer Tether"):
        await open_database(workspace)
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute(
            "SELECT value FROM tether_meta WHERE key = 'schema_version'").fetchone()
    assert version == ("999",)


async def test_a_search_path_naming_no_schema_says_which_and_how_to_create_it(
    tmp_path: Path,
) -> None:
    from pg_support import base_url, with_schema

    url = with_schema(base_url(), "tether_not_made_yet")
    with pytest.raises(WorkspaceError) as caught:
        await open_database(Workspace(tmp_path / ".tether", database_url=url))
    assert str(caught.value) == (
        "The database URL's search path (tether_not_made_yet) names no schema that exists; "
        'create it first (CREATE SCHEMA "tether_not_made_yet";).')
