"""Run record value types: the frozen rows and values :class:`store.runs.run_store.RunStore` reads
and
writes (token usage, calls, events, runs, nodes, attempts, memory blocks, handoffs), each decoded
from its row with ``from_row`` and shown as JSON with ``as_dict``.

Names follow BRIEF section 2. A running run whose heartbeat is older than ``STALE_AFTER_MS`` is
*stale*: :meth:`RunRecord.display_status` reports it so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from store.db.seam import RowLike
from store.model.buckets import context_window
from store.model.json_columns import load_json

STALE_AFTER_MS = 30_000
"""A running run whose heartbeat is older than this is shown as stale (resumable)."""

TERMINAL_RUN_STATUSES = ("finished", "failed", "cancelled", "handed-off")
TERMINAL_NODE_STATES = ("finished", "failed", "cancelled", "skipped")


# -- value types ----------------------------------------------------------------------------


class TokenUsage(NamedTuple):
    """Token counts of one call or one attempt: fresh input, both cache lanes, output, reasoning."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0

    @property
    def context_tokens(self) -> int:
        """Context window: input + cache read + cache write (BRIEF section 2)."""
        return context_window(self.input, self.cache_read, self.cache_write)

    @property
    def total(self) -> int:
        """Every token counted once: the context window plus output and reasoning."""
        return self.context_tokens + self.output + self.reasoning

    @property
    def cached_share(self) -> float:
        """Fraction of the context window that was read from the prompt cache."""
        context = self.context_tokens
        return self.cache_read / context if context else 0.0

    # Element-wise (usage of two calls together), not the tuple's concatenation.
    def __add__(self, other: TokenUsage) -> TokenUsage:  # type: ignore[override]
        return TokenUsage(
            self.input + other.input,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.output + other.output,
            self.reasoning + other.reasoning,
        )

    def as_dict(self) -> dict[str, int]:
        """Plain dict with the column-style names used in JSON output."""
        return {
            "input_tokens": self.input,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
            "output_tokens": self.output,
            "reasoning_tokens": self.reasoning,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | RowLike) -> TokenUsage:
        """Read the five token columns of a runs/attempts/calls/usage_rollups row."""
        return cls(
            int(row["input_tokens"]),
            int(row["cache_read_tokens"]),
            int(row["cache_write_tokens"]),
            int(row["output_tokens"]),
            int(row["reasoning_tokens"]),
        )


CALL_KINDS = ("model", "retry", "reconciliation")
"""What a ``calls`` row is: a model call, a retried request (no tokens) or a reconciliation of
an agent's session totals with its per-message calls. Only ``model`` rows count as calls."""


