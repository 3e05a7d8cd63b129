"""A run as it was at one event of its log: pure functions over the run's event rows.

The event log records every change to a run's rows in the same transaction as the change
(:mod:`store.runs.event_log`), so folding a run's events up to event N gives what the read
model held right after event N committed: each node iteration's state, attempt count, cache
mark, error and times; the tokens and cost of every recorded call (per node iteration, per
context-window bucket and for the run); the memory blocks recall had saved; and the notes the
run had proposed. :class:`ReplayLog` walks a run's events in both directions and keeps a few
folded checkpoints, so moving the cursor anywhere in 100 000 events folds at most one stretch
between checkpoints. Nothing here reads or writes the database.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from store.model.history_records import EventRecord
from store.model.run_records import NodeRecord
from store.model.states import ENDED_NODE_STATES
from store.model.token_lanes import LANE_COLUMNS, CostTotal, TokenUsage
from store.read.dashboard_rows import BucketUsage, MemorySummary, NodeUsage, histogram

RESET_TO_PENDING = ("running", "retrying")
"""The node states a resume, a claim or a cancel of an unowned run puts back to pending."""


class ProposedNote(NamedTuple):
    """A note the run wrote (retained on completion, or remembered through the memory tool)."""

    note_id: str
    node_key: str
    status: str
    """Its status when it was written (``pending``: proposed for review)."""
    at_ms: int
    seq: int


class BlockSeen(NamedTuple):
    """A memory block recall had saved for a node iteration, as its ``memory.block`` event said."""

    summary: MemorySummary
    block_id: int
    items: int
    at_ms: int
    seq: int


@dataclass(slots=True)
class _Node:
    state: str
    attempts: int = 0
    cached: bool = False
    error: str | None = None
    carried_from: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    updated_at_ms: int = 0

    def clone(self) -> _Node:
        return _Node(self.state, self.attempts, self.cached, self.error, self.carried_from,
                     self.started_at_ms, self.finished_at_ms, self.updated_at_ms)


@dataclass(slots=True)
class _Usage:
    calls: int = 0
    tokens: TokenUsage = TokenUsage()
    usd: float | None = None
    unpriced: int = 0

    def add(self, kind: str, usage: TokenUsage, cost_usd: float | None) -> None:
        # The same counting as the per-node usage query: model calls are calls, a retry row
        # carries tokens but no price and is not an unpriced call.
        self.calls += int(kind == "model")
        self.tokens = self.tokens + usage
        if cost_usd is not None:
            self.usd = (self.usd or 0.0) + float(cost_usd)
        elif kind != "retry":
            self.unpriced += 1

    @property
    def cost(self) -> CostTotal:
        return CostTotal(self.usd, self.unpriced)

    def clone(self) -> _Usage:
        return _Usage(self.calls, self.tokens, self.usd, self.unpriced)


@dataclass
class ReplayFold:
    """What the events folded so far say; :meth:`apply` takes the next event of the run."""

    run_status: str = "pending"
    nodes: dict[str, _Node] = field(default_factory=dict)
    usage: dict[str, _Usage] = field(default_factory=dict)
    buckets: dict[str, _Usage] = field(default_factory=dict)
    run: _Usage = field(default_factory=_Usage)
    blocks: dict[str, BlockSeen] = field(default_factory=dict)
    notes: dict[str, ProposedNote] = field(default_factory=dict)
    _cancel_requested: bool = False

    def copy(self) -> ReplayFold:
        """An independent copy (what is mutable is copied; records are immutable)."""
        return ReplayFold(
            self.run_status,
            {key: node.clone() for key, node in self.nodes.items()},
            {key: sums.clone() for key, sums in self.usage.items()},
            {key: sums.clone() for key, sums in self.buckets.items()},
            self.run.clone(),
            dict(self.blocks),
            dict(self.notes),
            self._cancel_requested,
        )

    def apply(self, event: EventRecord) -> None:
        """Fold one event (events of other runs and of unknown types change nothing)."""
        payload = event.payload if event.payload_json else None
        data: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
        kind = event.type
        cancel_requested, self._cancel_requested = self._cancel_requested, False
        if kind == "node.state":
            self._node_state(event, data)
        elif kind == "attempt.started":
            node = self._node(event)
            if node is not None and event.attempt is not None:
                # Logs written before node.state carried the count say it only here.
                node.attempts = max(node.attempts, int(event.attempt))
        elif kind == "call":
            self._call(event, data)
        elif kind == "memory.block":
            self._block(event, data)
        elif kind in ("memory.retained", "memory.tool"):
            self._notes(event, data)
        elif kind == "run.created":
            self.run_status = str(data.get("status") or "running")
        elif kind == "run.status":
            status = str(data.get("status") or self.run_status)
            if status == "cancelled" and cancel_requested:
                self._reset_running(event.at_ms)  # cancelled with nobody executing it
            self.run_status = status
        elif kind in ("run.resumed", "run.claimed"):
            self._reset_running(event.at_ms)
            self.run_status = "running"
        elif kind == "run.cancel-requested":
            self._cancel_requested = True

    def _node(self, event: EventRecord) -> _Node | None:
        return self.nodes.get(node_key(event)) if event.node_id is not None else None

    def _node_state(self, event: EventRecord, data: Mapping[str, Any]) -> None:
        if event.node_id is None:
            return
        state = str(data.get("state") or "pending")
        key = node_key(event)
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = _Node(state)
        node.state = state
        if "attempts" in data:
            node.attempts = int(data["attempts"])
        if data.get("cached"):
            node.cached = True
        if "error" in data:
            node.error = None if data["error"] is None else str(data["error"])
        elif state != "failed":
            node.error = None  # as the row: an attempt's end clears it unless the node failed
        if data.get("carried_from"):
            node.carried_from = str(data["carried_from"])
        if state == "running" and node.started_at_ms is None:
            node.started_at_ms = event.at_ms
        node.finished_at_ms = event.at_ms if state in ENDED_NODE_STATES else None
        node.updated_at_ms = event.at_ms

    def _reset_running(self, at_ms: int) -> None:
        for node in self.nodes.values():
            if node.state in RESET_TO_PENDING:
                node.state = "pending"
                node.finished_at_ms = None
                node.updated_at_ms = at_ms

    def _call(self, event: EventRecord, data: Mapping[str, Any]) -> None:
        lanes = data.get("tokens")
        lanes = lanes if isinstance(lanes, Mapping) else {}
        usage = TokenUsage(*(int(lanes.get(column) or 0) for column in LANE_COLUMNS))
        call_kind = str(data.get("kind") or "model")
        cost = data.get("cost_usd")
        price = float(cost) if isinstance(cost, int | float) else None
        bucket = str(data.get("bucket") or "")
        targets = [self.run, self.buckets.setdefault(bucket, _Usage())]
        if event.node_id is not None:
            targets.append(self.usage.setdefault(node_key(event), _Usage()))
        for target in targets:
            target.add(call_kind, usage, price)

    def _block(self, event: EventRecord, data: Mapping[str, Any]) -> None:
        if event.node_id is None:
            return
        summary = MemorySummary(
            event.node_id,
            int(event.iteration or 0),
            int(data.get("bytes_used") or 0),
            int(data.get("budget_bytes") or 0),
            int(bool(data.get("truncated"))),
            None if data.get("warning") is None else str(data["warning"]),
            int(bool(data.get("degraded"))),
        )
        self.blocks[node_key(event)] = BlockSeen(
            summary, int(data.get("block_id") or 0), int(data.get("items") or 0),
            event.at_ms, event.seq,
        )

    def _notes(self, event: EventRecord, data: Mapping[str, Any]) -> None:
        if event.type == "memory.tool":
            if data.get("tool") != "remember" or not data.get("ok") or not data.get("note_id"):
                return
            ids = [data["note_id"]]
        else:
            found = data.get("note_ids")
            ids = list(found) if isinstance(found, list) else []
        status = str(data.get("status") or "pending")
        key = node_key(event) if event.node_id is not None else ""
        for note_id in ids:
            self.notes.setdefault(
                str(note_id), ProposedNote(str(note_id), key, status, event.at_ms, event.seq)
            )


def node_key(event: EventRecord) -> str:
    """The node iteration an event is about, keyed like :attr:`NodeRecord.key`."""
    return f"{event.node_id}#{int(event.iteration or 0)}"


class ReplayState(NamedTuple):
    """The run as it was right after one event: what every view of the run shows in replay."""

    position: int
    """1-based place of the cursor's event among the run's events."""
    total: int
    event: EventRecord
    run_status: str
    nodes: list[NodeRecord]
    """Node iterations that existed then, in the run view's order (by start, then name)."""
    usage: dict[str, NodeUsage]
    buckets: list[BucketUsage]
    """Calls and tokens per context-window bucket, every bucket in the BRIEF's order."""
    run_tokens: TokenUsage
    run_cost: CostTotal
    memory: dict[str, MemorySummary]
    blocks: list[BlockSeen]
    notes: list[ProposedNote]

    @property
    def nodes_ended(self) -> int:
        """Node iterations in a state they do not leave on their own."""
        return sum(node.state in ENDED_NODE_STATES for node in self.nodes)

    @property
    def pending_notes(self) -> list[ProposedNote]:
        """Notes proposed for review (written as pending) so far."""
        return [note for note in self.notes if note.status == "pending"]


