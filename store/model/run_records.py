"""The read model of runs: one value type per run, node, attempt and call, read by the run
records (:class:`store.runs.run_store.RunStore`), the dashboard's reader and the command line
alike, plus the values written with them (a call's usage, a new event, a run's requests).

Each record is built from its row with ``from_row``, which takes what the row holds: the
dashboard's bounded queries leave out columns it never shows, and those read as their
defaults. JSON columns stay the text that was stored (``*_json``) and are decoded when asked
for (``output``, ``depends_on``...), so a listing of thousands of rows decodes nothing it does
not show. Names follow BRIEF section 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from store.db.seam import RowLike
from store.model.token_lanes import CostTotal, TokenUsage

STALE_AFTER_MS = 30_000
"""A running run whose heartbeat is older than this is shown as stale (resumable)."""

TERMINAL_RUN_STATUSES = ("finished", "failed", "cancelled", "handed-off")


def read_json(text: str | None) -> Any:
    """The value of a ``*_json`` column (None stays None); text that is not JSON (or is nested
    too deeply to decode) comes back as it was, so a reader can still show it."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def row_values(row: RowLike | dict[str, Any]) -> dict[str, Any]:
    """A row as a dict of its columns (whichever backend's row it is)."""
    if isinstance(row, dict):
        return row
    return dict(zip(row.keys(), row, strict=True))


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
    seq: int | None = None
    """The call's number in its attempt (from 1): recording it again keeps one row. None for a
    call recorded without one (never deduplicated)."""


class NewEvent(NamedTuple):
    """An event to append. ``payload`` must be JSON-serialisable."""

    type: str
    run_id: str | None = None
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    payload: Mapping[str, Any] | None = None


class RunRequests(NamedTuple):
    """Requests other processes may have written on a run row."""

    cancel_requested_at_ms: int | None
    clear_requested_at_ms: int | None
    clear_reason: str | None
    next_attempt_steers: int = 0
    """Steers waiting for the node's next attempt (read by a retrying attempt's end only)."""