class CostTotal(NamedTuple):
    """Money spent by some calls: the sum over calls with a known price, and how many calls had
    no known price (their cost is *unknown*, never taken as 0)."""

    usd: float = 0.0
    unpriced_calls: int = 0

    @property
    def known(self) -> bool:
        """True when every call in the total had a price."""
        return self.unpriced_calls == 0

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``cost_usd`` sums the calls with a known price, ``unpriced_calls`` counts
        the others and ``cost_complete`` says whether there were none."""
        return {
            "cost_usd": round(self.usd, 9),
            "unpriced_calls": self.unpriced_calls,
            "cost_complete": self.known,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | RowLike) -> CostTotal:
        """Read ``cost_usd`` and ``unpriced_calls`` of a runs/attempts/usage_rollups row."""
        return cls(float(row["cost_usd"] or 0.0), int(row["unpriced_calls"] or 0))


class CallUsage(NamedTuple):
    """One model call to record: where it happened, which agent/model, and its token usage."""

    run_id: str
    node_id: str
    iteration: int
    attempt: int
    agent: str
    usage: TokenUsage
    model: str | None = None
    simulated: bool = False
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    cost_usd: float | None = None
    kind: str = "model"
    detail: Mapping[str, Any] | None = None


class NewEvent(NamedTuple):
    """An event to append. ``payload`` must be JSON-serialisable."""

    type: str
    run_id: str | None = None
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    payload: Mapping[str, Any] | None = None


class RunRecord(NamedTuple):
    """One row of ``runs``, decoded."""

    run_id: str
    workflow: str
    workflow_path: str | None
    status: str
    input: Any
    output: Any
    error: str | None
    parent_run_id: str | None
    generation: int
    owner_id: str | None
    created_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    heartbeat_at_ms: int | None
    updated_at_ms: int
    cancel_requested_at_ms: int | None
    clear_requested_at_ms: int | None
    clear_reason: str | None
    nodes_total: int
    nodes_done: int
    tokens: TokenUsage
    cost: CostTotal = CostTotal()

    @classmethod
    def from_row(cls, row: RowLike) -> RunRecord:
        return cls(
            run_id=row["run_id"],
            workflow=row["workflow"],
            workflow_path=row["workflow_path"],
            status=row["status"],
            input=load_json(row["input_json"]),
            output=load_json(row["output_json"]),
            error=row["error"],
            parent_run_id=row["parent_run_id"],
            generation=int(row["generation"]),
            owner_id=row["owner_id"],
            created_at_ms=int(row["created_at_ms"]),
            started_at_ms=row["started_at_ms"],
            finished_at_ms=row["finished_at_ms"],
            heartbeat_at_ms=row["heartbeat_at_ms"],
            updated_at_ms=int(row["updated_at_ms"]),
            cancel_requested_at_ms=row["cancel_requested_at_ms"],
            clear_requested_at_ms=row["clear_requested_at_ms"],
            clear_reason=row["clear_reason"],
            nodes_total=int(row["nodes_total"]),
            nodes_done=int(row["nodes_done"]),
            tokens=TokenUsage.from_row(row),
            cost=CostTotal.from_row(row),
        )

    @property
    def is_terminal(self) -> bool:
        """True once the run can no longer change on its own (finished, failed, ...)."""
        return self.status in TERMINAL_RUN_STATUSES

    def is_stale(self, now_ms: int) -> bool:
        """True when the run claims to be running but its heartbeat is older than 30 s."""
        if self.status != "running":
            return False
        beat = self.heartbeat_at_ms if self.heartbeat_at_ms is not None else self.created_at_ms
        return now_ms - beat > STALE_AFTER_MS

    def display_status(self, now_ms: int) -> str:
        """The status to show a person: ``stale`` replaces ``running`` when the heartbeat is old."""
        return "stale" if self.is_stale(now_ms) else self.status

    def as_dict(self, now_ms: int | None = None) -> dict[str, Any]:
        """JSON-ready form (``display_status`` included when ``now_ms`` is given)."""
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "workflow_path": self.workflow_path,
            "status": self.status,
            "input": self.input,
            "output": self.output,
            "error": self.error,
            "parent_run_id": self.parent_run_id,
            "generation": self.generation,
            "created_at_ms": self.created_at_ms,
            "started_at_ms": self.started_at_ms,
            "finished_at_ms": self.finished_at_ms,
            "heartbeat_at_ms": self.heartbeat_at_ms,
            "cancel_requested_at_ms": self.cancel_requested_at_ms,
            "clear_requested_at_ms": self.clear_requested_at_ms,
            "clear_reason": self.clear_reason,
            "nodes_total": self.nodes_total,
            "nodes_done": self.nodes_done,
            "tokens": self.tokens.as_dict(),
            **self.cost.as_dict(),
        }
        if now_ms is not None:
            data["display_status"] = self.display_status(now_ms)
            data["stale"] = self.is_stale(now_ms)
        return data


class NodeRecord(NamedTuple):
    """One row of ``nodes``: a task in a run at one loop iteration."""

    run_id: str
    node_id: str
    iteration: int
    state: str
    attempts: int
    cached: bool
    depends_on: list[str]
    output: Any
    error: str | None
    started_at_ms: int | None
    finished_at_ms: int | None
    updated_at_ms: int

    @classmethod
    def from_row(cls, row: RowLike) -> NodeRecord:
        return cls(
            run_id=row["run_id"],
            node_id=row["node_id"],
            iteration=int(row["iteration"]),
            state=row["state"],
            attempts=int(row["attempts"]),
            cached=bool(row["cached"]),
            depends_on=load_json(row["depends_on_json"]) or [],
            output=load_json(row["output_json"]),
            error=row["error"],
            started_at_ms=row["started_at_ms"],
            finished_at_ms=row["finished_at_ms"],
            updated_at_ms=int(row["updated_at_ms"]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "iteration": self.iteration,
            "state": self.state,
            "attempts": self.attempts,
            "cached": self.cached,
            "depends_on": self.depends_on,
            "output": self.output,
            "error": self.error,
            "started_at_ms": self.started_at_ms,
            "finished_at_ms": self.finished_at_ms,
        }


class AttemptRecord(NamedTuple):
    """One row of ``attempts``; ``tokens`` are the authoritative per-attempt totals."""

    run_id: str
    node_id: str
    iteration: int
    attempt: int
    state: str
    agent: str | None
    model: str | None
    prompt: str | None
    response_text: str | None
    error: str | None
    cached: bool
    owner_id: str | None
    started_at_ms: int
    finished_at_ms: int | None
    tokens: TokenUsage
    cost: CostTotal = CostTotal()
    details: Any = None

    @classmethod
    def from_row(cls, row: RowLike) -> AttemptRecord:
        return cls(
            run_id=row["run_id"],
            node_id=row["node_id"],
            iteration=int(row["iteration"]),
            attempt=int(row["attempt"]),
            state=row["state"],
            agent=row["agent"],
            model=row["model"],
            prompt=row["prompt"],
            response_text=row["response_text"],
            error=row["error"],
            cached=bool(row["cached"]),
            owner_id=row["owner_id"],
            started_at_ms=int(row["started_at_ms"]),
            finished_at_ms=row["finished_at_ms"],
            tokens=TokenUsage.from_row(row),
            cost=CostTotal.from_row(row),
            details=load_json(row["details_json"]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration,
            "attempt": self.attempt,
            "state": self.state,
            "agent": self.agent,
            "model": self.model,
            "error": self.error,
            "cached": self.cached,
            "started_at_ms": self.started_at_ms,
            "finished_at_ms": self.finished_at_ms,
            "tokens": self.tokens.as_dict(),
            **self.cost.as_dict(),
            "details": self.details,
        }


class CallRecord(NamedTuple):
    """One row of ``calls``."""

    call_id: int
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    agent: str
    model: str | None
    simulated: bool
    tokens: TokenUsage
    context_tokens: int
    bucket: str
    started_at_ms: int
    finished_at_ms: int
    cost_usd: float | None = None
    kind: str = "model"
    detail: Any = None

    @classmethod
    def from_row(cls, row: RowLike) -> CallRecord:
        return cls(
            call_id=int(row["call_id"]),
            run_id=row["run_id"],
            node_id=row["node_id"],
            iteration=int(row["iteration"]),
            attempt=int(row["attempt"]),
            agent=row["agent"],
            model=row["model"],
            simulated=bool(row["simulated"]),
            tokens=TokenUsage.from_row(row),
            context_tokens=int(row["context_tokens"]),
            bucket=row["bucket"],
            started_at_ms=int(row["started_at_ms"]),
            finished_at_ms=int(row["finished_at_ms"]),
            cost_usd=row["cost_usd"],
            kind=row["kind"],
            detail=load_json(row["detail_json"]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "kind": self.kind,
            "iteration": self.iteration,
            "attempt": self.attempt,
            "agent": self.agent,
            "model": self.model,
            "simulated": self.simulated,
            "tokens": self.tokens.as_dict(),
            "context_tokens": self.context_tokens,
            "bucket": self.bucket,
            "cost_usd": self.cost_usd,
            "detail": self.detail,
            "started_at_ms": self.started_at_ms,
            "finished_at_ms": self.finished_at_ms,
        }


class EventRecord(NamedTuple):
    """One row of ``events``."""

    seq: int
    at_ms: int
    type: str
    run_id: str | None
    node_id: str | None
    iteration: int | None
    attempt: int | None
    payload: Any

    @classmethod
    def from_row(cls, row: RowLike) -> EventRecord:
        return cls(
            seq=int(row["seq"]),
            at_ms=int(row["at_ms"]),
            type=row["type"],
            run_id=row["run_id"],
            node_id=row["node_id"],
            iteration=row["iteration"],
            attempt=row["attempt"],
            payload=load_json(row["payload_json"]),
        )


class MemoryBlockRecord(NamedTuple):
    """One row of ``memory_blocks``: what recall injected (or why nothing was)."""

    block_id: int
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    query: str | None
    banks: list[str]
    text: str | None
    items: list[Any]
    bytes_used: int
    budget_bytes: int
    truncated: bool
    warning: str | None
    degraded: bool
    duration_ms: int | None
    created_at_ms: int

    @classmethod
    def from_row(cls, row: RowLike) -> MemoryBlockRecord:
        return cls(
            block_id=int(row["block_id"]),
            run_id=row["run_id"],
            node_id=row["node_id"],
            iteration=int(row["iteration"]),
            attempt=int(row["attempt"]),
            query=row["query"],
            banks=load_json(row["banks_json"]) or [],
            text=row["text"],
            items=load_json(row["items_json"]) or [],
            bytes_used=int(row["bytes_used"]),
            budget_bytes=int(row["budget_bytes"]),
            truncated=bool(row["truncated"]),
            warning=row["warning"],
            degraded=bool(row["degraded"]),
            duration_ms=row["duration_ms"],
            created_at_ms=int(row["created_at_ms"]),
        )


class HandoffRecord(NamedTuple):
    """One row of ``handoffs``."""

    handoff_id: int
    from_run_id: str
    to_run_id: str | None
    trigger: str
    reason: str
    generation: int
    tokens_at_handoff: int | None
    carried_state: Any
    carried_bytes: int
    created_at_ms: int

    @classmethod
    def from_row(cls, row: RowLike) -> HandoffRecord:
        return cls(
            handoff_id=int(row["handoff_id"]),
            from_run_id=row["from_run_id"],
            to_run_id=row["to_run_id"],
            trigger=row["trigger"],
            reason=row["reason"],
            generation=int(row["generation"]),
            tokens_at_handoff=row["tokens_at_handoff"],
            carried_state=load_json(row["carried_state_json"]),
            carried_bytes=int(row["carried_bytes"]),
            created_at_ms=int(row["created_at_ms"]),
        )


class RunRequests(NamedTuple):
    """Requests other processes may have written on a run row."""

    cancel_requested_at_ms: int | None
    clear_requested_at_ms: int | None
    clear_reason: str | None