def state_of(
    fold: ReplayFold,
    run_id: str,
    event: EventRecord,
    position: int,
    total: int,
    structure: Mapping[str, NodeRecord] | None = None,
) -> ReplayState:
    """The :class:`ReplayState` a fold describes; ``structure`` (the run's node rows now)
    gives each node iteration its dependencies, which never change during a run."""
    shapes = structure or {}
    nodes = []
    for key, node in fold.nodes.items():
        node_id, _, iteration = key.rpartition("#")
        shape = shapes.get(key)
        nodes.append(NodeRecord(
            run_id=run_id, node_id=node_id, iteration=int(iteration), state=node.state,
            attempts=node.attempts, cached=node.cached,
            depends_on_json=shape.depends_on_json if shape else None,
            error=node.error, started_at_ms=node.started_at_ms,
            finished_at_ms=node.finished_at_ms, updated_at_ms=node.updated_at_ms,
            carried_from=node.carried_from,
        ))  # fmt: skip
    # The live read's order (NODES_OF_RUN): started first, by start, then by name.
    nodes.sort(key=lambda n: (n.started_at_ms is None, n.started_at_ms or 0, n.node_id,
                              n.iteration))
    usage = {}
    for key, sums in fold.usage.items():
        node_id, _, iteration = key.rpartition("#")
        usage[key] = NodeUsage(node_id, int(iteration), sums.calls, sums.tokens, sums.cost)
    buckets = histogram(
        [BucketUsage(label, sums.calls, sums.tokens, sums.cost)
         for label, sums in fold.buckets.items()]
    )  # fmt: skip
    return ReplayState(
        position=position,
        total=total,
        event=event,
        run_status=fold.run_status,
        nodes=nodes,
        usage=usage,
        buckets=buckets,
        run_tokens=fold.run.tokens,
        run_cost=fold.run.cost,
        memory={key: seen.summary for key, seen in fold.blocks.items()},
        blocks=list(fold.blocks.values()),
        notes=list(fold.notes.values()),
    )


