"""Riding out a PostgreSQL server that drops its connections for a while: which errors are
worth waiting out, and how a write whose commit was cut off is resolved without running it
twice.

A connection can drop at any moment: ``pg_terminate_backend``, a server restart, a network
blip, a failover; a grant can be revoked and given back. For up to the database's retry
window (:attr:`PostgresDatabase.retry_window_s`, by default the lease of a worker's run),
every read and every write transaction is run again on a fresh connection
(:func:`is_transient` says which failures qualify). Re-running a write is safe in every case:

* it failed before ``COMMIT`` was sent: the server rolled it back, nothing was written;
* the connection dropped *during* ``COMMIT``: the outcome is unknown, so the transaction's id
  (taken just before committing) is looked up on a new connection (``pg_xact_status``):
  committed means the write stands and its result is returned, aborted means it runs again
  (:class:`CommitUnknown`). A write is thus applied exactly once, never doubled (a call row)
  nor lost (an acknowledged node end).

Past the window the failure is one sentence (:class:`store.errors.DatabaseUnavailable`).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from store.db.database_url import redact_url, scrub
from store.db.retry import backoff_s
from store.errors import DatabaseUnavailable

DEFAULT_RETRY_WINDOW_S = 30.0
"""How long an operation keeps retrying a dropped connection (the default lease: a run whose
worker rides out a drop this long keeps its lease)."""
T = TypeVar("T")

FIRST_RETRY_S = 0.05
MAX_RETRY_S = 1.0


class CommitUnknown(Exception):
    """The connection dropped while ``COMMIT`` was on its way: whether transaction ``xid``
    committed is asked of the server again; ``result`` is what the work returned."""

    def __init__(self, xid: str, result: Any, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.xid = xid
        self.result = result
        self.cause = cause


def is_transient(error: BaseException, *, role_can_write: bool) -> bool:
    """True for a failure worth waiting out: the connection dropped or could not be made (any
    ``OperationalError``: terminated by an administrator, the server restarting, the network),
    no pooled connection came in time, or a role that could write was refused a privilege (a
    grant revoked while Tether runs may come back; a role that never could is told at once)."""
    if isinstance(error, psycopg.OperationalError | PoolTimeout):
        return True
    return isinstance(error, pg_errors.InsufficientPrivilege) and role_can_write


def outage_sentence(error: BaseException, url: str, waited_s: float) -> str:
    """The one sentence for a failure that outlasted the retries, never showing a password."""
    detail = " ".join(scrub(str(error), url).split()).rstrip(".") or type(error).__name__
    if isinstance(error, pg_errors.InsufficientPrivilege):
        return (
            f"The workspace database {redact_url(url)} refused this role ({detail}) for "
            f"{waited_s:.0f} s; grant it back, then run the command again."
        )
    return (
        f"Cannot reach the workspace database {redact_url(url)}: {detail} (retried for "
        f"{waited_s:.0f} s)."
    )


def outage_reason(error: BaseException) -> str:
    """The short clause for the outage, as an interrupted run's error quotes it."""
    if isinstance(error, pg_errors.InsufficientPrivilege):
        return "the workspace database refused this role"
    return "the workspace database could not be reached"


def unresolved_sentence(url: str) -> str:
    """The sentence for a commit whose outcome the server could not tell in time."""
    return (
        f"The connection to {redact_url(url)} dropped while a write was being committed and "
        "the server did not say in time whether it was; check before running the command "
        "again."
    )


def writes(sql: str) -> bool:
    """True for a statement that may write (anything but a plain ``SELECT``)."""
    return sql.lstrip()[:6].upper() != "SELECT"


def ride_out(
    call: Callable[[], T], pool: ConnectionPool[Any], url: str, window_s: float, *,
    role_can_write: bool, committed: Callable[[str, float], bool] | None = None,
) -> T:
    """Run ``call``, again on a fresh connection of ``pool`` while it fails for a reason worth
    waiting out (:func:`is_transient`), for up to ``window_s``; a commit cut off is resolved by
    ``committed`` (its transaction id, the deadline). Past the window: one sentence."""
    started = time.monotonic()
    deadline = started + window_s
    for attempt in itertools.count():
        try:
            return call()
        except CommitUnknown as unknown:
            if committed is not None and committed(unknown.xid, deadline):
                return cast(T, unknown.result)
            error: BaseException = unknown.cause  # rolled back: run it again
        except Exception as failure:
            if not is_transient(failure, role_can_write=role_can_write):
                raise
            error = failure
        if time.monotonic() >= deadline:
            raise DatabaseUnavailable(
                outage_sentence(error, url, time.monotonic() - started), outage_reason(error)
            ) from None
        if attempt == 0:
            # Every pooled connection may have been cut at once: drop the dead ones now.
            with contextlib.suppress(Exception):
                pool.check()
        else:
            time.sleep(min(backoff_s(attempt - 1, first_s=FIRST_RETRY_S, max_s=MAX_RETRY_S),
                           max(0.0, deadline - time.monotonic())))
    raise AssertionError("unreachable")
