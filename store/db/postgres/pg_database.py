"""A workspace in PostgreSQL: the team backend behind the same :class:`store.db.seam.Database`.

Driver: psycopg 3 with ``psycopg_pool`` (chosen by measurement; see docs/design-notes.md).
The store's transaction callbacks are synchronous functions over a connection, shared with
SQLite; here the writes queued together (group commit, :mod:`store.db.write_queue`) run in
one transaction on a pooled connection in a worker thread, their statements pipelined
(:mod:`store.db.postgres.pg_group`), one thread hop per group, like aiosqlite's. Live
tailing uses psycopg's async connection for ``LISTEN`` (``store/db/postgres/pg_listen.py``).

Transactions run at READ COMMITTED. Every read-modify-write the store makes is either one
statement (an upsert, ``x = x + 1``, a conditional ``UPDATE ... WHERE owner``), a read of rows
that never change (notes), or fenced by a run's lease (``store/leases.py``), so nothing is lost
without serialising every writer. A serialization failure or deadlock re-runs the callback.

Every write transaction is followed, once it has committed, by one ``NOTIFY`` on the workspace's
channel carrying the last event sequence number it wrote (empty when it wrote none), sent on the
same connection: dashboards and workers on any host wake up without polling. It is sent after
the commit rather than inside the transaction because PostgreSQL serialises the commits of
notifying transactions on one global lock, each with its own WAL flush: measured with four
workers, that lock was where the time went and added workers brought nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from store.clock import SYSTEM_CLOCK, Clock
from store.db.database_url import redact_url, scrub
from store.db.durability import DEFAULT_DURABILITY, PG_SYNCHRONOUS_COMMIT, read_durability
from store.db.postgres import pg_schema as schema
from store.db.postgres.pg_connection import PgConnection, one_transaction, row_factory
from store.db.postgres.pg_group import WriteFailed, pipelined_transaction, run_all
from store.db.postgres.pg_retry import (
    DEFAULT_RETRY_WINDOW_S,
    FIRST_RETRY_S,
    MAX_RETRY_S,
    ride_out,
    unresolved_sentence,
)
from store.db.postgres.pg_wording import missing_schema_message
from store.db.retry import backoff_s
from store.db.seam import Database, Params, resolved
from store.db.write_queue import Outcome, Work, WriteQueue
from store.errors import DatabaseUnavailable, NotFoundError, StorageError, WorkspaceError
from store.workspace.layout import Workspace

T = TypeVar("T")
Transaction = Callable[[psycopg.Connection[Any], PgConnection, Callable[[Any], Any]], Any]
"""How one write transaction is run (one statement at a time, or pipelined)."""

# psycopg-pool warns on stderr ("discarding closed connection: <psycopg.Connection [BAD]>")
# about each connection a drop broke; Tether rides those out and says in one sentence what
# outlasts its retries, so the driver's own log lines stay out of the terminal.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

POOL_MAX = 4
"""Connections per process: enough for concurrent tasks, few enough for many workers."""
CONNECT_TIMEOUT_S = 10.0
POOL_WAIT_S = 5.0
"""How long one try waits for a pooled connection (the pool reconnects in the background)."""
_RETRY_ATTEMPTS = 8
_RETRY_BASE_S = 0.01
_RETRY_MAX_S = 1.0
_MIGRATION_LOCK = 0x54455448  # "TETH": serialises concurrent migrations of one database
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


# -- the database --------------------------------------------------------------------------------


def channel_for(schema_name: str) -> str:
    """The LISTEN/NOTIFY channel of the workspace in ``schema_name`` (at most 63 bytes)."""
    channel = f"tether:{schema_name}"
    if len(channel.encode()) > 63:
        channel = "tether:" + hashlib.sha256(schema_name.encode()).hexdigest()[:32]
    return channel


def connection_problem(error: BaseException, url: str) -> str:
    """One sentence for a connection failure, never showing the password."""
    detail = " ".join(scrub(str(error), url).split()) or type(error).__name__
    return f"Cannot reach the workspace database {redact_url(url)}: {detail}"


class PostgresDatabase(Database):
    """A workspace database in PostgreSQL (the schema named by the URL's search path)."""

    backend = "postgresql"

    def __init__(
        self, pool: ConnectionPool[Any], workspace: Workspace, clock: Clock, schema_name: str
    ) -> None:
        self._pool = pool
        self.workspace = workspace
        self.clock = clock
        self.schema_name = schema_name
        self.channel = channel_for(schema_name)
        self.read_only = False
        """True when writes are refused: a read-only session, or a role that may not write."""
        self.durability = DEFAULT_DURABILITY
        """The workspace's durability level (store.db.durability), PostgreSQL's
        synchronous_commit."""
        self.role_can_write = True
        """Whether the role may write the workspace (a dashboard hides write keys if not)."""
        self.retry_window_s = DEFAULT_RETRY_WINDOW_S
        """How long reads and writes ride out a dropped connection (pg_retry)."""
        self.writes = WriteQueue(self._commit_group, lambda error: error)

    @property
    def url(self) -> str:
        """The workspace's database URL (may hold a password: never print it; use
        :meth:`Workspace.describe`)."""
        assert self.workspace.database_url
        return self.workspace.database_url

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls, workspace: Workspace, *, create: bool = True, clock: Clock = SYSTEM_CLOCK,
        read_only: bool = False
    ) -> PostgresDatabase:
        """Connect, check the schema and migrate it (``create``); see
        :func:`store.db.backends.open_database`.

        With ``read_only`` every session refuses writes (``default_transaction_read_only``):
        the dashboard's reading connection.
        """
        url = workspace.database_url
        if not url:
            raise WorkspaceError("This workspace has no database URL.")
        level = read_durability(workspace.config_path)
        pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_MAX,
            kwargs={"autocommit": True, "row_factory": row_factory, "application_name": "tether"},
            configure=(
                _read_only_session
                if read_only
                else functools.partial(_session, synchronous_commit=PG_SYNCHRONOUS_COMMIT[level])
            ),
            open=False,
            name="tether",
        )
        try:
            # One plain connection first: a refusal (authentication, TLS, no such database)
            # is reported at once, where the pool would keep retrying until its timeout.
            await asyncio.to_thread(_probe, url)
            await asyncio.to_thread(pool.open, wait=True, timeout=CONNECT_TIMEOUT_S)
        except Exception as error:
            await asyncio.to_thread(pool.close)
            raise DatabaseUnavailable(connection_problem(_root_cause(error), url) + ".") from None
        def opening(call: Callable[[], T]) -> Awaitable[T]:
            # A session cut while the workspace opens (an administrator, a restart) is
            # ridden out like any later one.
            return asyncio.to_thread(
                ride_out, call, pool, url, CONNECT_TIMEOUT_S, role_can_write=False)

        try:
            schema_name = await opening(functools.partial(_inspect, pool))
            db = cls(pool, workspace, clock, schema_name)
            db.durability = level
            db.role_can_write = await opening(functools.partial(_role_can_write, pool))
            db.read_only = read_only or not db.role_can_write
            await opening(functools.partial(db._check_and_migrate, create and not read_only))
        except BaseException:
            await asyncio.to_thread(pool.close)
            raise
        return db

    def _check_and_migrate(self, create: bool) -> None:
        where = self.workspace.describe()
        with self._pool.connection() as conn:
            version = _schema_version(conn, where)
            if version is None and not create:
                raise NotFoundError(f"There is no Tether workspace in {where}.")
            if version is not None and version > schema.SCHEMA_VERSION:
                raise WorkspaceError(
                    f"{where} was written by a newer Tether (schema {version}, this one knows "
                    f"{schema.SCHEMA_VERSION}); upgrade Tether to open it."
                )
            if version == schema.SCHEMA_VERSION:
                return
            if self.read_only and self.role_can_write:
                raise WorkspaceError(
                    f"{where} holds schema {version} of {schema.SCHEMA_VERSION}; the next "
                    "command that writes upgrades it (this session only reads)."
                )
            if self.read_only:
                raise WorkspaceError(
                    f"{where} needs migrating and this role may only read; open it once with a "
                    "role that may write."
                )
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                conn.execute(schema.META_TABLE)
                current = _schema_version(conn, where) or 0
                for index in range(current, schema.SCHEMA_VERSION):
                    conn.execute(schema.MIGRATIONS[index])
                conn.execute(
                    "INSERT INTO tether_meta (key, value) VALUES ('application', %s), "
                    "('schema_version', %s) ON CONFLICT (key) DO UPDATE SET value = "
                    "excluded.value",
                    (schema.APPLICATION, str(schema.SCHEMA_VERSION)),
                )

    async def close(self) -> None:
        """Commit what is queued, then close the pool and its threads."""
        with contextlib.suppress(Exception):  # each queued write's future has its error
            await self.writes.flush()
        await asyncio.to_thread(self._pool.close)

    # -- running callbacks -----------------------------------------------------------------

    def _adapter(self, conn: psycopg.Connection[Any]) -> PgConnection:
        return PgConnection(conn)

    async def _in_thread(self, call: Callable[[], T]) -> T:
        return await asyncio.to_thread(self._retrying, call)

    def _retrying(self, call: Callable[[], T]) -> T:
        """Run ``call`` on this thread, again on a fresh connection while it fails for a
        reason worth waiting out, for up to :attr:`retry_window_s` (pg_retry)."""
        return ride_out(call, self._pool, self.url, self.retry_window_s,
                        role_can_write=self.role_can_write, committed=self._committed)

    def _committed(self, xid: str, deadline: float) -> bool:
        """Whether transaction ``xid``, whose commit was cut off, committed (asked again on a
        fresh connection until the server says, or the window closes)."""
        for attempt in itertools.count():
            status: Any = None
            with (
                contextlib.suppress(psycopg.OperationalError, PoolTimeout),
                self._pool.connection(timeout=_pool_wait(deadline)) as conn,
            ):
                row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                status = "unknown" if row is None or row[0] is None else row[0]
            if status in ("committed", "aborted"):
                return bool(status == "committed")
            if status == "unknown" or time.monotonic() >= deadline:
                raise DatabaseUnavailable(unresolved_sentence(self.url))
            # Not reachable yet, or the cut session is still ending ("in progress").
            time.sleep(backoff_s(attempt, first_s=FIRST_RETRY_S, max_s=MAX_RETRY_S))
        raise AssertionError("unreachable")

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Any]:
        def read() -> list[Any]:
            with self._pool.connection(timeout=POOL_WAIT_S) as conn:
                return self._adapter(conn).execute(sql, params).fetchall()

        return await self._in_thread(read)

    async def run_read(self, work: Callable[[Any], T]) -> T:
        def read() -> T:
            with self._pool.connection(timeout=POOL_WAIT_S) as conn:
                return work(self._adapter(conn))

        return await self._in_thread(read)

    async def data_version(self) -> int:
        """Moves whenever a transaction that writes starts or ends anywhere on the server
        (the current snapshot changes), so a reader re-reads after every commit; a start
        without a commit only costs one needless re-read."""
        value = await self.fetch_value(
            "SELECT hashtextextended(pg_current_snapshot()::text, 0)"
        )
        return int(value)

    async def run_in_transaction(self, work: Callable[[Any], T]) -> T:
        """Run ``work`` in a write transaction (shared with the writes queued beside it) and
        return its result once committed."""
        return await self.submit(work)

    def submit(self, work: Callable[[Any], T], *, flush: bool = True) -> asyncio.Future[T]:
        """Queue a write for the next group commit (store/db/postgres/pg_group.py) and return
        its future. ``flush=False``: at ``full`` a group made only of such writes commits
        without waiting for the WAL flush (it survives any Tether process being killed, and
        is flushed with the server's next flush); at ``normal`` nothing changes."""
        return self.writes.submit(work, flush, self.check_writable)

    async def flush(self) -> None:
        """Wait until every queued write is committed."""
        await self.writes.flush()

    async def _commit_group(
        self, works: list[Work], flush: bool, queued_at: float
    ) -> list[Outcome]:
        return await asyncio.to_thread(self._group, works, flush, queued_at)

    def _group(self, works: list[Work], flush: bool, queued_at: float) -> list[Outcome]:
        unflushed = not flush and self.durability == "full"
        # An outage is waited out for the window counted from when the oldest write of the
        # group was queued, not from when the group started: a write queued behind a group
        # that waited gives up when it would have alone (a lease lapses meanwhile).
        window = max(0.0, self.retry_window_s - (time.monotonic() - queued_at))
        try:
            group = functools.partial(run_all, works=works, unflushed=unflushed)
            values = ride_out(
                functools.partial(self._transact_once, group, pipelined_transaction),
                self._pool, self.url, window, role_can_write=self.role_can_write,
                committed=self._committed,
            )
        except WriteFailed as failed:
            if len(works) == 1:
                return [(False, failed.__cause__)]
            return [self._alone(work) for work in works]
        return [(True, resolved(value)) for value in values]  # read after the pipeline

    def _alone(self, work: Work) -> Outcome:
        try:
            return (True, self.transact(work))
        except DatabaseUnavailable:
            raise
        except Exception as error:
            return (False, error)

    def check_writable(self) -> None:
        """Refuse a write, with one sentence, on a session or role that may only read."""
        if not self.read_only:
            return
        if not self.role_can_write:
            raise StorageError(
                f"The database role may only read {self.workspace.describe()}, so this change "
                "was not made (reading commands still work; use a role that may write).",
                "the database role may only read",
            )
        raise StorageError(
            f"{self.workspace.describe()} was opened read-only; this change was not made."
        )

    def transact(self, work: Callable[[Any], T]) -> T:
        """Run ``work`` in one transaction on this thread and notify the workspace's channel at
        commit; a dropped connection is ridden out (:meth:`_retrying`), serialization failures
        and deadlocks re-run ``work`` from the start."""
        return self._retrying(functools.partial(self._transact_once, work))

    def _transact_once(
        self, work: Callable[[Any], T], transaction: Transaction = one_transaction
    ) -> T:
        """``work`` in one ``transaction``, re-run on serialization failures; then the
        workspace's ``NOTIFY``."""
        with self._pool.connection(timeout=POOL_WAIT_S) as conn:
            for attempt in range(_RETRY_ATTEMPTS):
                adapter = self._adapter(conn)
                try:
                    result = transaction(conn, adapter, work)
                except _RETRYABLE:
                    if attempt == _RETRY_ATTEMPTS - 1:
                        raise
                    time.sleep(backoff_s(attempt, first_s=_RETRY_BASE_S, max_s=_RETRY_MAX_S))
                    continue
                # Committed: a lost notification must not turn the write into an error
                # (listeners catch up at the next one, or when they reconnect).
                with contextlib.suppress(psycopg.Error):
                    self._notify(conn, adapter.wrote_events)
                return result
        raise AssertionError("unreachable")

    def transact_read(self, work: Callable[[Any], T]) -> T:
        """Run ``work`` (reads only) on a pooled connection on the calling thread: for the
        rare synchronous caller; everything else uses :meth:`run_read`."""

        def read() -> T:
            with self._pool.connection(timeout=POOL_WAIT_S) as conn:
                return work(self._adapter(conn))

        return self._retrying(read)

    def _notify(self, conn: psycopg.Connection[Any], wrote_events: bool) -> None:
        # currval is the session's: after the commit it still names this transaction's last
        # event (every event of the workspace gets its number from that one sequence).
        if wrote_events:
            conn.execute(
                "SELECT pg_notify(%s, currval(pg_get_serial_sequence('events', 'seq'))::text)",
                (self.channel,),
            )
        else:
            conn.execute("SELECT pg_notify(%s, '')", (self.channel,))

    def native(self, work: Callable[[psycopg.Connection[Any]], T]) -> Awaitable[T]:
        """Run ``work`` on a pooled psycopg connection (autocommit) in a worker thread: for
        PostgreSQL-only operations (migration copies with ``COPY``)."""

        def call() -> T:
            with self._pool.connection(timeout=POOL_WAIT_S) as conn:
                return work(conn)

        return self._in_thread(call)