class RunRecord(NamedTuple):
    """One row of ``runs``."""

    run_id: str
    workflow: str
    workflow_path: str | None = None
    status: str = "pending"
    input_json: str | None = None
    output_json: str | None = None
    error: str | None = None
    parent_run_id: str | None = None
    generation: int = 0
    owner_id: str | None = None
    created_at_ms: int = 0
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    heartbeat_at_ms: int | None = None
    updated_at_ms: int = 0
    cancel_requested_at_ms: int | None = None
    clear_requested_at_ms: int | None = None
    clear_reason: str | None = None
    nodes_total: int = 0
    nodes_done: int = 0
    tokens: TokenUsage = TokenUsage()
    cost: CostTotal = CostTotal()
    queued_at_ms: int | None = None
    """When the run was put on the queue for a worker (None: it was not queued)."""
    budget_json: str | None = None
    """The budgets the run is held to (``engine/budget.py``), as JSON; None: none."""
    forked_from: str | None = None
    """The run this one was forked from (``tether fork``); None: not a fork."""
    fork_node: str | None = None
    """The task a fork was forked from (``tether fork RUN NODE``)."""
    fork_json: str | None = None
    """The node a fork starts from and its edit (``engine/fork.py``), as JSON."""

    @classmethod
    def from_row(cls, row: RowLike) -> RunRecord:
        """The run a ``runs`` row (all of its columns or some) describes."""
        v = row_values(row)
        return cls(
            run_id=v["run_id"],
            workflow=v["workflow"],
            workflow_path=v.get("workflow_path"),
            status=v["status"],
            input_json=v.get("input_json"),
            output_json=v.get("output_json"),
            error=v.get("error"),
            parent_run_id=v.get("parent_run_id"),
            generation=int(v.get("generation") or 0),
            owner_id=v.get("owner_id"),
            created_at_ms=int(v["created_at_ms"]),
            started_at_ms=v.get("started_at_ms"),
            finished_at_ms=v.get("finished_at_ms"),
            heartbeat_at_ms=v.get("heartbeat_at_ms"),
            updated_at_ms=int(v.get("updated_at_ms") or 0),
            cancel_requested_at_ms=v.get("cancel_requested_at_ms"),
            clear_requested_at_ms=v.get("clear_requested_at_ms"),
            clear_reason=v.get("clear_reason"),
            nodes_total=int(v.get("nodes_total") or 0),
            nodes_done=int(v.get("nodes_done") or 0),
            tokens=TokenUsage.from_row(v),
            cost=CostTotal.from_row(v),
            queued_at_ms=v.get("queued_at_ms"),
            budget_json=v.get("budget_json"),
            forked_from=v.get("forked_from"),
            fork_node=v.get("fork_node"),
            fork_json=v.get("fork_json"),
        )

    @property
    def is_queued(self) -> bool:
        """Waiting on the queue for a worker (pending, put there by ``--queue``)."""
        return self.status == "pending" and self.queued_at_ms is not None

    @property
    def budgets(self) -> list[dict[str, Any]]:
        """The budgets the run is held to (decoded; empty when none)."""
        value = read_json(self.budget_json)
        return [b for b in value if isinstance(b, dict)] if isinstance(value, list) else []

    @property
    def fork(self) -> dict[str, Any] | None:
        """The node a fork starts from and its edit (decoded); None for a run not forked."""
        value = read_json(self.fork_json)
        return value if isinstance(value, dict) else None

    @property
    def input(self) -> Any:
        """The run's input (decoded)."""
        return read_json(self.input_json)

    @property
    def output(self) -> Any:
        """The run's output (decoded), None until it has one."""
        return read_json(self.output_json)

    @property
    def is_terminal(self) -> bool:
        """True once the run can no longer change on its own (finished, failed, ...)."""
        return self.status in TERMINAL_RUN_STATUSES

    def is_stale(self, now_ms: int) -> bool:
        """True when the run claims to be running but nobody has beaten its heartbeat for more
        than 30 s (its last sign of life: the heartbeat, else its start, else its creation)."""
        if self.status != "running":
            return False
        beat = next(
            at
            for at in (self.heartbeat_at_ms, self.started_at_ms, self.created_at_ms)
            if at is not None
        )
        return now_ms - beat > STALE_AFTER_MS

    def display_status(self, now_ms: int) -> str:
        """The status to show a person: ``stale`` replaces ``running`` when the heartbeat is
        old, ``queued`` a pending run that waits for a worker."""
        if self.is_queued:
            return "queued"
        return "stale" if self.is_stale(now_ms) else self.status

    def elapsed_ms(self, now_ms: int) -> int:
        """Time from start to finish (or to now while it has not finished)."""
        start = self.started_at_ms or self.created_at_ms
        end = self.finished_at_ms or (now_ms if self.status == "running" else self.updated_at_ms)
        return max(0, end - start)

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
            "forked_from": self.forked_from,
            "fork_node": self.fork_node,
            "fork": self.fork,
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
            "budgets": self.budgets,
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
    attempts: int = 0
    cached: bool = False
    depends_on_json: str | None = None
    output_json: str | None = None
    error: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    updated_at_ms: int = 0
    carried_from: str | None = None
    """The run whose attempt produced this (carried) node's output; None: it ran here."""
    input_key: str | None = None
    """What the output was made from (agent, task prompt, output schema), when finished."""

    @classmethod
    def from_row(cls, row: RowLike) -> NodeRecord:
        """The node iteration a ``nodes`` row describes."""
        v = row_values(row)
        return cls(
            run_id=v["run_id"],
            node_id=v["node_id"],
            iteration=int(v["iteration"]),
            state=v["state"],
            attempts=int(v["attempts"]),
            cached=bool(v["cached"]),
            depends_on_json=v["depends_on_json"],
            output_json=v["output_json"],
            error=v["error"],
            started_at_ms=v["started_at_ms"],
            finished_at_ms=v["finished_at_ms"],
            updated_at_ms=int(v["updated_at_ms"]),
            carried_from=v.get("carried_from"),
            input_key=v.get("input_key"),
        )

    @property
    def key(self) -> str:
        """Stable identity of the node iteration across reads: ``node#iteration``."""
        return f"{self.node_id}#{self.iteration}"

    @property
    def depends_on(self) -> list[str]:
        """The node ids this one waits for."""
        if self.depends_on_json in (None, "[]"):  # most nodes: no JSON to decode
            return []
        value = read_json(self.depends_on_json)
        return [str(dep) for dep in value] if isinstance(value, list) else []

    @property
    def output(self) -> Any:
        """The node's output (decoded), None until it has one."""
        return read_json(self.output_json)

    def elapsed_ms(self, now_ms: int) -> int | None:
        """Time from start to finish (or now while running); None before it starts."""
        if self.started_at_ms is None:
            return None
        return max(0, (self.finished_at_ms or now_ms) - self.started_at_ms)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "node_id": self.node_id,
            "iteration": self.iteration,
            "state": self.state,
            "attempts": self.attempts,
            "cached": self.cached,
            "carried_from": self.carried_from,
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
    agent: str | None = None
    model: str | None = None
    prompt: str | None = None
    response_text: str | None = None
    error: str | None = None
    cached: bool = False
    owner_id: str | None = None
    started_at_ms: int = 0
    finished_at_ms: int | None = None
    tokens: TokenUsage = TokenUsage()
    cost: CostTotal = CostTotal()
    details_json: str | None = None
    executor: str | None = None
    """Where the agent ran: None in the orchestrating process, ``ray`` on a Ray cluster."""
    host: str | None = None
    executor_node: str | None = None
    """The Ray node id that ran it (None in-process)."""

    @classmethod
    def from_row(cls, row: RowLike) -> AttemptRecord:
        """The attempt an ``attempts`` row describes."""
        v = row_values(row)
        return cls(
            run_id=v["run_id"],
            node_id=v["node_id"],
            iteration=int(v["iteration"]),
            attempt=int(v["attempt"]),
            state=v["state"],
            agent=v["agent"],
            model=v["model"],
            prompt=v["prompt"],
            response_text=v["response_text"],
            error=v["error"],
            cached=bool(v["cached"]),
            owner_id=v.get("owner_id"),
            started_at_ms=int(v["started_at_ms"]),
            finished_at_ms=v["finished_at_ms"],
            tokens=TokenUsage.from_row(v),
            cost=CostTotal.from_row(v),
            details_json=v.get("details_json"),
            executor=v.get("executor"),
            host=v.get("host"),
            executor_node=v.get("executor_node"),
        )

    @property
    def ran_on(self) -> str:
        """Where it ran, in words: ``host · ray node 5094f00f`` for a Ray attempt, the
        orchestrating process's host (from its owner id) otherwise, ``–`` when unknown."""
        if self.executor is not None:
            node = f" · {self.executor} node {self.executor_node[:8]}" if self.executor_node else ""
            return f"{self.host or '?'}{node}"
        if self.owner_id:
            return f"{self.owner_id.split(':', 1)[0]} (in-process)"
        return "–"

    @property
    def details(self) -> Any:
        """What the agent reported beside its answer (decoded), if anything."""
        return read_json(self.details_json)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
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
            "executor": self.executor,
            "host": self.host,
            "executor_node": self.executor_node,
        }


