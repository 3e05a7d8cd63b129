"""Nodes: a run's tasks at each loop iteration, written with their events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from store.db.seam import Connection
from store.errors import NotFoundError
from store.model.ids import validate_node_id, validate_run_id
from store.model.json_columns import dump_json, dump_recorded_json, recorded_text
from store.model.run_records import NewEvent, NodeRecord
from store.model.states import NODE_STATES
from store.runs import runs_sql as sql
from store.runs.event_log import EventLog, insert_events
from store.runs.run_params import (
    check_choice,
    progress_params,
    write_node,
)


class NodeLog(EventLog):
    """Nodes: a run's tasks at each loop iteration, written with their events."""

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
        input_key: str | None = None,
        carried_from: str | None = None,
    ) -> dict[str, Any]:
        check_choice(state, NODE_STATES, "node state")
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
            "output_json": dump_recorded_json(output) if set_output else None,
            "set_output": set_output,
            "error": recorded_text(error),
            "set_error": set_error or error is not None,
            "input_key": input_key,
            "carried_from": carried_from,
            "now": now,
        }

    @staticmethod
    def _node_event(params: Mapping[str, Any]) -> NewEvent:
        payload: dict[str, Any] = {"state": params["state"]}
        if params["attempts"] is not None:
            payload["attempts"] = params["attempts"]  # a replay of the log needs the count
        if params["cached"]:
            payload["cached"] = True
        if params["error"] is not None:
            payload["error"] = params["error"]
        if params["carried_from"] is not None:
            payload["carried_from"] = params["carried_from"]
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
        input_key: str | None = None,
        carried_from: str | None = None,
    ) -> None:
        """Create or update a node's state (with a ``node.state`` event).

        ``output`` is stored only when ``set_output`` is true (None is a valid output).
        ``nodes_done`` also updates the run's progress counter in the same transaction.
        ``input_key`` records what a finished output was made from, ``carried_from`` the run
        that made it when this run took it over (a handoff's successor, ``engine.run.carry``).
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
            input_key=input_key,
            carried_from=carried_from,
        )

        def work(conn: Connection) -> Any:
            write_node(conn, params)
            if nodes_done is not None:
                conn.execute(
                    sql.UPDATE_PROGRESS,
                    progress_params(run_id, params["now"], nodes_done=nodes_done),
                )
            insert_events(conn, params["now"], [self._node_event(params)])

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
                    sql.UPDATE_PROGRESS, progress_params(run_id, now, nodes_total=nodes_total)
                )
            insert_events(conn, now, [self._node_event(p) for p in params])

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
            at = "" if iteration is None else f" at iteration {iteration}"
            raise NotFoundError(f"Run {run_id} has no node {node_id!r}{at}.")
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
