"""Usage and cost over time, and why one run cost what it did, for ``tether usage``, the Usage
view and the Runs view's cost drill-down, on both backends.

Usage over time reads ``usage_hours`` (calls rolled up per run, hour, agent and model as they
are recorded), so a week of a busy workspace is a few thousand rows, not every call; by day,
hour, model, agent or workflow. A run's breakdown reads that run's calls (through
``calls_node_idx``) and node rows: its nodes by cost, its costliest calls, what earlier
(retried) attempts cost, and the models it used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from store.errors import InvalidInputError
from store.model.run_records import CallRecord, NodeRecord
from store.model.token_lanes import LANE_COLUMNS, CostTotal, TokenUsage, each_lane
from store.read.run_search import Rows

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
GROUPINGS = ("day", "hour", "model", "workflow", "agent")

_SUMS = each_lane("CAST(sum(u.{c}) AS BIGINT) AS {c}")
_KEYS = {
    "hour": "u.hour_ms",
    "day": f"(u.hour_ms / {DAY_MS}) * {DAY_MS}",
    "model": "u.model",
    "agent": "u.agent",
    "workflow": "r.workflow",
}


def usage_statement(by: str) -> str:
    """Usage since ``:since`` (and before ``:until``) grouped ``by`` day, hour, model, agent or
    workflow (the join to runs only for workflow)."""
    key = _KEYS[by]
    join = "JOIN runs r ON r.run_id = u.run_id " if by == "workflow" else ""
    order = "key" if by in ("hour", "day") else "cost_usd DESC, key"
    return f"""
SELECT {key} AS key, CAST(sum(u.calls) AS BIGINT) AS calls, {_SUMS},
       sum(u.cost_usd) AS cost_usd, CAST(sum(u.unpriced_calls) AS BIGINT) AS unpriced_calls,
       count(DISTINCT u.run_id) AS runs
FROM usage_hours u {join}WHERE u.hour_ms >= :since AND u.hour_ms < :until
GROUP BY {key} ORDER BY {order}
"""


class UsageRow(NamedTuple):
    """Calls, tokens and cost of one group (an hour, a day, a model, an agent, a workflow)."""

    key: str | int
    calls: int = 0
    tokens: TokenUsage = TokenUsage()
    cost: CostTotal = CostTotal()
    runs: int = 0

    @property
    def cache_share(self) -> float:
        """Share of the context window read from the prompt cache."""
        return self.tokens.cached_share

    @classmethod
    def from_row(cls, row: Any) -> UsageRow:
        """One row of :func:`usage_statement`."""
        key = row["key"]
        return cls(key if isinstance(key, int) else str(key), int(row["calls"] or 0),
                   TokenUsage(*(int(row[c] or 0) for c in LANE_COLUMNS)),
                   CostTotal(float(row["cost_usd"] or 0), int(row["unpriced_calls"] or 0)),
                   int(row["runs"] or 0))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"key": self.key, "calls": self.calls, "runs": self.runs,
                "tokens": self.tokens.as_dict(), "total_tokens": self.tokens.total,
                **self.cost.as_dict(), "cache_read_share": round(self.cache_share, 4)}


def window_start(since_ms: int, by: str) -> int:
    """Where a window starting at ``since_ms`` begins in whole hours (days for ``day``)."""
    step = DAY_MS if by == "day" else HOUR_MS
    return since_ms - since_ms % step


async def usage_over_time(
    rows: Rows, *, by: str, since_ms: int, until_ms: int
) -> list[UsageRow]:
    """Usage from ``since_ms`` (rounded down to its hour, or day for ``day``) to ``until_ms``,
    grouped ``by`` (one of :data:`GROUPINGS`). Raises InvalidInputError for another grouping."""
    if by not in GROUPINGS:
        raise InvalidInputError(f"--by takes one of {', '.join(GROUPINGS)}, not {by!r}.")
    found = await rows.fetch_all(
        usage_statement(by), {"since": window_start(since_ms, by), "until": until_ms}
    )
    return [UsageRow.from_row(r) for r in found]


def filled(rows: Sequence[UsageRow], by: str, since_ms: int, until_ms: int) -> list[UsageRow]:
    """An hour or day series with the empty steps in it (what a chart draws), oldest first."""
    step = DAY_MS if by == "day" else HOUR_MS
    have = {int(row.key): row for row in rows}
    start = window_start(since_ms, by)
    return [have.get(at, UsageRow(at)) for at in range(start, max(start + 1, until_ms), step)]


# -- why a run cost what it did ---------------------------------------------------------------

RUN_CALLS = """
SELECT call_id, run_id, node_id, iteration, attempt, agent, model, simulated, input_tokens,
       cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, context_tokens,
       bucket, started_at_ms, finished_at_ms, cost_usd, kind, NULL AS detail_json
