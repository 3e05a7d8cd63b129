"""Attempts: each try of a node iteration, started and finished with its token totals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from store.db.seam import Connection, Deferred, read_later
from store.model.json_columns import dump_recorded_json, recorded_text
from store.model.run_records import AttemptRecord, NewEvent, RunRequests
from store.model.states import ATTEMPT_STATES
from store.model.token_lanes import LANE_COLUMNS, TokenUsage
from store.runs import runs_sql as sql
from store.runs.event_log import add_summed, event_params, holding, insert_events
from store.runs.fences import held_tokens
from store.runs.node_log import NodeLog
from store.runs.run_params import (
    check_choice,
    progress_params,
    write_node,
)
from store.runs.steer_log import (
    NO_NEXT_ATTEMPT_STATES,
    SteerRecord,
    decide_in,
    refuse_next_attempt_steers,
    return_in,
)


class AttemptLog(NodeLog):
    """Attempts: each try of a node iteration, started and finished with its token totals."""

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
        steers: Sequence[SteerRecord] = (),
    ) -> int:
        """Insert a running attempt and set its node to ``node_state`` with the attempt count.

        Emits ``node.state`` and ``attempt.started`` in the same transaction, and marks
        ``steers`` (waiting for the node's next attempt: the prompt begins with them) delivered
        by it there, so a steer is delivered exactly when its attempt exists. Returns how many
        other steers wait for the node's next attempt as it starts (queued since ``steers``
        were read; a column of the attempt's insert, so no statement of its own): they are
        the next attempt's, or refused by the node's end. Committed without a flush to disk
        of its own (see :meth:`Database.submit`): a power cut abandons running attempts
        anyway, and the attempt's end flushes it.
        """
        now = self.now_ms
        node = self._node_params(now, run_id, node_id, iteration, node_state, attempts=attempt)

        def attempt_params() -> dict[str, Any]:
            return {
                "run_id": run_id,
                "node_id": node_id,
                "iteration": iteration,
                "attempt": attempt,
                "agent": agent,
                "model": model,
                "prompt": recorded_text(prompt),
                "cached": int(cached),
                "owner_id": owner_id,
                "lease_token": held_tokens(self.db).get(run_id),
                "now": now,
            }

        events = [
            self._node_event(node),
            NewEvent("attempt.started", run_id, node_id, iteration, attempt,
                     {"agent": agent, "model": model}),
        ]

        def work(conn: Connection) -> Any:
            started = attempt_params()
            if getattr(conn, "waits_for_results", False):
                # Each statement is a message of its own: the node, the attempt and the
                # events go as one (the same rows, the same events in the same order).
                waiting = conn.execute(sql.START_ATTEMPT_WITH_NODE, {
                    **node, **started, "attempt_cached": started["cached"],
                    "cached": node["cached"], **event_params(events)})
            else:
                write_node(conn, node)
                waiting = conn.execute(sql.START_ATTEMPT, started)
                insert_events(conn, now, events)
            taken = sum(decide_in(conn, now, steer, attempt) for steer in steers)
            # Counted before ``steers`` were marked delivered, in the same transaction.
            return read_later(conn, lambda: max(0, int(waiting.fetchone()[0]) - taken))

        left: int = await self._submit((run_id,), work, flush=False, hold=True)
        return left

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
        input_key: str | None = None,
        refuse_next_attempt: bool = True,
        returned: Sequence[SteerRecord] = (),
    ) -> Awaitable[RunRequests | None]:
        """End an attempt, writing its authoritative token totals once.

        When ``node_state`` is given the node moves to it in the same transaction (with its
        output when ``set_node_output``), and ``nodes_done`` updates the run's progress.
        Await the result for the run's pending cancel/clear requests as read in that
        transaction, so the scheduler learns of them before it dispatches anything else. The
        write is queued for the next group commit at once (before any await): the engine
        queues a node's end and then its dependents' starts behind it. ``details`` (what the
        agent passed and reported: command line, session, per-model cost) is stored as JSON;
        the attempt's cost is summed from its calls. ``input_key`` says what a finished
        node's output was made from (``engine.run.carry``). A node that ends for good
        refuses the steers still waiting for its next attempt, unless ``refuse_next_attempt``
        is false (its run knows none waits: ``engine.run.steering``); a retrying node's end
        reads how many wait (``RunRequests.next_attempt_steers``). ``returned``: the steers
        the attempt's start took, to wait again for the next attempt (its agent never ran).
        """
        check_choice(state, ATTEMPT_STATES, "attempt state")
        now = self.now_ms
        error = recorded_text(error)

        def work(conn: Connection) -> Any:
            ended = {
                "run_id": run_id,
                "node_id": node_id,
                "iteration": iteration,
                "attempt": attempt,
                "state": state,
                "response_text": recorded_text(response_text),
                "error": error,
                "model": model,
                "cached": int(cached),
                "now": now,
                **usage.as_dict(),
                "details_json": None if details is None else dump_recorded_json(dict(details)),
            }
            payload: dict[str, Any] = {"state": state, "tokens": usage.as_dict()}
            if error is not None:
                payload["error"] = error
            if cached:
                payload["cached"] = True
            events = [NewEvent("attempt.finished", run_id, node_id, iteration, attempt, payload)]
            node = None if node_state is None else self._node_params(
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
                input_key=input_key,
            )
            refuses = refuse_next_attempt and node_state in NO_NEXT_ATTEMPT_STATES
            if node is not None:
                events.append(self._node_event(node))
            events.extend(extra_events)
            if (getattr(conn, "waits_for_results", False) and node is not None
                    and nodes_done is not None and not refuses and not returned):
                # Each statement is a message of its own: a finished node's end (attempt,
                # node, events, progress) goes as one, making the same changes.
                requests = conn.execute(sql.finish_attempt_with_node(len(events)), {
                    **node, **progress_params(run_id, now, nodes_done=nodes_done),
                    "attempt_state": state, "attempt_error": error,
                    "attempt_cached": ended["cached"],
                    **{k: v for k, v in ended.items() if k not in ("state", "error", "cached")},
                    **event_params(events)}).fetchone
            else:
                conn.execute(sql.FINISH_ATTEMPT, ended)
                if node is not None:
                    write_node(conn, node)
                    if refuses:
                        refuse_next_attempt_steers(conn, now, run_id, node_id, iteration,
                                                   attempt, node["state"])
                insert_events(conn, now, events)
                for steer in returned:
                    return_in(conn, now, steer, attempt)
                requests = _requests(conn, now, run_id, node_id, iteration, node_state,
                                     nodes_done)

            def read() -> RunRequests | None:
                row = requests()
                if row is None:
                    return None
                waiting = int(row[3]) if node_state == "retrying" else 0
                return RunRequests(row[0], row[1], row[2], waiting)

            # Held (the progress goes with the group's other writes of the run's row): read
            # once they are written.
            return Deferred(read) if holding(conn) else read_later(conn, read)

        return self._submit((run_id,), work, hold=True)


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


_NO_TOKENS = {**dict.fromkeys(LANE_COLUMNS, 0), "cost_usd": None, "unpriced": 0}
"""A node end's share of what ``UPDATE_RUN_ROW`` adds to its run's row: nothing."""

_RUN_ROW_SUMMED = (*LANE_COLUMNS, "cost_usd", "unpriced")


def _requests(conn: Connection, now: int, run_id: str, node_id: str, iteration: int,
              node_state: str | None, nodes_done: int | None) -> Callable[[], Any]:
    """The statement of an attempt's end that reads its run's requests (moving its progress
    when ``nodes_done``, with the tokens of its run's calls held before it in the group
    commit, :func:`~store.runs.event_log.add_summed`; with how many steers wait for a
    retrying node); returns what reads its row."""
    if nodes_done is not None:
        progress = {**_NO_TOKENS, **progress_params(run_id, now, nodes_done=nodes_done)}
        return add_summed(conn, sql.UPDATE_RUN_ROW, (run_id,), progress, _RUN_ROW_SUMMED,
                          sql.RUN_ROW_LATEST)
    if node_state == "retrying":
        return conn.execute(sql.RETRY_READ_REQUESTS,
                            {"run_id": run_id, "node_id": node_id, "iteration": iteration}
                            ).fetchone
    return conn.execute(sql.SELECT_RUN_REQUESTS, (run_id,)).fetchone
