"""Where attempts ran, and the executor's nodes: written by the orchestrating process (the only
writer of a run's records) as a remote attempt reports where it started, and as it looks at the
cluster."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

from store.db.seam import Connection
from store.model.executor_records import ExecutorNodeRecord, NodeSighting
from store.model.json_columns import dump_json
from store.model.run_records import NewEvent
from store.runs import executor_sql as sql
from store.runs.event_log import EventLog, insert_events


class ExecutorLog(EventLog):
    """Attempt placement and the executor's nodes."""

    def place_attempt(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        attempt: int,
        *,
        executor: str,
        host: str,
        executor_node: str,
        address: str = "",
    ) -> Awaitable[None]:
        """Record where a running attempt's agent runs, with an ``attempt.placed`` event.

        Queued for the next group commit (fenced like every write of a leased run) without a
        flush of its own; the attempt's end, flushed, comes after it."""
        now = self.now_ms
        params = {
            "run_id": run_id,
            "node_id": node_id,
            "iteration": iteration,
            "attempt": attempt,
            "executor": executor,
            "host": host,
            "executor_node": executor_node,
        }
        payload = {"executor": executor, "host": host, "executor_node": executor_node}
        if address:
            payload["address"] = address

        def work(conn: Connection) -> None:
            conn.execute(sql.PLACE_ATTEMPT, params)
            event = NewEvent("attempt.placed", run_id, node_id, iteration, attempt, payload)
            insert_events(conn, now, [event])

        return self._submit((run_id,), work, flush=False)

    async def record_executor_nodes(self, executor: str, nodes: Sequence[NodeSighting]) -> bool:
        """Write what an orchestrator sees of the cluster now. One ``executor.nodes`` event
        goes with it when something a person would notice changed (a node joined or was
        lost, resources taken or freed); returns whether it did."""
        now = self.now_ms

        def work(conn: Connection) -> bool:
            changed = False
            for node in nodes:
                row = conn.execute(sql.SELECT_EXECUTOR_NODE, (node.node_id,)).fetchone()
                before = None if row is None else ExecutorNodeRecord.from_row(row)
                changed = changed or _noticeable(before, node)
                conn.execute(sql.UPSERT_EXECUTOR_NODE, _params(executor, node, now))
            if changed:
                payload: dict[str, Any] = {
                    "executor": executor,
                    "alive": sum(1 for n in nodes if n.alive),
                    "lost": [n.node_id for n in nodes if not n.alive],
                }
                insert_events(conn, now, [NewEvent("executor.nodes", None, payload=payload)])
            return changed

        return bool(await self.db.run_in_transaction(work))

    async def executor_nodes(self, limit: int = 50) -> list[ExecutorNodeRecord]:
        """The executor's nodes, alive first."""
        rows = await self.db.fetch_all(sql.SELECT_EXECUTOR_NODES, (limit,))
        return [ExecutorNodeRecord.from_row(row) for row in rows]


def _params(executor: str, node: NodeSighting, now: int) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "executor": executor,
        "host": node.host,
        "address": node.address,
        "alive": int(node.alive),
        "resources_json": dump_json(node.resources),
        "available_json": None if node.available is None else dump_json(node.available),
        "now": now,
    }


def _noticeable(before: ExecutorNodeRecord | None, now: NodeSighting) -> bool:
    """A new node, one that was lost or came back, or other resources in use."""
    if before is None or before.alive != now.alive:
        return True
    return before.resources != now.resources or before.available != now.available
