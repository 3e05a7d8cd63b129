"""The read model of what runs leave behind: events, memory blocks and handoffs, read by the run
records, the dashboard's reader and the command line alike (see :mod:`store.model.run_records`
for how rows become records)."""

from __future__ import annotations

from typing import Any, NamedTuple

from store.db.seam import RowLike
from store.model.run_records import read_json, row_values


class EventRecord(NamedTuple):
    """One entry of the append-only event log."""

    seq: int
    at_ms: int
    type: str
    run_id: str | None = None
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    payload_json: str | None = None

    @classmethod
    def from_row(cls, row: RowLike) -> EventRecord:
        """The event an ``events`` row describes."""
        v = row_values(row)
        return cls(
            seq=int(v["seq"]),
            at_ms=int(v["at_ms"]),
            type=v["type"],
            run_id=v["run_id"],
            node_id=v["node_id"],
            iteration=v["iteration"],
            attempt=v["attempt"],
            payload_json=v["payload_json"],
        )

    @property
    def payload(self) -> Any:
        """What the event carries (decoded)."""
        return read_json(self.payload_json)


class MemoryBlockRecord(NamedTuple):
    """One row of ``memory_blocks``: what recall injected before a node's prompt (or the
    warning saying why nothing was)."""

    block_id: int
    run_id: str
    node_id: str
    iteration: int
    attempt: int = 1
    query: str | None = None
    banks_json: str | None = None
    text: str | None = None
    items_json: str = "[]"
    bytes_used: int = 0
    budget_bytes: int = 0
    truncated: bool = False
    warning: str | None = None
    degraded: bool = False
    duration_ms: int | None = None
    created_at_ms: int = 0

    @classmethod
    def from_row(cls, row: RowLike) -> MemoryBlockRecord:
        """The block a ``memory_blocks`` row describes."""
        v = row_values(row)
        return cls(
            block_id=int(v["block_id"]),
            run_id=v["run_id"],
            node_id=v["node_id"],
            iteration=int(v["iteration"]),
            attempt=int(v["attempt"]),
            query=v["query"],
            banks_json=v["banks_json"],
            text=v["text"],
            items_json=v["items_json"],
            bytes_used=int(v["bytes_used"]),
            budget_bytes=int(v["budget_bytes"]),
            truncated=bool(v["truncated"]),
            warning=v["warning"],
            degraded=bool(v["degraded"]),
            duration_ms=v["duration_ms"],
            created_at_ms=int(v["created_at_ms"]),
        )

    @property
    def items(self) -> list[Any]:
        """The recalled items, as stored (a list)."""
        value = read_json(self.items_json)
        return value if isinstance(value, list) else []

    @property
    def item_dicts(self) -> list[dict[str, Any]]:
        """The recalled items for display: each a dict (anything else as ``{"value": ...}``)."""
        return [item if isinstance(item, dict) else {"value": item} for item in self.items]

    @property
    def banks(self) -> list[str]:
        """The banks (namespaces) recall searched."""
        value = read_json(self.banks_json)
        if isinstance(value, list):
            return [str(bank) for bank in value]
        return [] if value is None else [str(value)]


class HandoffRecord(NamedTuple):
    """One handoff: a run stopped and continued in a fresh run with distilled state."""

    handoff_id: int
    from_run_id: str
    to_run_id: str | None
    trigger: str
    reason: str
    generation: int
    tokens_at_handoff: int | None = None
    carried_state_json: str = "{}"
    carried_bytes: int = 0
    created_at_ms: int = 0

    @classmethod
    def from_row(cls, row: RowLike) -> HandoffRecord:
        """The handoff a ``handoffs`` row describes."""
        v = row_values(row)
        return cls(
            handoff_id=int(v["handoff_id"]),
            from_run_id=v["from_run_id"],
            to_run_id=v["to_run_id"],
            trigger=v["trigger"],
            reason=v["reason"],
            generation=int(v["generation"]),
            tokens_at_handoff=v["tokens_at_handoff"],
            carried_state_json=v["carried_state_json"],
            carried_bytes=int(v["carried_bytes"]),
            created_at_ms=int(v["created_at_ms"]),
        )

    @property
    def carried_state(self) -> Any:
        """The distilled state the next run started from."""
        return read_json(self.carried_state_json)