def _pool_wait(deadline: float) -> float:
    return max(0.1, min(POOL_WAIT_S, deadline - time.monotonic()))


def _probe(url: str) -> None:
    with psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT_S)):
        pass


def _session(conn: psycopg.Connection[Any], synchronous_commit: str | None = None) -> None:
    # Tether's statements are short and indexed: JIT compilation (tens to hundreds of ms,
    # triggered by pessimistic cost estimates of the search statements) only ever adds time.
    conn.execute("SET jit = off")
    if synchronous_commit is not None:
        # The workspace's durability level (store.db.durability), read back: a session that
        # would write with less than the workspace promises is refused.
        conn.execute(f"SET synchronous_commit = {synchronous_commit}")
        found = conn.execute("SHOW synchronous_commit").fetchone()
        if found is None or found[0] != synchronous_commit:
            raise WorkspaceError(
                f"The server kept synchronous_commit = {found and found[0]}, not "
                f"{synchronous_commit} as the workspace's durability level needs."
            )


def _read_only_session(conn: psycopg.Connection[Any]) -> None:
    _session(conn)
    conn.execute("SET default_transaction_read_only = on")


def _inspect(pool: ConnectionPool[Any]) -> str:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT current_schema(), current_setting('server_encoding'), "
            "current_setting('search_path')"
        ).fetchone()
    assert row is not None
    if row[0] is None:
        raise WorkspaceError(missing_schema_message(str(row[2])))
    if row[1] != "UTF8":
        raise WorkspaceError(
            f"The workspace database uses the {row[1]} encoding; Tether needs UTF8."
        )
    return str(row[0])