def replay_to(
    events: Sequence[EventRecord],
    seq: int,
    structure: Mapping[str, NodeRecord] | None = None,
) -> ReplayState:
    """The run right after its event ``seq`` (or the last event before it). ``events``: the
    run's events, oldest first. Raises ValueError when there is no event at or before ``seq``."""
    return ReplayLog(events, structure).at_seq(seq)


def is_node_end(event: EventRecord) -> bool:
    """A node iteration reached a state it does not leave on its own (``{``/``}`` stops)."""
    if event.type != "node.state" or not event.payload_json:
        return False
    data = event.payload
    return isinstance(data, Mapping) and data.get("state") in ENDED_NODE_STATES


class ReplayLog:
    """A run's events with a cursor that can be put anywhere (1-based positions)."""

    CHECKPOINTS = 20
    """At most this many folded copies are kept (one every ``len(events) / 20`` events, at
    least 500 apart): a move folds at most that many events, from the nearest one before."""

    def __init__(
        self, events: Sequence[EventRecord], structure: Mapping[str, NodeRecord] | None = None
    ) -> None:
        if not events:
            raise ValueError("The run has no events to replay.")
        self.events = list(events)
        self.run_id = str(self.events[0].run_id or "")
        self.structure = dict(structure or {})
        self.seqs = [event.seq for event in self.events]
        self.every = max(500, -(-len(self.events) // self.CHECKPOINTS))
        self._checkpoints: dict[int, ReplayFold] = {0: ReplayFold()}
        self._cursor: tuple[int, ReplayFold] = (0, ReplayFold())
        """The last fold asked for: a step forward goes on from it without a copy."""
        self._ends = [i + 1 for i, event in enumerate(self.events) if is_node_end(event)]

    @property
    def total(self) -> int:
        """How many events the run has (the last position)."""
        return len(self.events)

    def fold_at(self, position: int) -> ReplayFold:
        """The fold right after the event at ``position`` (1..total); the log keeps it as its
        cursor (asking for another position may change it: copy it to keep it)."""
        if not 1 <= position <= self.total:
            raise ValueError(f"Event {position} is out of range: the run has {self.total}.")
        start = (position // self.every) * self.every
        while start not in self._checkpoints:
            start -= self.every
        at, fold = self._cursor
        if not start <= at <= position:
            at, fold = start, self._checkpoints[start].copy()
        for index in range(at, position):
            fold.apply(self.events[index])
            if (index + 1) % self.every == 0 and index + 1 not in self._checkpoints:
                self._checkpoints[index + 1] = fold.copy()
        self._cursor = (position, fold)
        return fold

    def at(self, position: int) -> ReplayState:
        """The run right after the event at ``position`` (1..total)."""
        fold = self.fold_at(position)
        return state_of(fold, self.run_id, self.events[position - 1], position, self.total,
                        self.structure)  # fmt: skip

    def position_of_seq(self, seq: int) -> int:
        """The position of the last event with a sequence number at or below ``seq`` (0: none)."""
        return bisect_right(self.seqs, seq)

    def at_seq(self, seq: int) -> ReplayState:
        """The run right after its event ``seq`` (or the last one before it)."""
        position = self.position_of_seq(seq)
        if position == 0:
            raise ValueError(f"The run has no event at or before sequence number {seq}.")
        return self.at(position)

    def position_at_time(self, at_ms: int) -> int:
        """The end of the longest run of events from the first stamped at or before ``at_ms``
        (0: none); events committed together need not be stamped in order."""
        found = 0
        for index, event in enumerate(self.events, start=1):
            if event.at_ms > at_ms:
                break
            found = index
        return found

    def next_end(self, position: int, step: int) -> int:
        """The position of the next (``step`` 1) or previous (-1) node end from ``position``;
        ``position`` itself when there is none that way."""
        if step > 0:
            index = bisect_right(self._ends, position)
            return self._ends[index] if index < len(self._ends) else position
        index = bisect_right(self._ends, position - 1) - 1
        return self._ends[index] if index >= 0 else position
