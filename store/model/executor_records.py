"""The executor's nodes as the orchestrators last saw them (one row of ``executor_nodes``):
which hosts of a Ray cluster are alive or lost, and their resources in total and available."""

from __future__ import annotations

from typing import Any, NamedTuple

from store.db.seam import RowLike
from store.model.run_records import read_json, row_values


def _amounts(value: Any) -> dict[str, float] | None:
    """A stored resource table as names and numbers (anything else read as unknown)."""
    if not isinstance(value, dict):
        return None
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


class ExecutorNodeRecord(NamedTuple):
    """One node of an executor's cluster (a Ray node)."""

    node_id: str
    executor: str
    host: str
    address: str
    alive: bool
    resources: dict[str, float]
    """Everything the node offers (``CPU``, ``memory``, custom resources such as ``claude``)."""
    available: dict[str, float] | None
    """What was free when last seen (None: the cluster did not say)."""
    first_seen_ms: int
    updated_at_ms: int
    lost_at_ms: int | None = None

    @classmethod
    def from_row(cls, row: RowLike) -> ExecutorNodeRecord:
        """The node an ``executor_nodes`` row describes."""
        v = row_values(row)
        return cls(
            node_id=v["node_id"],
            executor=v["executor"],
            host=v["host"],
            address=v["address"],
            alive=bool(v["alive"]),
            resources=_amounts(read_json(v["resources_json"])) or {},
            available=_amounts(read_json(v["available_json"])),
            first_seen_ms=int(v["first_seen_ms"]),
            updated_at_ms=int(v["updated_at_ms"]),
            lost_at_ms=v["lost_at_ms"],
        )

    def in_use(self, name: str) -> float | None:
        """How much of resource ``name`` was taken when last seen (None: unknown)."""
        if self.available is None or name not in self.resources:
            return None
        return max(0.0, float(self.resources[name]) - float(self.available.get(name, 0.0)))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return self._asdict()


class NodeSighting(NamedTuple):
    """A node as an orchestrator sees it now (what :class:`ExecutorNodeRecord` rows are
    written from)."""

    node_id: str
    host: str
    address: str
    alive: bool
    resources: dict[str, float]
    available: dict[str, float] | None = None
