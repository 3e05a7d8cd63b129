"""Steers: a person's message for a running node, delivered at most once.

A steer is ``queued`` by ``tether steer`` or the dashboard's ``m`` (refused at once, writing
nothing, for a node that ended or a run that did); the attempt running the node then
``delivered`` it (its agent took it at the next point where it can: Claude Code's stream-json
input, an HTTP agent's next tool-loop turn) or ``refused`` it with a sentence (an agent that
cannot take input mid-run; the node ended before it could). A steer sent for the **next
attempt** (``deliver = 'next-attempt'``: ``tether steer --next-attempt``, for an agent that
runs one shot) waits for the node's next attempt (a retry, or a resume of the run) and is
prepended to its prompt; when the node finishes first it is refused in the same transaction.
An attempt whose start took one but whose agent never ran (the run stopped while that start
was committed) gives it back in the transaction that ends it: queued again, with a
``steer.queued`` event naming that attempt (``returned_by``), for the attempt after.
Each change is one transaction with its event (``steer.queued``, ``steer.delivered``,
``steer.refused``); the change from ``queued`` is conditional on the row still being queued,
so no steer is delivered twice.
"""

from __future__ import annotations

import getpass
from typing import Any, NamedTuple

from store.db.seam import Connection, RowLike
from store.errors import InvalidInputError, NotFoundError
from store.model.ids import random_hex
from store.model.run_records import TERMINAL_RUN_STATUSES, NewEvent, row_values
from store.model.states import ENDED_NODE_STATES
from store.runs.event_log import insert_events
from store.runs.run_log import RunLog
from store.runs.steers_sql import (
    DECIDE_STEER,
    INSERT_STEER,
    NODE_STATE,
    QUEUED_FOR_NODE,
    QUEUED_NEXT_ATTEMPT,
    QUEUED_OF_RUN,
    RETURN_STEER,
    STEERS_OF_RUN,
)

MAX_STEER_BYTES = 16_384
"""The longest message a steer may carry."""
NEXT_ATTEMPT = "next-attempt"
"""``steers.deliver`` of a steer the node's next attempt reads (prepended to its prompt)."""
NO_NEXT_ATTEMPT_STATES = ("finished", "skipped")
"""The node states no further attempt follows (not even a resume): a steer for the next
attempt is refused in them."""

class SteerRecord(NamedTuple):
    """One steer: the message, who sent it, and what became of it."""

    steer_id: str
    run_id: str
    node_id: str
    iteration: int
    message: str
    sent_by: str
    state: str
    created_at_ms: int
    decided_at_ms: int | None = None
    attempt: int | None = None
    refusal: str | None = None
    deliver: str = "now"
    """``now`` (the running attempt, when its agent can take it) or ``next-attempt``."""

    @classmethod
    def from_row(cls, row: RowLike) -> SteerRecord:
        """The steer a ``steers`` row describes."""
        v = row_values(row)
        return cls(v["steer_id"], v["run_id"], v["node_id"], int(v["iteration"]), v["message"],
                   v["sent_by"], v["state"], int(v["created_at_ms"]), v["decided_at_ms"],
                   v["attempt"], v["refusal"], v.get("deliver") or "now")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return self._asdict()


def default_sender() -> str:
    """Who sends a steer when nobody is named: the login name of this process."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "someone"


def check_message(message: str) -> str:
    """A steer's message, or InvalidInputError (empty, too long)."""
    if not message.strip():
        raise InvalidInputError("A steer needs a message; give the text the node should read.")
    size = len(message.encode("utf-8", "surrogatepass"))
    if size > MAX_STEER_BYTES:
        raise InvalidInputError(
            f"The message is {size:,} bytes; a steer holds at most {MAX_STEER_BYTES:,}."
        )
    return message


def refusal_on_queue(run_id: str, node_id: str, node_state: str, run_status: str,
                     next_attempt: bool) -> str | None:
    """Why a steer cannot be queued for the node (one sentence), or None (pure policy). A
    steer for now needs a node and a run that have not ended; one for the next attempt only a
    node that another attempt may still come to (a failed node of a run that can be resumed)."""
    if next_attempt:
        if node_state in NO_NEXT_ATTEMPT_STATES:
            return (f"Node {node_id} already {node_state}, so no attempt of it will come; fork "
                    f"the run from it instead (tether fork {run_id} {node_id}).")
        if run_status in ("finished", "handed-off"):
            return f"Run {run_id} is {run_status}; it is not resumed, so no attempt will come."
        return None
    if node_state in ENDED_NODE_STATES:
        return (f"Node {node_id} already {node_state}, so it cannot take a message; fork the "
                f"run from it instead (tether fork {run_id} {node_id}).")
    if run_status in TERMINAL_RUN_STATUSES:
        return f"Run {run_id} is {run_status}; its nodes take no messages."
    return None


def decide_in(conn: Connection, now: int, steer: SteerRecord, attempt: int,
              refusal: str | None = None) -> bool:
    """Inside a write: mark ``steer`` delivered by ``attempt`` (or refused with the sentence)
    with its event; False when it was no longer queued (it must not be delivered again)."""
    state = "refused" if refusal is not None else "delivered"
    cursor = conn.execute(DECIDE_STEER, {"state": state, "now": now, "attempt": attempt,
                                         "refusal": refusal, "steer_id": steer.steer_id})
    if cursor.rowcount != 1:
        return False
    payload: dict[str, Any] = {"steer_id": steer.steer_id, "attempt": attempt}
    if refusal is not None:
        payload["refusal"] = refusal
    if steer.deliver == NEXT_ATTEMPT:
        payload["deliver"] = NEXT_ATTEMPT
    insert_events(conn, now, [NewEvent(f"steer.{state}", steer.run_id, steer.node_id,
                                       steer.iteration, attempt, payload)])
    return True


