"""Saved run filters: a query of the run query language kept under a name in the workspace, so
``tether runs --filter NAME`` and the dashboard's saved filters (``F`` in Runs) share them, on
either backend."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from store.db.seam import Connection, Database
from store.errors import InvalidInputError, NotFoundError
from store.read.run_query import parse_query

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

SAVE = """
INSERT INTO saved_filters (name, query, created_at_ms, updated_at_ms)
VALUES (:name, :query, :now, :now)
ON CONFLICT (name) DO UPDATE SET query = excluded.query, updated_at_ms = excluded.updated_at_ms
"""
DELETE = "DELETE FROM saved_filters WHERE name = ?"
LIST = "SELECT name, query, created_at_ms, updated_at_ms FROM saved_filters ORDER BY name"
GET = "SELECT name, query, created_at_ms, updated_at_ms FROM saved_filters WHERE name = ?"


class SavedFilter(NamedTuple):
    """A named query."""

    name: str
    query: str
    created_at_ms: int
    updated_at_ms: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return self._asdict()


def validate_filter_name(name: str) -> str:
    """A filter's name: 1 to 64 letters, digits, ``_``, ``.`` or ``-``, starting with a letter
    or digit. Raises InvalidInputError."""
    if not _NAME.match(name):
        raise InvalidInputError(
            f"A filter name is 1 to 64 letters, digits, _, . or -, starting with a letter or "
            f"digit; {name!r} is not one."
        )
    return name


async def saved_filters(rows: Any) -> list[SavedFilter]:
    """Every saved filter by name (``rows``: a Database or the dashboard's reader)."""
    return [SavedFilter(*tuple(row)) for row in await rows.fetch_all(LIST)]


async def saved_filter(rows: Any, name: str) -> SavedFilter:
    """The filter saved as ``name``. Raises NotFoundError."""
    found = await rows.fetch_all(GET, (validate_filter_name(name),))
    if not found:
        raise NotFoundError(f"There is no saved filter {name!r}; tether filters lists them.")
    return SavedFilter(*tuple(found[0]))


async def save_filter(db: Database, name: str, query: str) -> SavedFilter:
    """Save (or replace) ``query`` under ``name``; a query that does not parse is refused with
    its sentence and nothing is written."""
    validate_filter_name(name)
    now = db.clock.now_ms()
    parse_query(query, now)

    def work(conn: Connection) -> None:
        conn.execute(SAVE, {"name": name, "query": query.strip(), "now": now})

    await db.run_in_transaction(work)
    return await saved_filter(db, name)


async def delete_filter(db: Database, name: str) -> None:
    """Forget the filter ``name``. Raises NotFoundError when there is none."""
    validate_filter_name(name)
    if not await db.execute(DELETE, (name,)):
        raise NotFoundError(f"There is no saved filter {name!r}; tether filters lists them.")