FROM calls WHERE run_id = ?
"""
RUN_NODES = """
SELECT run_id, node_id, iteration, state, attempts, cached, NULL AS depends_on_json,
       NULL AS output_json, NULL AS error, started_at_ms, finished_at_ms, updated_at_ms
FROM nodes WHERE run_id = ?
"""


class NodeCost(NamedTuple):
    """What one node iteration of a run cost, and how much of it went to earlier attempts."""

    key: str
    state: str
    attempts: int
    calls: int
    tokens: TokenUsage
    cost: CostTotal
    retried_usd: float
    """What the calls of attempts before its last one cost (spent on tries that were redone)."""


class CostBreakdown(NamedTuple):
    """Where a run's money went: its total, its nodes by cost, its costliest calls, its models
    (tokens, cost) and what retried attempts cost."""

    run_id: str
    total: CostTotal
    tokens: TokenUsage
    nodes: list[NodeCost]
    top_calls: list[CallRecord]
    models: list[tuple[str, TokenUsage, CostTotal]]
    retried_usd: float


def _cost_of(calls: Sequence[CallRecord]) -> CostTotal:
    priced = [c.cost_usd for c in calls if c.cost_usd is not None]
    unpriced = sum(1 for c in calls if c.cost_usd is None and c.kind != "retry")
    return CostTotal(sum(priced) if priced else None, unpriced)


def breakdown(
    run_id: str, nodes: Sequence[NodeRecord], calls: Sequence[CallRecord], top: int = 10
) -> CostBreakdown:
    """A run's cost, pure: by node iteration (costliest first), top calls, models, retries."""
    by_node: dict[str, list[CallRecord]] = {}
    for call in calls:
        by_node.setdefault(f"{call.node_id}#{call.iteration}", []).append(call)
    state = {n.key: n for n in nodes}
    costs: list[NodeCost] = []
    for key, mine in by_node.items():
        node = state.get(key)
        last = node.attempts if node is not None else max(c.attempt for c in mine)
        earlier = [c for c in mine if c.attempt < last]
        costs.append(NodeCost(
            key, node.state if node else "?", last,
            sum(1 for c in mine if c.kind == "model"),
            TokenUsage.sum(c.tokens for c in mine), _cost_of(mine),
            sum(c.cost_usd or 0.0 for c in earlier),
        ))
    costs.sort(key=lambda n: (-(n.cost.usd or 0.0), -n.tokens.total, n.key))
    models: dict[str, list[CallRecord]] = {}
    for call in calls:
        models.setdefault(call.model or "(no model named)", []).append(call)
    by_model = sorted(
        ((name, TokenUsage.sum(c.tokens for c in mine), _cost_of(mine))
         for name, mine in models.items()),
        key=lambda m: (-(m[2].usd or 0.0), m[0]),
    )
    ranked = sorted(calls, key=lambda c: (-(c.cost_usd or 0.0), -c.context_tokens, c.call_id))
    return CostBreakdown(run_id, _cost_of(calls), TokenUsage.sum(c.tokens for c in calls),
                         costs, ranked[:top], by_model, sum(n.retried_usd for n in costs))


async def run_breakdown(rows: Rows, run_id: str) -> CostBreakdown:
    """Read and break down one run's cost (its calls and node rows)."""
    calls = [CallRecord.from_row(r) for r in await rows.fetch_all(RUN_CALLS, (run_id,))]
    nodes = [NodeRecord.from_row(r) for r in await rows.fetch_all(RUN_NODES, (run_id,))]
    return breakdown(run_id, nodes, calls)