def no_next_attempt(node_id: str, node_state: str, attempt: int) -> str:
    """Why a steer for the next attempt was refused: its node ended for good (one sentence)."""
    return (f"Node {node_id} {node_state} at attempt {attempt}, so no next attempt came to "
            "read the message; nothing was delivered.")


def refuse_next_attempt_steers(conn: Connection, now: int, run_id: str, node_id: str,
                               iteration: int, attempt: int, node_state: str) -> None:
    """Inside the write that ends a node for good (``finished``, ``skipped``): refuse what
    still waits for its next attempt, which will not come."""
    rows = conn.execute(QUEUED_NEXT_ATTEMPT, (run_id, node_id, iteration)).fetchall()
    for steer in (SteerRecord.from_row(r) for r in rows):
        decide_in(conn, now, steer, attempt, no_next_attempt(node_id, node_state, attempt))


def return_in(conn: Connection, now: int, steer: SteerRecord, attempt: int) -> None:
    """Inside the write that ends an attempt whose agent never ran (the run stopped while its
    start was committed): a steer its start took for the node's next attempt waits again,
    with a ``steer.queued`` event saying so; the next attempt that runs takes it."""
    cursor = conn.execute(RETURN_STEER, {"steer_id": steer.steer_id, "attempt": attempt})
    if cursor.rowcount == 1:
        insert_events(conn, now, [NewEvent(
            "steer.queued", steer.run_id, steer.node_id, steer.iteration, attempt,
            {"steer_id": steer.steer_id, "deliver": NEXT_ATTEMPT, "returned_by": attempt})])


class SteerLog(RunLog):
    """Queueing, delivering and refusing steers (see the module docstring)."""

    async def queue_steer(
        self, run_id: str, node_id: str, iteration: int, message: str, sent_by: str,
        *, next_attempt: bool = False,
    ) -> SteerRecord:
        """Queue ``message`` for the node iteration (``next_attempt``: for its next attempt,
        prepended to that attempt's prompt). Raises NotFoundError (no such run or node) or
        InvalidInputError (one sentence; nothing written) when it cannot be delivered
        (:func:`refusal_on_queue`), or the message is empty or too long."""
        check_message(message)
        run = await self.get_run(run_id)
        steer_id = "s-" + random_hex(12)

        def work(conn: Connection) -> Any:
            found = conn.execute(NODE_STATE, (run_id, node_id, iteration)).fetchall()
            if not found:
                raise NotFoundError(
                    f"Run {run_id} has no node {node_id!r} at iteration {iteration}."
                )
            refusal = refusal_on_queue(run_id, node_id, found[0][0], run.status, next_attempt)
            if refusal is not None:
                raise InvalidInputError(refusal)
            now = self.now_ms
            deliver = NEXT_ATTEMPT if next_attempt else "now"
            conn.execute(INSERT_STEER, {"steer_id": steer_id, "run_id": run_id,
                                        "node_id": node_id, "iteration": iteration,
                                        "message": message, "sent_by": sent_by, "now": now,
                                        "deliver": deliver})
            payload = {"steer_id": steer_id, "sent_by": sent_by, "message": message[:300]}
            if next_attempt:
                payload["deliver"] = NEXT_ATTEMPT
            insert_events(conn, now, [NewEvent(
                "steer.queued", run_id, node_id, iteration, None, payload)])
            return SteerRecord.from_row(
                conn.execute("SELECT * FROM steers WHERE steer_id = ?", (steer_id,)).fetchone())

        record: SteerRecord = await self._write((run_id,), work)
        return record

    async def queued_steers(self, run_id: str, node_id: str, iteration: int) -> list[SteerRecord]:
        """The node iteration's steers still waiting, oldest first."""
        rows = await self.db.fetch_all(QUEUED_FOR_NODE, (run_id, node_id, iteration))
        return [SteerRecord.from_row(r) for r in rows]

    async def queued_steers_of_run(self, run_id: str) -> list[tuple[SteerRecord, str | None, int]]:
        """The run's steers still waiting (for now and for the next attempt), oldest first,
        each with its node's state and attempt count (one read for the whole run: what a
        run's monitor polls)."""
        rows = await self.db.fetch_all(QUEUED_OF_RUN, (run_id,))
        return [(SteerRecord.from_row(r), r["node_state"], int(r["node_attempts"] or 0))
                for r in rows]

    async def decide_steer(
        self, steer: SteerRecord, attempt: int, *, refusal: str | None = None
    ) -> bool:
        """Mark ``steer`` delivered by ``attempt`` (or refused with the sentence); False when
        it was no longer queued (decided already: it must not be delivered again)."""
        def work(conn: Connection) -> Any:
            return decide_in(conn, self.now_ms, steer, attempt, refusal)

        return bool(await self._write((steer.run_id,), work))

    async def next_attempt_steers(
        self, run_id: str, node_id: str, iteration: int
    ) -> list[SteerRecord]:
        """The steers waiting for the node iteration's next attempt, oldest first (the
        attempt's start marks them delivered: ``AttemptLog.start_attempt(steers=)``)."""
        rows = await self.db.fetch_all(QUEUED_NEXT_ATTEMPT, (run_id, node_id, iteration))
        return [SteerRecord.from_row(r) for r in rows]

    async def list_steers(self, run_id: str, node_id: str | None = None) -> list[SteerRecord]:
        """A run's steers (of one node when given), oldest first."""
        rows = [SteerRecord.from_row(r) for r in await self.db.fetch_all(STEERS_OF_RUN,
                                                                          (run_id,))]
        return [r for r in rows if node_id is None or r.node_id == node_id]
