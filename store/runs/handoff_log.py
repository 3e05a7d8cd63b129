"""Handoffs: a run continued in a fresh run with distilled state (durable /clear)."""

from __future__ import annotations

from typing import Any

from store.db.seam import Connection
from store.model.history_records import HandoffRecord
from store.model.json_columns import dump_recorded_json
from store.model.run_records import NewEvent, RunRecord
from store.runs import runs_sql as sql
from store.runs.event_log import insert_events
from store.runs.run_log import RunLog
from store.runs.run_params import (
    check_choice,
    new_run_id,
    status_params,
)


class HandoffLog(RunLog):
    """Handoffs: a run continued in a fresh run with distilled state (durable /clear)."""

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
        check_choice(trigger, ("ceiling", "person"), "handoff trigger")
        carried = dump_recorded_json(carried_state)
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
        insert_events(
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
                fork=old.fork,  # a fork's edit holds in every generation of its chain
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
            conn.execute(sql.UPDATE_RUN_STATUS, status_params(from_run_id, "handed-off", now))
            insert_events(
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