class CallRecord(NamedTuple):
    """One row of ``calls``. ``kind`` is ``model`` (a model call), ``retry`` (a retried
    request, no tokens) or ``reconciliation`` (an agent's session totals reconciled with its
    per-message calls); only ``model`` rows count as calls."""

    call_id: int
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    agent: str
    model: str | None = None
    simulated: bool = False
    tokens: TokenUsage = TokenUsage()
    context_tokens: int = 0
    bucket: str = ""
    started_at_ms: int = 0
    finished_at_ms: int = 0
    cost_usd: float | None = None
    kind: str = "model"
    detail_json: str | None = None

    @classmethod
    def from_row(cls, row: RowLike) -> CallRecord:
        """The call a ``calls`` row describes."""
        v = row_values(row)
        return cls(
            call_id=int(v["call_id"]),
            run_id=v["run_id"],
            node_id=v["node_id"],
            iteration=int(v["iteration"]),
            attempt=int(v["attempt"]),
            agent=v["agent"],
            model=v["model"],
            simulated=bool(v["simulated"]),
            tokens=TokenUsage.from_row(v),
            context_tokens=int(v["context_tokens"]),
            bucket=v["bucket"],
            started_at_ms=int(v["started_at_ms"]),
            finished_at_ms=int(v["finished_at_ms"]),
            cost_usd=v["cost_usd"],
            kind=v["kind"],
            detail_json=v["detail_json"],
        )

    @property
    def detail(self) -> Any:
        """What explains a retry or reconciliation row (decoded; None for a plain call)."""
        return read_json(self.detail_json)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
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
