"""What the dispatch guard reads before every attempt: a clear request and the token totals."""

from __future__ import annotations

from dataclasses import dataclass

from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs import guard_sql as sql


@dataclass(frozen=True)
class DispatchState:
    """A run's pending clear request (if any), its generation and its token totals."""

    clear_requested: bool
    clear_reason: str | None
    generation: int
    tokens: TokenUsage


async def dispatch_state(db: Database, run_id: str) -> DispatchState | None:
    """The run's dispatch state as committed right now, or None when the run is gone."""
    row = await db.fetch_one(sql.DISPATCH_STATE, (run_id,))
    if row is None:
        return None
    return DispatchState(
        row["clear_requested_at_ms"] is not None,
        row["clear_reason"],
        int(row["generation"]),
        TokenUsage.from_row(row),
    )
