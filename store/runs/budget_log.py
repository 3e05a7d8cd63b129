"""Money in the run records: spend per UTC day, budget alerts recorded once, the budgets a run
is held to, and which models a workspace's calls used.

The engine decides budgets (``engine/budget.py``); this module only stores and reads what they
need. An alert is one ``budget_alerts`` row per (budget, threshold) and one ``budget.alert``
event, written in the same transaction only when the row is new, so two processes crossing the
same threshold record it once.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from store.db.seam import Connection
from store.model.json_columns import dump_json
from store.model.run_records import NewEvent, RunRecord, row_values
from store.model.token_lanes import CostTotal, TokenUsage
from store.runs import spend_sql as sql
from store.runs.event_log import EventLog, insert_events

_DAY_MS = 86_400_000


def utc_day(at_ms: int) -> str:
    """The UTC day (``YYYY-MM-DD``) an instant falls on: the key of daily spend."""
    return _day_text(at_ms // _DAY_MS)  # UTC has no leap seconds in POSIX time: days are even


@functools.lru_cache(maxsize=64)
def _day_text(day: int) -> str:
    """Day ``day`` since the epoch as ``YYYY-MM-DD`` (formatted once per day: every model
    call asks for its day)."""
    return datetime.fromtimestamp(day * (_DAY_MS // 1000), UTC).strftime("%Y-%m-%d")


class DaySpend(NamedTuple):
    """What the workspace spent on one UTC day."""

    day: str
    calls: int = 0
    tokens: TokenUsage = TokenUsage()
    cost: CostTotal = CostTotal(0.0, 0)


class ModelSpend(NamedTuple):
    """What one model's calls in the workspace used and cost."""

    model: str | None
    rows: int
    calls: int
    tokens: TokenUsage
    cost: CostTotal
    simulated_calls: int


class BudgetLog(EventLog):
    """Spend per day, budget alerts and run budgets (see the module docstring)."""

    async def day_spend(self, day: str) -> DaySpend:
        """The workspace's spend on ``day`` (zeros when nothing was spent)."""
        row = await self.db.fetch_one(sql.SELECT_SPEND_DAY, (day,))
        if row is None:
            return DaySpend(day)
        values = row_values(row)
        return DaySpend(day, int(values["calls"]), TokenUsage.from_row(values),
                        CostTotal.from_row(values))

    def record_alert(
        self, budget_key: str, threshold: int, run_id: str | None, payload: Mapping[str, Any]
    ) -> Awaitable[bool]:
        """Record that ``budget_key`` crossed ``threshold`` percent, with a ``budget.alert``
        event, unless it was recorded already; resolves to True when this call recorded it."""

        def work(conn: Connection) -> bool:
            now = self.now_ms
            cursor = conn.execute(
                sql.INSERT_ALERT,
                {"budget_key": budget_key, "threshold": threshold, "run_id": run_id, "now": now},
            )
            if cursor.rowcount == 0:
                return False
            insert_events(conn, now, [NewEvent("budget.alert", run_id, payload=dict(payload))])
            return True

        return self._submit((), work, flush=False)

    async def alerts_of(self, budget_key: str) -> list[int]:
        """The thresholds ``budget_key`` has crossed so far."""
        rows = await self.db.fetch_all(sql.SELECT_ALERTS_OF, (budget_key,))
        return [int(r[0]) for r in rows]

    async def set_run_budget(self, run_id: str, budgets: Any) -> None:
        """Record the budgets ``run_id`` is held to (shown by ``tether budget``)."""

        def work(conn: Connection) -> Any:
            conn.execute(
                sql.SET_RUN_BUDGET,
                {"run_id": run_id, "budget_json": dump_json(budgets), "now": self.now_ms},
            )

        await self._write((run_id,), work)

    async def runs_with_budgets(self, limit: int) -> list[RunRecord]:
        """Runs held to a budget: running ones first, then the newest."""
        rows = await self.db.fetch_all(sql.RUNS_WITH_BUDGETS, (limit,))
        return [RunRecord.from_row(r) for r in rows]

    async def prices_used(self) -> list[ModelSpend]:
        """Every model the workspace's calls used: rows, calls, tokens and cost."""
        found = []
        for row in await self.db.fetch_all(sql.PRICES_USED):
            v = row_values(row)
            found.append(ModelSpend(
                v["model"], int(v["calls"]), int(v["model_calls"] or 0),
                TokenUsage.from_row(v), CostTotal.from_row(v), int(v["simulated_calls"] or 0),
            ))
        return found
