"""What the dashboard reads beside the records of :mod:`store.model`: usage summed per node
iteration and per context-window bucket, the headline of each memory block, workers, and chains
of runs linked by handoffs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from store.db.seam import RowLike
from store.model.buckets import BUCKET_LABELS
from store.model.history_records import HandoffRecord
from store.model.run_records import STALE_AFTER_MS, row_values
from store.model.token_lanes import CostTotal, TokenUsage


class NodeUsage(NamedTuple):
    """Token usage summed over every call of one node iteration."""

    node_id: str
    iteration: int
    calls: int = 0
    tokens: TokenUsage = TokenUsage()
    cost: CostTotal = CostTotal()

    @property
    def key(self) -> str:
        """The node iteration it sums, keyed like :attr:`store.model.run_records.NodeRecord.key`."""
        return f"{self.node_id}#{self.iteration}"

    @classmethod
    def from_row(cls, row: RowLike) -> NodeUsage:
        """One row of the per-node usage query."""
        v = row_values(row)
        return cls(v["node_id"], int(v["iteration"]), int(v["calls"]), TokenUsage.from_row(v),
                   CostTotal.from_row(v))


class BucketUsage(NamedTuple):
    """Calls and tokens that fell in one context-window bucket."""

    bucket: str
    calls: int = 0
    tokens: TokenUsage = TokenUsage()
    cost: CostTotal = CostTotal()

    @classmethod
    def from_row(cls, row: RowLike) -> BucketUsage:
        """One row of a usage rollup (or of the per-node bucket sums)."""
        v = row_values(row)
        return cls(v["bucket"], int(v["calls"]), TokenUsage.from_row(v), CostTotal.from_row(v))


def histogram(rows: Sequence[BucketUsage]) -> list[BucketUsage]:
    """One entry per bucket in the BRIEF's order, empty buckets included."""
    by_label = {row.bucket: row for row in rows}
    return [by_label.get(label, BucketUsage(label)) for label in BUCKET_LABELS]


class MemorySummary(NamedTuple):
    """The headline numbers of a node's memory block (for the node table)."""

    node_id: str
    iteration: int
    bytes_used: int = 0
    budget_bytes: int = 0
    truncated: int = 0
    warning: str | None = None
    degraded: int = 0


class WorkerRow(NamedTuple):
    """A ``tether worker`` process as it last reported itself."""

    worker_id: str
    host: str
    pid: int
    started_at_ms: int
    heartbeat_at_ms: int
    runs_held: int = 0

    def is_alive(self, now_ms: int) -> bool:
        """Heartbeat recent enough (a killed worker stops beating)."""
        return now_ms - self.heartbeat_at_ms <= STALE_AFTER_MS


class HandoffChain(NamedTuple):
    """Runs linked by handoffs, oldest generation first."""

    run_ids: list[str]
    handoffs: list[HandoffRecord]

    @property
    def key(self) -> str:
        """The chain's identity: its first run."""
        return self.run_ids[0]
