"""The connection the store's transaction callbacks see on PostgreSQL: rows like
``sqlite3.Row``, a cursor read eagerly, each statement rendered by :mod:`store.db.dialect`, and
one transaction run between ``BEGIN`` and ``COMMIT`` with its commit's fate kept knowable
(:mod:`store.db.postgres.pg_retry`)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

import psycopg

from store.db.dialect import Rendered, postgres_params, postgres_statement
from store.db.postgres.pg_retry import CommitUnknown, writes
from store.db.seam import Params, resolved
from store.runs.events_sql import appends_events

T = TypeVar("T")


# -- rows -------------------------------------------------------------------------------------


class PgRow(tuple[Any, ...]):
    """A result row by index or column name, like ``sqlite3.Row``."""

    __slots__ = ()
    _names: ClassVar[tuple[str, ...]] = ()
    _index: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._names)


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[PgRow]:
    return type(
        "PgRow", (PgRow,), {"__slots__": (), "_names": names, "_index": _first_index(names)}
    )


def _first_index(names: tuple[str, ...]) -> dict[str, int]:
    index: dict[str, int] = {}
    for position, name in enumerate(names):
        index.setdefault(name, position)
    return index


def row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    """psycopg row factory building :class:`PgRow` s."""
    names = tuple(column.name for column in cursor.description or ())
    return _row_class(names)


# -- the connection the store's callbacks see ---------------------------------------------------


class PgCursor:
    """The result of one statement: rows read eagerly and ``rowcount``."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        row = self._rows[self._next]
        self._next += 1
        return row

    def fetchall(self) -> list[Any]:
        rows, self._next = self._rows[self._next :], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    def close(self) -> None:
        """Nothing to release (rows were read eagerly)."""


class PgPendingCursor:
    """The result of a statement sent in pipeline mode: nothing is waited for until its rows
    or ``rowcount`` are asked for (then the pipeline is synced up to it)."""

    def __init__(self, cursor: psycopg.Cursor[Any], pipeline: psycopg.Pipeline) -> None:
        self._cursor = cursor
        self._pipeline = pipeline
        self._result: PgCursor | None = None

    def _ready(self) -> PgCursor:
        if self._result is None:
            cursor = self._cursor
            if cursor.pgresult is None:
                self._pipeline.sync()
            rows = cursor.fetchall() if cursor.description is not None else []
            self._result = PgCursor(rows, cursor.rowcount)
        return self._result

    @property
    def rowcount(self) -> int:
        """Rows the statement changed (waits for its result)."""
        return self._ready().rowcount

    def fetchone(self) -> Any:
        return self._ready().fetchone()

    def fetchall(self) -> list[Any]:
        return self._ready().fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    def close(self) -> None:
        """Nothing to release (the cursor goes with its result)."""


class PgConnection:
    """Adapts a psycopg connection to what the store's callbacks use of ``sqlite3.Connection``:
    each statement is rendered for PostgreSQL by :mod:`store.db.dialect` (its variant where it
    has one), parameters derived where it says so, and event inserts remembered for the
    commit's notification."""

    waits_for_results = True
    """Reading a statement's result waits for the server (a round trip; in a pipelined group,
    a sync of the pipeline): a write that needs no answer had better not ask for one."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self.wrote_events = False
        self.wrote = False
        """Whether a statement that may write ran (its transaction then has an id to look up
        should the commit be cut off, see store/db/postgres/pg_retry.py)."""
        self.pipeline: psycopg.Pipeline | None = None
        """Set while a group's writes run in pipeline mode (store/db/postgres/pg_group.py)."""

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The psycopg connection underneath (for session settings of one transaction)."""
        return self._conn

    def _translate(self, sql: str, params: Any) -> tuple[Rendered, Any]:
        if appends_events(sql):
            self.wrote_events = True
        self.wrote = self.wrote or writes(sql)
        rendered = postgres_statement(sql)
        if not params:
            return rendered, None
        return rendered, _arguments(rendered, postgres_params(sql, params))

    def execute(self, sql: str, parameters: Params = (), /) -> PgCursor | PgPendingCursor:
        # A raw cursor: the text already has the server's $n placeholders (rendered once per
        # statement), so psycopg parses nothing per execution.
        rendered, args = self._translate(sql, parameters)
        if self.pipeline is not None:
            pending = psycopg.RawCursor(self._conn)
            # Without arguments: one statement (pipeline mode sends each on its own).
            pending.execute(rendered.text, args)
            return PgPendingCursor(pending, self.pipeline)
        with psycopg.RawCursor(self._conn) as cursor:
            # Without arguments the text is sent as written: one or more statements.
            cursor.execute(rendered.text, args)
            rows = cursor.fetchall() if cursor.description is not None else []
            return PgCursor(rows, cursor.rowcount)

    def executemany(self, sql: str, parameters: Iterable[Params], /) -> PgCursor:
        batch = list(parameters)
        if not batch:
            return PgCursor([], 0)
        rendered, _ = self._translate(sql, ())
        self.wrote = True
        with psycopg.RawCursor(self._conn) as cursor:
            cursor.executemany(
                rendered.text, [_arguments(rendered, postgres_params(sql, one)) for one in batch]
            )
            return PgCursor([], cursor.rowcount)


def _arguments(rendered: Rendered, params: Any) -> Any:
    """The values of ``params`` in ``rendered``'s placeholder order; a missing name is the
    error psycopg gives for one."""
    try:
        return rendered.arguments(params)
    except KeyError as missing:
        raise psycopg.ProgrammingError(f"query parameter missing: {missing.args[0]}") from None


def one_transaction(conn: psycopg.Connection[Any], adapter: PgConnection,
                     work: Callable[[Any], T]) -> T:
    """``work`` between ``BEGIN`` and ``COMMIT``; a commit cut off by a dropped connection is
    :class:`CommitUnknown` (with the transaction's id) when the transaction wrote."""
    conn.execute("BEGIN")
    try:
        result = resolved(work(adapter))
        xid = None
        if adapter.wrote:
            row = conn.execute("SELECT pg_current_xact_id_if_assigned()::text").fetchone()
            xid = None if row is None else row[0]
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
        raise
    return commit_knowably(conn, xid, result)


def commit_knowably(conn: psycopg.Connection[Any], xid: str | None, result: T) -> T:
    """``COMMIT`` the open transaction (``xid``: its id when it wrote); a commit cut off by a
    dropped connection is :class:`CommitUnknown` when the transaction wrote."""
    try:
        conn.execute("COMMIT")
    except psycopg.OperationalError as error:
        if xid is None:
            return result  # nothing was written: nothing can be lost or doubled
        raise CommitUnknown(str(xid), result, error) from error
    return result
