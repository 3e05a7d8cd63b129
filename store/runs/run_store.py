"""Run records: the one API every process uses to write and read runs, nodes, attempts, calls,
token usage, memory blocks, handoffs and the event log.

Every write is one short transaction that also appends the events describing it, so the event
log (``events.seq``, monotonic) never disagrees with the rows it reports. Typical use::

    store = RunStore(db)
    run = await store.create_run("code-review", input={"repo": "x"}, nodes_total=3)
    await store.upsert_node(run.run_id, "plan", 0, "running")
    await store.start_attempt(run.run_id, "plan", 0, 1, agent="simulated")
    await store.record_call(CallUsage(run.run_id, "plan", 0, 1, agent="simulated",
                                      usage=TokenUsage(input=1200, cache_read=300)))
    await store.finish_attempt(run.run_id, "plan", 0, 1, "finished", usage=...,
                               node_state="finished", node_output={...})

Names follow BRIEF section 2. Statuses: ``RUN_STATUSES``, ``NODE_STATES`` and
``ATTEMPT_STATES`` in :mod:`store.db.sqlite.sqlite_schema`. A running run whose heartbeat is older
than ``STALE_AFTER_MS`` is *stale*: :meth:`RunRecord.display_status` reports it so.

Event types written here (``EventRecord.type``):
``run.created``, ``run.status``, ``run.cancel-requested``, ``run.clear-requested``,
``run.resumed``, ``run.deleted``, ``node.state``, ``attempt.started``, ``attempt.finished``,
``attempt.abandoned``, ``call``, ``memory.block``, ``handoff``, plus whatever callers append
with :meth:`RunStore.append_events` (the engine adds ``cache.hit``, ``cache.invalid`` and
``warning``).

Where the parts live: value types in :mod:`store.model.run_records`, the event log in
:mod:`store.runs.event_log`, calls and usage rollups in :mod:`store.runs.call_usage`, memory blocks
in
:mod:`store.memory.memory_blocks`, process ownership in :mod:`store.runs.owners`. This module holds
runs, nodes, attempts and handoffs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from store.db.paging import MORE_COUNT_CAP
from store.db.seam import Connection
from store.db.sqlite.sqlite_schema import ATTEMPT_STATES, NODE_STATES, RUN_STATUSES
from store.errors import InvalidInputError, NotFoundError
from store.memory.memory_blocks import MemoryBlockLog
from store.model.history_records import HandoffRecord
from store.model.ids import random_hex, validate_node_id, validate_run_id
from store.model.json_columns import dump_json
from store.model.run_records import (
    STALE_AFTER_MS,
    AttemptRecord,
    NewEvent,
    NodeRecord,
    RunRecord,
    RunRequests,
)
from store.model.token_lanes import TokenUsage
from store.runs import queue_sql
from store.runs import runs_sql as sql
from store.runs.artifact_paths import delete_run_dir
from store.runs.call_usage import CallLog
from store.runs.event_log import MAX_READ_LIMIT
from store.runs.owners import running_elsewhere

ANY_OWNER = object()
"""``claim_run`` without an ownership check."""

DEFAULT_LEASE_MS = 30_000
"""How long a worker's claim on a run lasts without a heartbeat (renewed by each one)."""


def new_run_id() -> str:
    """A fresh run id: short, unique, sortable enough to read in a terminal."""
    return "r-" + random_hex(12)


