"""Group commit on PostgreSQL: the writes queued together (store/db/write_queue.py) run in one
transaction on one pooled connection, their statements pipelined (psycopg pipeline mode: a
statement whose result nobody reads yet costs no round trip), then one ``COMMIT``, one WAL
flush at ``synchronous_commit=on``, one ``NOTIFY``.

Each write keeps the all-or-nothing meaning it has alone: should one raise, the group is rolled
back and every write runs again in a transaction of its own, so the failing one gets its error
back and the others commit. Failures of the connection or the server (a dropped session, a
serialization failure, a commit cut off) are the whole group's and are ridden out, or retried,
as a single write's are (store/db/postgres/pg_retry.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from store.db.postgres.pg_connection import PgConnection
from store.db.postgres.pg_retry import CommitUnknown
from store.db.write_queue import Work


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
    conn = adapter.connection
    if unflushed:
        conn.execute("SET LOCAL synchronous_commit = off")
    values = []
    try:
        # Leaving the pipeline waits for every statement, so an error surfaces here, before
        # the commit, whichever write's statement it was.
        with conn.pipeline() as pipeline:
            adapter.pipeline = pipeline
            for work in works:
                values.append(work(adapter))
    except Exception as error:
        if ends_the_group(error):
            raise
        raise WriteFailed() from error
    finally:
        adapter.pipeline = None
    return values
