"""Model calls and token usage of runs: one ``calls`` row per call, rolled up per run and for
the whole workspace by context bucket (:mod:`store.model.buckets`), and per UTC day (the
workspace's daily budgets, :mod:`store.runs.budget_log`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

from store.db.seam import Connection
from store.model.buckets import bucket_for
from store.model.json_columns import dump_recorded_json
from store.model.run_records import CallRecord, CallUsage, NewEvent
from store.model.token_lanes import LANE_COLUMNS, TokenUsage
from store.runs import calls_sql as sql
from store.runs import runs_sql, spend_sql
from store.runs.budget_log import utc_day
from store.runs.event_log import EventLog, add_summed, insert_events

WORKSPACE_ROLLUP = ""
"""The ``usage_rollups.run_id`` that holds workspace-wide totals."""

_SUMMED = ("counted", *LANE_COLUMNS, "cost_usd", "unpriced")
"""The parameters the rollup upserts (by bucket, by hour, per day) add to their row."""


def _add_to_day(
    days: dict[str, dict[str, Any]],
    day: str,
    counted: int,
    tokens: dict[str, int],
    cost: dict[str, Any],
) -> None:
    """Sum one call into its UTC day's spend (one upsert per day per batch of calls)."""
    row = days.setdefault(
        day,
        {"day": day, "counted": 0, "cost_usd": None, "unpriced": 0, **dict.fromkeys(tokens, 0)},
    )
    row["counted"] += counted
    row["unpriced"] += cost["unpriced"]
    for lane, value in tokens.items():
        row[lane] += value
    if cost["cost_usd"] is not None:
        row["cost_usd"] = (row["cost_usd"] or 0.0) + cost["cost_usd"]


class CallLog(EventLog):
    """Records model calls and reads them and their usage rollups back."""

    async def record_call(self, call: CallUsage) -> None:
        """Record one model call (see :meth:`record_calls`)."""
        await self.record_calls([call])

    async def record_calls(self, calls: Sequence[CallUsage]) -> None:
        """Record model calls: one ``calls`` row each, plus the run and workspace rollups by
        bucket and the run's token columns, all in one transaction, with a ``call`` event each.
        """
        if calls:
            await self.queue_calls(calls)

    def queue_calls(self, calls: Sequence[CallUsage]) -> Awaitable[None]:
        """:meth:`record_calls` as a queued write: it joins the next group commit and the
        returned future resolves once it is committed. No flush to disk is asked for (see
        :meth:`Database.submit`); the engine waits for an attempt's calls with its end, whose
        commit is flushed."""
        calls = list(calls)

        def work(conn: Connection) -> Any:
            now = self.now_ms
            rows = [_call_row(call, now) for call in calls]
            if getattr(conn, "waits_for_results", False):
                # PostgreSQL: each call is one statement and nothing is read back (whether
                # the row was new would cost a round trip of its own).
                for row in rows:
                    conn.execute(sql.RECORD_CALL, {
                        **row, "payload_json": dump_recorded_json(row["payload"])})
                return
            events: list[NewEvent] = []
            days: dict[str, dict[str, Any]] = {}
            for call, row in zip(calls, rows, strict=True):
                if not conn.execute(sql.INSERT_CALL, row).rowcount:
                    continue  # this call of this attempt is recorded already: counted once
                # Summed with the other calls of the group commit when it holds them.
                add_summed(conn, sql.UPSERT_ROLLUPS, (row["run_id"], row["bucket"]), row,
                           _SUMMED)
                add_summed(conn, sql.UPSERT_USAGE_HOUR, (
                    row["run_id"], row["hour_ms"], row["agent"], row["hour_model"]), row,
                    _SUMMED)
                add_summed(conn, runs_sql.UPDATE_RUN_ROW, (row["run_id"],), row, _SUMMED,
                           runs_sql.RUN_ROW_LATEST)
                _add_to_day(days, row["day"], row["counted"], row["payload"]["tokens"],
                            {"cost_usd": row["cost_usd"], "unpriced": row["unpriced"]})
                events.append(NewEvent("call", call.run_id, call.node_id, call.iteration,
                                       call.attempt, row["payload"]))
            for day in days.values():
                add_summed(conn, spend_sql.UPSERT_SPEND_DAY, (day["day"],), day, _SUMMED)
            insert_events(conn, now, events)

        return self._submit((call.run_id for call in calls), work, flush=False, hold=True)

    async def list_calls(self, run_id: str, node_id: str | None = None) -> list[CallRecord]:
        """Calls of a run (or of one node of it), in the order they were recorded."""
        if node_id is None:
            rows = await self.db.fetch_all(sql.SELECT_CALLS_RUN, (run_id,))
        else:
            rows = await self.db.fetch_all(sql.SELECT_CALLS_NODE, (run_id, node_id))
        return [CallRecord.from_row(r) for r in rows]

    async def calls_of_attempts(
        self, run_id: str, node_id: str, iteration: int, first: int, last: int
    ) -> list[CallRecord]:
        """Calls of attempts ``first`` to ``last`` of one node iteration, in order (a page of
        attempts reads only its own calls)."""
        rows = await self.db.fetch_all(
            sql.SELECT_CALLS_OF_ATTEMPTS, (run_id, node_id, iteration, first, last)
        )
        return [CallRecord.from_row(r) for r in rows]

    async def usage_by_bucket(
        self, run_id: str = WORKSPACE_ROLLUP
    ) -> dict[str, tuple[int, TokenUsage]]:
        """``{bucket: (calls, usage)}`` for a run, or for the workspace with ``run_id=''``."""
        rows = await self.db.fetch_all(sql.SELECT_ROLLUPS, (run_id,))
        return {r["bucket"]: (int(r["calls"]), TokenUsage.from_row(r)) for r in rows}


def _call_row(call: CallUsage, now: int) -> dict[str, Any]:
    """Every parameter the statements recording ``call`` take (its row, rollups, usage hour,
    run tokens, day) and its event's payload (``payload``)."""
    usage = call.usage
    context = usage.context_tokens
    bucket = bucket_for(context)
    tokens = usage.as_dict()
    started = call.started_at_ms if call.started_at_ms is not None else now
    finished = call.finished_at_ms if call.finished_at_ms is not None else now
    return {
        "run_id": call.run_id,
        "node_id": call.node_id,
        "iteration": call.iteration,
        "attempt": call.attempt,
        "agent": call.agent,
        "model": call.model,
        "simulated": int(call.simulated),
        **tokens,
        "context_tokens": context,
        "bucket": bucket,
        "started_at_ms": started,
        "finished_at_ms": finished,
        "cost_usd": call.cost_usd,
        "kind": call.kind,
        "detail_json": None if call.detail is None else dump_recorded_json(dict(call.detail)),
        "call_seq": call.seq,
        # A retry or reconciliation row carries tokens and cost but is not a call of its
        # own: the rollups count model calls only. A retry costs nothing.
        "counted": int(call.kind == "model"),
        "unpriced": int(call.cost_usd is None and call.kind != "retry"),
        "hour_ms": started - started % sql.HOUR_MS,
        "hour_model": call.model or "",
        "day": utc_day(call.finished_at_ms or now),
        "now": now,
        "nodes_done": None,  # its run's row: the progress is its node end's (UPDATE_RUN_ROW)
        "nodes_total": None,
        "payload": {
            "agent": call.agent,
            "model": call.model,
            "simulated": call.simulated,
            "context_tokens": context,
            "bucket": bucket,
            "tokens": tokens,
            "kind": call.kind,
            "cost_usd": call.cost_usd,
        },
    }
