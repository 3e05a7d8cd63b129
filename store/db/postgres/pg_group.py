"""Group commit on PostgreSQL: the writes queued together (store/db/write_queue.py) run in one
transaction on one pooled connection, their statements pipelined (psycopg pipeline mode: a
statement whose result nobody reads yet costs no round trip), then one ``COMMIT``, one WAL
flush at ``synchronous_commit=on``, one ``NOTIFY``.

Each write keeps the all-or-nothing meaning it has alone: should one raise, the group is rolled
back and every write runs again in a transaction of its own, so the failing one gets its error
back and the others commit. Failures of the connection or the server (a dropped session, a
serialization failure, a commit cut off) are the whole group's and are ridden out, or retried,
as a single write's are (store/db/postgres/pg_retry.py).

A failed pipeline also ends what psycopg knows of the connection's prepared statements
(:func:`forget_prepared_statements`): psycopg counts a statement as prepared once it has sent
its Parse, but the server skips every Parse queued behind a failed statement, and each later
use of such a statement on that connection failed with 'prepared statement "_pg3_n" does not
exist'. Preparing stays on otherwise: an unprepared group costs the server a parse and a plan
of every statement, about 1 ms more per fan-out task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from store.db.postgres.pg_connection import PgConnection, commit_knowably
from store.db.postgres.pg_retry import CommitUnknown
from store.db.write_queue import Work

T = TypeVar("T")


class WriteFailed(Exception):
    """One write of a group raised (its own error, not the connection's): the group is rolled
    back and its writes run one by one."""


def ends_the_group(error: BaseException) -> bool:
    """Whether ``error`` is the connection's or the server's rather than one write's own: a
    dropped session, a serialization failure or deadlock, a commit cut off, a privilege the
    role lacks (ridden out or told as one sentence like a single write's, pg_retry)."""
    return isinstance(
        error,
        psycopg.OperationalError | PoolTimeout | pg_errors.SerializationFailure
        | pg_errors.DeadlockDetected | pg_errors.InsufficientPrivilege | CommitUnknown,
    )


def run_all(adapter: PgConnection, works: Sequence[Work], *, unflushed: bool) -> list[Any]:
    """Run ``works`` one after the other inside the open transaction; their values, in order.
    ``unflushed``: the commit need not wait for the WAL flush (``synchronous_commit=off`` for
    this transaction only): every write of the group was submitted with ``flush=False``."""
    if unflushed:
        adapter.execute("SET LOCAL synchronous_commit = off")
    values = []
    for work in works:
        try:
            values.append(work(adapter))
        except Exception as error:
            if ends_the_group(error) or isinstance(error, WriteFailed):
                raise
            raise WriteFailed() from error
    return values


def pipelined_transaction(
    conn: psycopg.Connection[Any], adapter: PgConnection, work: Callable[[Any], T]
) -> T:
    """:func:`store.db.postgres.pg_connection.one_transaction` with ``BEGIN``, the group's
    statements and the question for the transaction's id sent in one pipeline: one round trip
    for all of it, plus one for each result a write reads, plus the ``COMMIT``. An error the
    server reports later than the statement that caused it is the group's :class:`WriteFailed`
    (its writes then run one by one and each gets its own error)."""
    try:
        # Leaving the pipeline waits for every statement, so an error surfaces here, before
        # the commit, whichever write's statement it was.
        with conn.pipeline() as pipeline:
            adapter.pipeline = pipeline
            conn.execute("BEGIN")  # queued: pipeline mode waits for nothing
            result = work(adapter)
            asked = conn.cursor()
            asked.execute("SELECT pg_current_xact_id_if_assigned()::text")
    except BaseException as error:
        adapter.pipeline = None
        forget_prepared_statements(conn)
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
        if isinstance(error, Exception) and not (
            ends_the_group(error) or isinstance(error, WriteFailed)
        ):
            raise WriteFailed() from error
        raise
    adapter.pipeline = None
    row = asked.fetchone()
    xid = None if row is None or not adapter.wrote else row[0]
    return commit_knowably(conn, xid, result)


def forget_prepared_statements(conn: psycopg.Connection[Any]) -> None:
    """Make psycopg forget the statements it prepared on ``conn`` and deallocate them all on
    the server with the next statement (``DEALLOCATE ALL``), so neither side names one the
    other lacks. psycopg has no public call for this; should its private cache move, the
    group-commit tests fail (tests/store/test_durability_and_group_commit.py)."""
    conn._prepared.clear()
