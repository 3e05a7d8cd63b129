"""The run queue: runs waiting for a worker, claimed under a lease with a fencing token.

One source of truth: the queue is the ``runs`` table itself (a queued run is ``pending`` with
``queued_at_ms`` set), so the dashboard, ``tether runs`` and the workers never disagree about a
run. A worker claims the oldest claimable run in one statement (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, so concurrent workers never wait on each other or take the same run), which:

- sets the run running under the worker's id with a lease (``lease_expires_at_ms``) that the
  run's heartbeat renews;
- raises the run's fencing token (``lease_token``); the worker registers it in
  :attr:`store.db.seam.Database.leases`, and from then on every write of that run first checks
  the token (:func:`store.runs.event_log.hold_lease`), so a worker that lost its lease writes
  nothing;
- marks attempts left running by the previous holder abandoned and their nodes pending (a
  finished node stays finished: it never runs again).

A run whose worker died (``kill -9``) keeps its expired lease until another worker's claim takes
it over. Workers register themselves (host, pid, runs held, heartbeat) in ``workers`` so the
dashboard can show them.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from store.db.seam import Database
from store.errors import NotFoundError
from store.model.run_records import NewEvent, RunRecord
from store.runs import queue_sql as sql
from store.runs.event_log import insert_events
from store.runs.run_log import DEFAULT_LEASE_MS
from store.runs.run_params import abandon_attempts, new_run_id
from store.runs.run_store import RunStore

WORKER_STALE_MS = 30_000
"""A worker whose heartbeat is older than this is shown as gone."""


@dataclass(frozen=True)
class Claim:
    """A run this worker now holds, and the fencing token it holds it under."""

    run: RunRecord
    token: int


@dataclass(frozen=True)
class WorkerRecord:
    """One worker process as it last reported itself."""

    worker_id: str
    host: str
    pid: int
    started_at_ms: int
    heartbeat_at_ms: int
    runs_held: int
    stopped_at_ms: int | None

    def is_alive(self, now_ms: int) -> bool:
        """Still heartbeating and not stopped."""
        return self.stopped_at_ms is None and now_ms - self.heartbeat_at_ms <= WORKER_STALE_MS


class RunQueue(RunStore):
    """Enqueueing, claiming and leasing runs, and the workers table."""

    def __init__(self, db: Database, *, lease_ms: int = DEFAULT_LEASE_MS) -> None:
        super().__init__(db)
        self.lease_ms = lease_ms

    async def enqueue(
        self,
        workflow: str,
        *,
        input: Any = None,
        workflow_path: str | None = None,
        run_id: str | None = None,
    ) -> RunRecord:
        """Create a queued run (``pending``, waiting for any worker) in one transaction."""
        run_id = run_id or new_run_id()

        def work(conn: Any) -> None:
            now = self.now_ms
            self._insert_run(
                conn,
                now,
                run_id=run_id,
                workflow=workflow,
                workflow_path=workflow_path,
                status="pending",
                input=input,
                parent_run_id=None,
                generation=0,
                owner_id=None,
                nodes_total=0,
            )
            conn.execute(sql.ENQUEUE, {"run_id": run_id, "now": now})
            insert_events(conn, now, [NewEvent("run.queued", run_id)])

        await self.db.run_in_transaction(work)
        return await self.get_run(run_id)

    async def enqueue_existing(self, run_id: str) -> None:
        """Put a ``pending`` run (a handoff's successor, say) on the queue.

        Raises:
            NotFoundError: there is no pending run with this id.
        """

        def work(conn: Any) -> None:
            now = self.now_ms
            if conn.execute(sql.ENQUEUE, {"run_id": run_id, "now": now}).rowcount == 0:
                raise NotFoundError(f"There is no pending run {run_id!r} to queue.")
            insert_events(conn, now, [NewEvent("run.queued", run_id)])

        await self.db.run_in_transaction(work)

    async def claim_next(self, owner_id: str) -> Claim | None:
        """Claim the oldest claimable run for ``owner_id`` (see the module docstring), or None
        when there is none. The claim's token is registered for this process's writes."""

        def work(conn: Any) -> tuple[Any, int] | None:
            now = self.now_ms
            params = {"owner_id": owner_id, "now": now, "lease_ms": self.lease_ms}
            row = conn.execute(sql.CLAIM_NEXT, params).fetchone()
            if row is None:
                return None
            run_id, token = row["run_id"], int(row["lease_token"])
            abandoned = abandon_attempts(conn, run_id, now)
            payload = {"owner_id": owner_id, "lease_token": token, "abandoned": abandoned}
            insert_events(conn, now, [NewEvent("run.claimed", run_id, payload=payload)])
            return row, token

        claimed = await self.db.run_in_transaction(work)
        if claimed is None:
            return None
        row, token = claimed
        self.db.leases[row["run_id"]] = token
        return Claim(RunRecord.from_row(row), token)

    async def release(self, run_id: str, owner_id: str) -> bool:
        """Give a held run back at once (a worker stopping); False when it was no longer held.
        The token is forgotten either way."""
        token = self.db.leases.pop(run_id, None)
        if token is None:
            return False
        params = {"run_id": run_id, "owner_id": owner_id, "token": token, "now": self.now_ms}
        return bool(await self.db.execute(sql.RELEASE_LEASE, params))

    def forget(self, run_id: str) -> None:
        """Stop fencing ``run_id`` (its execution ended in this process)."""
        self.db.leases.pop(run_id, None)

    async def queue_depth(self) -> int:
        """How many queued runs wait for a worker."""
        return int(await self.db.fetch_value(sql.QUEUE_DEPTH) or 0)

    # -- workers ----------------------------------------------------------------------------

    async def report_worker(self, worker_id: str, runs_held: int) -> None:
        """Register or refresh this worker (host, pid, runs held, heartbeat now)."""
        await self.db.execute(
            sql.UPSERT_WORKER,
            {
                "worker_id": worker_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "now": self.now_ms,
                "runs_held": runs_held,
            },
        )

    async def stop_worker(self, worker_id: str) -> None:
        """Mark this worker stopped."""
        await self.db.execute(sql.STOP_WORKER, {"worker_id": worker_id, "now": self.now_ms})

    async def list_workers(self, *, since_ms: int = 0, limit: int = 100) -> list[WorkerRecord]:
        """Workers running, or stopped since ``since_ms``, newest first."""
        rows = await self.db.fetch_all(sql.LIST_WORKERS, {"since": since_ms, "limit": limit})
        return [WorkerRecord(*tuple(row)) for row in rows]
