"""Runs: creating, reading, claiming, heartbeats, cancel and clear requests, progress and
deletion, each write one short transaction with the events it reports."""

from __future__ import annotations

from typing import Any

from store.db.paging import MORE_COUNT_CAP
from store.db.seam import Connection
from store.errors import InvalidInputError, NotFoundError
from store.model.ids import validate_run_id
from store.model.json_columns import dump_json
from store.model.run_records import STALE_AFTER_MS, NewEvent, RunRecord
from store.model.states import RUN_STATUSES
from store.runs import queue_sql
from store.runs import runs_sql as sql
from store.runs.artifact_paths import delete_run_dir
from store.runs.event_log import MAX_READ_LIMIT, EventLog, insert_events
from store.runs.fences import held_tokens
from store.runs.owners import running_elsewhere
from store.runs.run_params import (
    abandon_attempts,
    check_choice,
    check_clear_reason,
    new_run_id,
    status_params,
)

ANY_OWNER = object()
"""``claim_run`` without an ownership check."""

DEFAULT_LEASE_MS = 30_000
"""How long a worker's claim on a run lasts without a heartbeat (renewed by each one)."""


class RunLog(EventLog):
    """Runs: creating, reading, claiming, heartbeats, cancel and clear requests, progress and"""

    lease_ms = DEFAULT_LEASE_MS

    # -- runs -------------------------------------------------------------------------------

    async def create_run(
        self,
        workflow: str,
        *,
        input: Any = None,
        workflow_path: str | None = None,
        parent_run_id: str | None = None,
        generation: int = 0,
        owner_id: str | None = None,
        run_id: str | None = None,
        status: str = "running",
        nodes_total: int = 0,
        forked_from: str | None = None,
        fork: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Insert a run (``running`` by default, heartbeat now) and its ``run.created`` event.

        ``parent_run_id``/``generation`` link a continuation (handoff) to the run it continues;
        ``forked_from``/``fork`` a fork to its origin run and the node and edit it starts from.
        """
        check_choice(status, RUN_STATUSES, "run status")
        run_id = validate_run_id(run_id) if run_id is not None else new_run_id()

        def work(conn: Connection) -> Any:
            now = self.now_ms
            self._insert_run(
                conn,
                now,
                run_id=run_id,
                workflow=workflow,
                workflow_path=workflow_path,
                status=status,
                input=input,
                parent_run_id=parent_run_id,
                generation=generation,
                owner_id=owner_id,
                nodes_total=nodes_total,
                forked_from=forked_from,
                fork=fork,
            )
            # Read back in the same transaction: no second trip to the database.
            return RunRecord.from_row(conn.execute(sql.SELECT_RUN, (run_id,)).fetchone())

        record: RunRecord = await self.db.run_in_transaction(work)
        return record

    def _insert_run(
        self,
        conn: Connection,
        now: int,
        *,
        run_id: str,
        workflow: str,
        workflow_path: str | None,
        status: str,
        input: Any,
        parent_run_id: str | None,
        generation: int,
        owner_id: str | None,
        nodes_total: int,
        forked_from: str | None = None,
        fork: dict[str, Any] | None = None,
    ) -> None:
        running = status == "running"
        conn.execute(
            sql.INSERT_RUN,
            {
                "run_id": run_id,
                "workflow": workflow,
                "workflow_path": workflow_path,
                "status": status,
                "input_json": None if input is None else dump_json(input),
                "parent_run_id": parent_run_id,
                "generation": generation,
                "owner_id": owner_id,
                "now": now,
                "started_at_ms": now if running else None,
                "heartbeat_at_ms": now if running else None,
                "nodes_total": nodes_total,
                "forked_from": forked_from,
                "fork_node": (fork or {}).get("node") if forked_from else None,
                "fork_json": None if fork is None else dump_json(fork),
            },
        )
        insert_events(
            conn,
            now,
            [
                NewEvent(
                    "run.created",
                    run_id,
                    payload={
                        "workflow": workflow,
                        "status": status,
                        "parent_run_id": parent_run_id,
                        "generation": generation,
                        **({"forked_from": forked_from, "fork_node": (fork or {}).get("node")}
                           if forked_from else {}),
                    },
                )
            ],
        )

    async def get_run(self, run_id: str) -> RunRecord:
        """The run with this id. Raises NotFoundError (InvalidInputError for a malformed id)."""
        validate_run_id(run_id)
        row = await self.db.fetch_one(sql.SELECT_RUN, (run_id,))
        if row is None:
            raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
        return RunRecord.from_row(row)

    async def find_run(self, run_id: str) -> RunRecord | None:
        """The run with this id, or None (InvalidInputError for a malformed id)."""
        validate_run_id(run_id)
        row = await self.db.fetch_one(sql.SELECT_RUN, (run_id,))
        return None if row is None else RunRecord.from_row(row)

    async def list_runs(self, *, status: str | None = None, limit: int = 200) -> list[RunRecord]:
        """Runs, newest first. ``status`` may be any run status or ``stale``."""
        query, params = self._runs_query(status, max(1, min(limit, MAX_READ_LIMIT)))
        rows = await self.db.fetch_all(query, params)
        return [RunRecord.from_row(r) for r in rows]

    async def runs_since(
        self, since_ms: int, *, after: RunRecord | None = None, limit: int = 500
    ) -> list[RunRecord]:
        """Runs created at ``since_ms`` or later, oldest first: the page after ``after``."""
        at, last = (after.created_at_ms, after.run_id) if after else (since_ms - 1, "")
        rows = await self.db.fetch_all(
            sql.LIST_RUNS_SINCE, (since_ms, at, at, last, max(1, min(limit, MAX_READ_LIMIT)))
        )
        return [RunRecord.from_row(r) for r in rows]

    async def count_runs(self, *, status: str | None = None, upto: int = MORE_COUNT_CAP) -> int:
        """How many runs :meth:`list_runs` would list with ``limit=upto`` (a capped count)."""
        query, params = self._runs_query(status, upto, count=True)
        return int(await self.db.fetch_value(query, params) or 0)

    def _runs_query(
        self, status: str | None, limit: int, *, count: bool = False
    ) -> tuple[str, tuple[Any, ...]]:
        if status is None:
            return (sql.COUNT_RUNS if count else sql.LIST_RUNS), (limit,)
        if status == "stale":
            query = sql.COUNT_STALE_RUNS if count else sql.LIST_STALE_RUNS
            return query, (self.now_ms - STALE_AFTER_MS, limit)
        check_choice(status, (*RUN_STATUSES, "stale"), "run status")
        return (sql.COUNT_RUNS_BY_STATUS if count else sql.LIST_RUNS_BY_STATUS), (status, limit)


    async def set_run_status(
        self,
        run_id: str,
        status: str,
        *,
        error: str | None = None,
        output: Any = None,
        set_output: bool = False,
    ) -> None:
        """Change a run's status with a ``run.status`` event (terminal: sets ``finished_at_ms``).

        ``error`` is stored when given; ``output`` only when ``set_output`` is true.
        """
        check_choice(status, RUN_STATUSES, "run status")

        def work(conn: Connection) -> Any:
            now = self.now_ms
            cursor = conn.execute(
                sql.UPDATE_RUN_STATUS,
                status_params(
                    run_id, status, now, error=error, output=output, set_output=set_output
                ),
            )
            if cursor.rowcount == 0:
                raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
            payload: dict[str, Any] = {"status": status}
            if error is not None:
                payload["error"] = error
            insert_events(conn, now, [NewEvent("run.status", run_id, payload=payload)])

        await self._write((run_id,), work)

    async def claim_run(
        self, run_id: str, owner_id: str, *, expected_owner: str | None | object = ANY_OWNER
    ) -> RunRecord:
        """Take over a run for (re)execution: status running, new owner, fresh heartbeat.

        With ``expected_owner`` the claim is a compare-and-set: it only happens while the run
        still has that owner, so two processes resuming the same run cannot both win
        (InvalidInputError for the loser). Any attempt still marked running belongs to a dead
        process; it is marked abandoned and its node set back to pending so the scheduler
        retries it. Emits ``run.resumed``.
        """
        validate_run_id(run_id)
        check_owner = expected_owner is not ANY_OWNER

        def work(conn: Connection) -> Any:
            now = self.now_ms
            cursor = conn.execute(
                sql.CLAIM_RUN,
                {
                    "run_id": run_id,
                    "owner_id": owner_id,
                    "now": now,
                    "check_owner": int(check_owner),
                    "expected_owner": expected_owner if check_owner else None,
                },
            )
            if cursor.rowcount == 0:
                if conn.execute(sql.SELECT_RUN, (run_id,)).fetchone() is None:
                    raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
                raise InvalidInputError(
                    f"Run {run_id} was just taken over by another process; nothing was resumed."
                )
            abandoned = abandon_attempts(conn, run_id, now)
            insert_events(
                conn,
                now,
                [
                    NewEvent(
                        "run.resumed",
                        run_id,
                        payload={"owner_id": owner_id, "abandoned": abandoned},
                    )
                ],
            )

        await self.db.run_in_transaction(work)
        return await self.get_run(run_id)

    async def release_runs(self, owner_id: str) -> int:
        """Give up ownership of every unfinished run ``owner_id`` holds, without changing their
        status: a process that stops executing them but lives on (a dashboard quitting inside a
        longer-lived process) must not keep them from being resumed. Their heartbeat then
        decides, as for a run whose owner is unknown. Returns how many runs were released."""

        def work(conn: Connection) -> Any:
            params = {"owner_id": owner_id, "now": self.now_ms}
            return conn.execute(sql.RELEASE_RUNS, params).rowcount

        return int(await self.db.run_in_transaction(work))

    async def heartbeat(self, run_id: str, owner_id: str | None = None) -> bool:
        """Refresh the run's heartbeat. With ``owner_id`` only if that owner still holds the run.

        Returns False when the run is gone or (fenced) owned by someone else. No event: a
        heartbeat is not a state change.
        """

        token = held_tokens(self.db).get(run_id)

        def work(conn: Connection) -> Any:
            params = {"run_id": run_id, "now": self.now_ms, "owner_id": owner_id}
            if token is not None and owner_id is not None:
                # A leased run: renewing the heartbeat renews the lease, under its token.
                lease = {**params, "token": token, "lease_ms": self.lease_ms}
                return conn.execute(queue_sql.RENEW_LEASE, lease).rowcount > 0
            statement = sql.UPDATE_HEARTBEAT if owner_id is None else sql.UPDATE_HEARTBEAT_FENCED
            cursor = conn.execute(statement, params)
            return cursor.rowcount > 0

        return await self.db.run_in_transaction(work)

    async def request_cancel(self, run_id: str) -> RunRecord:
        """Ask the process running ``run_id`` to cancel it (it polls the run row).

        A run that is not running (or is stale, so nobody is polling) is cancelled directly.
        Raises NotFoundError; a terminal run raises InvalidInputError.
        """
        run = await self.get_run(run_id)
        if run.is_terminal:
            raise InvalidInputError(f"Run {run_id} is already {run.status}; nothing to cancel.")

        def work(conn: Connection) -> Any:
            now = self.now_ms
            conn.execute(sql.REQUEST_CANCEL, {"run_id": run_id, "now": now})
            events = [NewEvent("run.cancel-requested", run_id)]
            if running_elsewhere(run, now) is None:  # nobody alive is executing it
                conn.execute(
                    sql.UPDATE_RUN_STATUS,
                    status_params(run_id, "cancelled", now, error="Cancelled by request."),
                )
                abandon_attempts(conn, run_id, now)
                events.append(NewEvent("run.status", run_id, payload={"status": "cancelled"}))
            insert_events(conn, now, events)

        await self.db.run_in_transaction(work)
        return await self.get_run(run_id)

    async def request_clear(self, run_id: str, reason: str) -> RunRecord:
        """Ask for a durable /clear of ``run_id``: the scheduler hands off at its next dispatch.

        Raises NotFoundError; a terminal run raises InvalidInputError.
        """
        check_clear_reason(reason)
        run = await self.get_run(run_id)
        if run.is_terminal:
            raise InvalidInputError(f"Run {run_id} is already {run.status}; nothing to clear.")

        def work(conn: Connection) -> Any:
            now = self.now_ms
            conn.execute(sql.REQUEST_CLEAR, {"run_id": run_id, "now": now, "reason": reason})
            insert_events(
                conn, now, [NewEvent("run.clear-requested", run_id, payload={"reason": reason})]
            )

        await self.db.run_in_transaction(work)
        return await self.get_run(run_id)


    async def delete_run(self, run_id: str) -> None:
        """Delete a run that is not running, with every row that belongs to it.

        Its token usage leaves the workspace rollup and its artifact folder is removed. Raises
        NotFoundError, or InvalidInputError for a run that is running and not stale.
        """
        run = await self.get_run(run_id)
        if running_elsewhere(run, self.now_ms) is not None:
            raise InvalidInputError(f"Run {run_id} is running; cancel it before deleting it.")

        def work(conn: Connection) -> Any:
            now = self.now_ms
            conn.execute(sql.SUBTRACT_WORKSPACE_ROLLUP, {"run_id": run_id})
            for statement in sql.DELETE_RUN_ROWS:
                conn.execute(statement, (run_id,))
            insert_events(conn, now, [NewEvent("run.deleted", payload={"run_id": run_id})])

        await self.db.run_in_transaction(work)
        delete_run_dir(self.db.workspace.artifacts_dir, run_id)