def _role_can_write(pool: ConnectionPool[Any]) -> bool:
    """Whether the connected role may write the workspace: it may insert runs (or, before the
    schema exists, create it), and the server is not a read-only standby."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT CASE WHEN to_regclass('runs') IS NULL "
            "THEN coalesce(has_schema_privilege(current_schema(), 'CREATE'), false) "
            "ELSE has_table_privilege('runs', 'INSERT') END "
            "AND NOT pg_is_in_recovery()"
        ).fetchone()
    return bool(row and row[0])


def _schema_version(conn: psycopg.Connection[Any], where: str) -> int | None:
    """The workspace's schema version, None for an empty schema; refuses foreign ones."""
    tables = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    ).fetchall()
    names = {str(row[0]) for row in tables}
    if "tether_meta" not in names:
        if names:
            raise WorkspaceError(
                f"{where} already holds tables that do not belong to Tether; it was left "
                "untouched (name another database or schema)."
            )
        return None
    meta = dict(conn.execute("SELECT key, value FROM tether_meta").fetchall())
    if meta.get("application") != schema.APPLICATION:
        if not meta:
            return 0
        raise WorkspaceError(f"{where} does not belong to Tether; it was left untouched.")
    return int(meta.get("schema_version", "0"))


def _root_cause(error: BaseException) -> BaseException:
    cause = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return cause