def _check(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise InvalidInputError(f"{value!r} is not a {what}; use one of: {', '.join(allowed)}.")


def _status_params(
    run_id: str,
    status: str,
    now: int,
    *,
    error: str | None = None,
    output: Any = None,
    set_output: bool = False,
) -> dict[str, Any]:
    """Parameters of ``UPDATE_RUN_STATUS``: ``error`` is stored when given, ``output`` only when
    ``set_output`` is true (None is a valid output)."""
    return {
        "run_id": run_id,
        "status": status,
        "now": now,
        "set_error": error is not None,
        "error": error,
        "set_output": set_output,
        "output_json": dump_json(output) if set_output else None,
    }


def _progress_params(
    run_id: str, now: int, *, nodes_done: int | None = None, nodes_total: int | None = None
) -> dict[str, Any]:
    """Parameters of ``UPDATE_PROGRESS``: a counter given as None keeps its stored value."""
    return {"run_id": run_id, "nodes_done": nodes_done, "nodes_total": nodes_total, "now": now}


def _write_node(conn: Connection, params: Mapping[str, Any]) -> None:
    """Update a node row, inserting it when it does not exist yet (see ``UPDATE_NODE``)."""
    if conn.execute(sql.UPDATE_NODE, params).rowcount == 0:
        conn.execute(sql.UPSERT_NODE, params)


# -- the store --------------------------------------------------------------------------------


class RunStore(CallLog, MemoryBlockLog):
    """Reads and writes run records on an open workspace database (:mod:`store.db.seam`).

    Events, calls and memory blocks come from its bases; runs, nodes, attempts and handoffs are
    here.
    """

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
    ) -> RunRecord:
        """Insert a run (``running`` by default, heartbeat now) and its ``run.created`` event.

        ``parent_run_id``/``generation`` link a continuation (handoff) to the run it continues.
        """
        _check(status, RUN_STATUSES, "run status")
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
            },
        )
        self._insert_events(
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
        _check(status, (*RUN_STATUSES, "stale"), "run status")
        return (sql.COUNT_RUNS_BY_STATUS if count else sql.LIST_RUNS_BY_STATUS), (status, limit)

    async def child_runs(self, run_id: str) -> list[RunRecord]:
        """Runs that continue ``run_id`` (handoff successors), oldest first."""
        rows = await self.db.fetch_all(sql.LIST_CHILD_RUNS, (run_id,))
        return [RunRecord.from_row(r) for r in rows]

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
        _check(status, RUN_STATUSES, "run status")

        def work(conn: Connection) -> Any:
            now = self.now_ms
            cursor = conn.execute(
                sql.UPDATE_RUN_STATUS,
                _status_params(
                    run_id, status, now, error=error, output=output, set_output=set_output
                ),
            )
            if cursor.rowcount == 0:
                raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
            payload: dict[str, Any] = {"status": status}
            if error is not None:
                payload["error"] = error
            self._insert_events(conn, now, [NewEvent("run.status", run_id, payload=payload)])

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
            abandoned = self._abandon(conn, run_id, now)
            self._insert_events(
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

        token = self.db.leases.get(run_id)

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
                    _status_params(run_id, "cancelled", now, error="Cancelled by request."),
                )
                self._abandon(conn, run_id, now)
                events.append(NewEvent("run.status", run_id, payload={"status": "cancelled"}))
            self._insert_events(conn, now, events)

        await self.db.run_in_transaction(work)
        return await self.get_run(run_id)

    async def request_clear(self, run_id: str, reason: str) -> RunRecord:
        """Ask for a durable /clear of ``run_id``: the scheduler hands off at its next dispatch.

        Raises NotFoundError; a terminal run raises InvalidInputError.
        """
        if not reason.strip():
            raise InvalidInputError("A clear needs a reason; pass some text.")
        run = await self.get_run(run_id)
        if run.is_terminal:
            raise InvalidInputError(f"Run {run_id} is already {run.status}; nothing to clear.")

        def work(conn: Connection) -> Any:
            now = self.now_ms
            conn.execute(sql.REQUEST_CLEAR, {"run_id": run_id, "now": now, "reason": reason})
            self._insert_events(
                conn, now, [NewEvent("run.clear-requested", run_id, payload={"reason": reason})]
            )

        await self.db.run_in_transaction(work)
        return await self.get_run(run_id)

    async def set_progress(
        self, run_id: str, *, nodes_done: int | None = None, nodes_total: int | None = None
    ) -> None:
        """Update the run's done/total node counters shown in run lists."""
        params = _progress_params(
            run_id, self.now_ms, nodes_done=nodes_done, nodes_total=nodes_total
        )
        await self._write((run_id,), lambda conn: conn.execute(sql.UPDATE_PROGRESS, params))

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
            self._insert_events(conn, now, [NewEvent("run.deleted", payload={"run_id": run_id})])

        await self.db.run_in_transaction(work)
        delete_run_dir(self.db.workspace.artifacts_dir, run_id)

    # -- nodes ------------------------------------------------------------------------------

    @staticmethod
    def _node_params(
        now: int,
        run_id: str,
        node_id: str,
        iteration: int,
        state: str,
        *,
        attempts: int | None = None,
        cached: bool | None = None,
        depends_on: Sequence[str] | None = None,
        output: Any = None,
        set_output: bool = False,
        error: str | None = None,
        set_error: bool = False,
    ) -> dict[str, Any]:
        _check(state, NODE_STATES, "node state")
        validate_run_id(run_id)
        validate_node_id(node_id)
        return {
            "run_id": run_id,
            "node_id": node_id,
            "iteration": iteration,
            "state": state,
            "attempts": attempts,
            "cached": None if cached is None else int(cached),
            "depends_on_json": None if depends_on is None else dump_json(list(depends_on)),
            "output_json": dump_json(output) if set_output else None,
            "set_output": set_output,
            "error": error,
            "set_error": set_error or error is not None,
            "now": now,
        }

    @staticmethod
    def _node_event(params: Mapping[str, Any]) -> NewEvent:
        payload: dict[str, Any] = {"state": params["state"]}
        if params["cached"]:
            payload["cached"] = True
        if params["error"] is not None:
            payload["error"] = params["error"]
        return NewEvent(
            "node.state", params["run_id"], params["node_id"], params["iteration"], payload=payload
        )

    async def upsert_node(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        state: str,
        *,
        attempts: int | None = None,
        cached: bool | None = None,
        depends_on: Sequence[str] | None = None,
        output: Any = None,
        set_output: bool = False,
        error: str | None = None,
        nodes_done: int | None = None,
    ) -> None:
        """Create or update a node's state (with a ``node.state`` event).

        ``output`` is stored only when ``set_output`` is true (None is a valid output).
        ``nodes_done`` also updates the run's progress counter in the same transaction.
        """
        params = self._node_params(
            self.now_ms,
            run_id,
            node_id,
            iteration,
            state,
            attempts=attempts,
            cached=cached,
            depends_on=depends_on,
            output=output,
            set_output=set_output,
            error=error,
        )

        def work(conn: Connection) -> Any:
            _write_node(conn, params)
            if nodes_done is not None:
                conn.execute(
                    sql.UPDATE_PROGRESS,
                    _progress_params(run_id, params["now"], nodes_done=nodes_done),
                )
            self._insert_events(conn, params["now"], [self._node_event(params)])

        await self._write((run_id,), work)

    async def upsert_nodes(
        self,
        run_id: str,
        nodes: Sequence[tuple[str, int, str, Sequence[str]]],
        *,
        nodes_total: int | None = None,
    ) -> None:
        """Create many nodes as ``(node_id, iteration, state, depends_on)``, one event each;
        ``nodes_total`` also sets the run's node count in the same transaction."""
        now = self.now_ms
        params = [self._node_params(now, run_id, n, i, s, depends_on=d) for n, i, s, d in nodes]

        def work(conn: Connection) -> Any:
            conn.executemany(sql.UPSERT_NODE, params)
            if nodes_total is not None:
                conn.execute(
                    sql.UPDATE_PROGRESS, _progress_params(run_id, now, nodes_total=nodes_total)
                )
            self._insert_events(conn, now, [self._node_event(p) for p in params])

        await self._write((run_id,), work)

    async def list_nodes(self, run_id: str) -> list[NodeRecord]:
        """Every node (every iteration) of a run, in start order."""
        rows = await self.db.fetch_all(sql.SELECT_NODES, (run_id,))
        return [NodeRecord.from_row(r) for r in rows]

    async def get_node(self, run_id: str, node_id: str, iteration: int | None = None) -> NodeRecord:
        """A node at ``iteration`` (default: its latest iteration). Raises NotFoundError."""
        if iteration is None:
            rows = await self.db.fetch_all(sql.SELECT_NODE_ITERATIONS, (run_id, node_id))
            row = rows[-1] if rows else None
        else:
            row = await self.db.fetch_one(sql.SELECT_NODE, (run_id, node_id, iteration))
        if row is None:
            raise NotFoundError(f"Run {run_id} has no node {node_id!r}.")
        return NodeRecord.from_row(row)

    async def fan_out_nodes(self, run_id: str, fan_out_id: str, limit: int) -> list[NodeRecord]:
        """Up to ``limit`` copies of fan-out ``fan_out_id`` (node ids ``<id>[<key>]``) by id."""
        # Every id starting "<id>[" sorts after "<id>[" and before "<id>\\" ('\\' follows '[').
        rows = await self.db.fetch_all(
            sql.SELECT_FAN_OUT_NODES, (run_id, f"{fan_out_id}[", f"{fan_out_id}\\", limit)
        )
        return [NodeRecord.from_row(r) for r in rows]

    async def node_iterations(self, run_id: str, node_id: str) -> list[NodeRecord]:
        """Every iteration of one node, oldest first."""
        rows = await self.db.fetch_all(sql.SELECT_NODE_ITERATIONS, (run_id, node_id))
        return [NodeRecord.from_row(r) for r in rows]

    # -- attempts ---------------------------------------------------------------------------

    async def start_attempt(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        attempt: int,
        *,
        agent: str | None = None,
        model: str | None = None,
        prompt: str | None = None,
        owner_id: str | None = None,
        cached: bool = False,
        node_state: str = "running",
    ) -> None:
        """Insert a running attempt and set its node to ``node_state`` with the attempt count.

        Emits ``node.state`` and ``attempt.started`` in the same transaction. Committed without
        a flush to disk of its own (see :meth:`Database.submit`): a power cut abandons running
        attempts anyway, and the attempt's end flushes it.
        """
        now = self.now_ms
        node = self._node_params(now, run_id, node_id, iteration, node_state, attempts=attempt)

        def work(conn: Connection) -> Any:
            _write_node(conn, node)
            conn.execute(
                sql.INSERT_ATTEMPT,
                {
                    "run_id": run_id,
                    "node_id": node_id,
                    "iteration": iteration,
                    "attempt": attempt,
                    "agent": agent,
                    "model": model,
                    "prompt": prompt,
                    "cached": int(cached),
                    "owner_id": owner_id,
                    "lease_token": self.db.leases.get(run_id),
                    "now": now,
                },
            )
            self._insert_events(
                conn,
                now,
                [
                    self._node_event(node),
                    NewEvent(
                        "attempt.started",
                        run_id,
                        node_id,
                        iteration,
                        attempt,
                        {"agent": agent, "model": model},
                    ),
                ],
            )

        await self._submit((run_id,), work, flush=False)

    def finish_attempt(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        attempt: int,
        state: str,
        *,
        usage: TokenUsage = TokenUsage(),
        response_text: str | None = None,
        error: str | None = None,
        model: str | None = None,
        cached: bool = False,
        node_state: str | None = None,
        node_output: Any = None,
        set_node_output: bool = False,
        nodes_done: int | None = None,
        extra_events: Sequence[NewEvent] = (),
        details: Mapping[str, Any] | None = None,
    ) -> Awaitable[RunRequests | None]:
        """End an attempt, writing its authoritative token totals once.

        When ``node_state`` is given the node moves to it in the same transaction (with its
        output when ``set_node_output``), and ``nodes_done`` updates the run's progress.
        Await the result for the run's pending cancel/clear requests as read in that
        transaction, so the scheduler learns of them before it dispatches anything else. The
        write is queued for the next group commit at once (before any await): the engine
        queues a node's end and then its dependents' starts behind it. ``details`` (what the
        agent passed and reported: command line, session, per-model cost) is stored as JSON;
        the attempt's cost is summed from its calls.
        """
        _check(state, ATTEMPT_STATES, "attempt state")
        now = self.now_ms

        def work(conn: Connection) -> Any:
            conn.execute(
                sql.FINISH_ATTEMPT,
                {
                    "run_id": run_id,
                    "node_id": node_id,
                    "iteration": iteration,
                    "attempt": attempt,
                    "state": state,
                    "response_text": response_text,
                    "error": error,
                    "model": model,
                    "cached": int(cached),
                    "now": now,
                    **usage.as_dict(),
                    "details_json": None if details is None else dump_json(dict(details)),
                },
            )
            payload: dict[str, Any] = {"state": state, "tokens": usage.as_dict()}
            if error is not None:
                payload["error"] = error
            if cached:
                payload["cached"] = True
            events = [NewEvent("attempt.finished", run_id, node_id, iteration, attempt, payload)]
            if node_state is not None:
                node = self._node_params(
                    now,
                    run_id,
                    node_id,
                    iteration,
                    node_state,
                    attempts=attempt,
                    cached=cached,
                    output=node_output,
                    set_output=set_node_output,
                    error=error if node_state == "failed" else None,
                    set_error=True,
                )
                _write_node(conn, node)
                events.append(self._node_event(node))
            if nodes_done is not None:
                conn.execute(
                    sql.UPDATE_PROGRESS, _progress_params(run_id, now, nodes_done=nodes_done)
                )
            events.extend(extra_events)
            self._insert_events(conn, now, events)
            row = conn.execute(sql.SELECT_RUN_REQUESTS, (run_id,)).fetchone()
            return None if row is None else RunRequests(row[0], row[1], row[2])

        return self._submit((run_id,), work)

    def _abandon(self, conn: Connection, run_id: str, now: int) -> int:
        running = conn.execute(sql.SELECT_RUNNING_ATTEMPTS, (run_id,)).fetchall()
        if not running:
            conn.execute(sql.RESET_RUNNING_NODES, {"run_id": run_id, "now": now})
            return 0
        conn.execute(sql.ABANDON_ATTEMPTS, {"run_id": run_id, "now": now})
        conn.execute(sql.RESET_RUNNING_NODES, {"run_id": run_id, "now": now})
        self._insert_events(
            conn,
            now,
            [NewEvent("attempt.abandoned", r[0], r[1], r[2], r[3]) for r in running],
        )
        return len(running)

    async def mark_abandoned_attempts(self, run_id: str) -> int:
        """Mark every attempt of ``run_id`` still ``running`` as abandoned (its process died) and
        set their nodes back to pending. Returns how many attempts were abandoned."""

        def work(conn: Connection) -> Any:
            return self._abandon(conn, run_id, self.now_ms)

        return await self.db.run_in_transaction(work)

    async def list_attempts(
        self, run_id: str, node_id: str, iteration: int | None = None
    ) -> list[AttemptRecord]:
        """Attempts of a node (all iterations, or one), in order."""
        if iteration is None:
            rows = await self.db.fetch_all(sql.SELECT_ATTEMPTS, (run_id, node_id))
        else:
            rows = await self.db.fetch_all(
                sql.SELECT_ATTEMPTS_ITERATION, (run_id, node_id, iteration)
            )
        return [AttemptRecord.from_row(r) for r in rows]

    async def attempts_page(
        self, run_id: str, node_id: str, iteration: int, *, limit: int, offset: int = 0
    ) -> list[AttemptRecord]:
        """A page of a node iteration's attempts: the ``limit`` newest after skipping the
        ``offset`` newest, returned oldest first."""
        rows = await self.db.fetch_all(
            sql.SELECT_ATTEMPTS_PAGE, (run_id, node_id, iteration, limit, offset)
        )
        return [AttemptRecord.from_row(r) for r in reversed(rows)]

    async def attempt_states(self, run_id: str, node_id: str, iteration: int) -> dict[str, int]:
        """How many attempts of a node iteration ended in each state (``{"failed": 24, ...}``),
        counted on the primary key's range without reading the attempts."""
        rows = await self.db.fetch_all(sql.COUNT_ATTEMPTS_BY_STATE, (run_id, node_id, iteration))
        return {str(row[0]): int(row[1]) for row in rows}

    # -- handoffs ---------------------------------------------------------------------------

    async def record_handoff(
        self,
        from_run_id: str,
        *,
        trigger: str,
        reason: str,
        carried_state: Any,
        to_run_id: str | None = None,
        generation: int | None = None,
        tokens_at_handoff: int | None = None,
    ) -> int:
        """Record a handoff row (no run changes). Prefer :meth:`continue_as_new`."""

        def work(conn: Connection) -> Any:
            return self._insert_handoff(
                conn,
                self.now_ms,
                from_run_id,
                to_run_id,
                trigger,
                reason,
                carried_state,
                generation if generation is not None else 0,
                tokens_at_handoff,
            )

        return await self._write((from_run_id,), work)

    def _insert_handoff(
        self,
        conn: Connection,
        now: int,
        from_run_id: str,
        to_run_id: str | None,
        trigger: str,
        reason: str,
        carried_state: Any,
        generation: int,
        tokens_at_handoff: int | None,
    ) -> int:
        _check(trigger, ("ceiling", "person"), "handoff trigger")
        carried = dump_json(carried_state)
        carried_bytes = len(carried.encode("utf-8"))
        cursor = conn.execute(
            sql.INSERT_HANDOFF,
            {
                "from_run_id": from_run_id,
                "to_run_id": to_run_id,
                "trigger": trigger,
                "reason": reason,
                "generation": generation,
                "tokens_at_handoff": tokens_at_handoff,
                "carried_state_json": carried,
                "carried_bytes": carried_bytes,
                "now": now,
            },
        )
        handoff_id = int(cursor.fetchall()[0][0])
        self._insert_events(
            conn,
            now,
            [
                NewEvent(
                    "handoff",
                    from_run_id,
                    payload={
                        "handoff_id": handoff_id,
                        "to_run_id": to_run_id,
                        "trigger": trigger,
                        "reason": reason,
                        "generation": generation,
                        "carried_bytes": carried_bytes,
                    },
                )
            ],
        )
        return handoff_id

    async def continue_as_new(
        self,
        from_run_id: str,
        *,
        trigger: str,
        reason: str,
        carried_state: Any,
        input: Any,
        tokens_at_handoff: int | None = None,
        owner_id: str | None = None,
    ) -> tuple[RunRecord, int]:
        """Durable /clear in one transaction: create the successor run (generation + 1, linked by
        ``parent_run_id``), record the handoff, and mark ``from_run_id`` ``handed-off``.

        Returns ``(new_run, handoff_id)``. The new run is ``pending`` until a scheduler claims it.
        """
        old = await self.get_run(from_run_id)
        new_id = new_run_id()
        generation = old.generation + 1

        def work(conn: Connection) -> Any:
            now = self.now_ms
            self._insert_run(
                conn,
                now,
                run_id=new_id,
                workflow=old.workflow,
                workflow_path=old.workflow_path,
                status="pending",
                input=input,
                parent_run_id=from_run_id,
                generation=generation,
                owner_id=owner_id,
                nodes_total=0,
            )
            handoff_id = self._insert_handoff(
                conn,
                now,
                from_run_id,
                new_id,
                trigger,
                reason,
                carried_state,
                generation,
                tokens_at_handoff,
            )
            conn.execute(sql.UPDATE_RUN_STATUS, _status_params(from_run_id, "handed-off", now))
            self._insert_events(
                conn,
                now,
                [
                    NewEvent(
                        "run.status",
                        from_run_id,
                        payload={"status": "handed-off", "to_run_id": new_id},
                    )
                ],
            )
            return handoff_id

        handoff_id = int(await self._write((from_run_id,), work))
        return await self.get_run(new_id), handoff_id

    async def list_handoffs(
        self, *, from_run_id: str | None = None, to_run_id: str | None = None, limit: int = 500
    ) -> list[HandoffRecord]:
        """Handoffs from a run, into a run, or the most recent ``limit`` of all."""
        if from_run_id is not None:
            rows = await self.db.fetch_all(sql.SELECT_HANDOFFS_FROM, (from_run_id,))
        elif to_run_id is not None:
            rows = await self.db.fetch_all(sql.SELECT_HANDOFFS_TO, (to_run_id,))
        else:
            rows = await self.db.fetch_all(sql.SELECT_HANDOFFS_ALL, (limit,))
        return [HandoffRecord.from_row(r) for r in rows]
