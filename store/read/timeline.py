"""A run's timeline (pure): every node iteration on a time axis with what it was doing —
waiting on its dependencies, queued for dispatch, running each attempt, waiting to retry,
finished, failed, taken from the task cache or carried over without running — with its
attempts, model calls and tool calls nested under it, the critical path marked and the idle
time of the run counted.

Built in two levels so a run of 10 000 nodes stays cheap: :func:`build_timeline` needs only the
node rows (one small read per run) for every bar, the critical path and the idle time; the
attempts, calls and tool calls of the nodes a person looks at (the rows on screen, or one node
in ``tether node --timeline``) are added with :func:`with_details`. :func:`flatten` turns it
into the rows a view draws, expanded where asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from store.model.run_records import AttemptRecord, CallRecord, NodeRecord, RunRecord
from store.model.states import ENDED_NODE_STATES


class Span(NamedTuple):
    """A stretch of time a row spent one way; ``end_ms`` None while it goes on (drawn to now).

    Kinds: ``waiting`` (on dependencies), ``queued`` (ready, not dispatched yet), ``running``,
    ``retrying`` (waiting to retry), an attempt's or node's end state (``finished``,
    ``failed``, ``cancelled``, ``abandoned``, ``skipped``), ``cached`` (a task-cache hit),
    ``carried`` (taken over finished without running), ``call``, ``tool``, ``tool-failed``,
    ``busy`` and ``idle`` (the run's own row)."""

    start_ms: int
    end_ms: int | None
    kind: str


class ToolCall(NamedTuple):
    """A tool call of an attempt: where it sits in time (exact for the memory tools, which
    record an event; between the model calls around it for agent CLIs, whose logs carry no
    times), its name, whether it succeeded, and a short detail."""

    node_key: str
    attempt: int
    start_ms: int
    end_ms: int
    name: str
    ok: bool = True
    detail: str = ""
    exact: bool = True


class NodeBar(NamedTuple):
    """One node iteration on the axis (from its node row alone)."""

    node: NodeRecord
    spans: tuple[Span, ...]
    ready_ms: int
    """When its dependencies had all finished (the run's start when it has none)."""
    critical: bool = False


class SteerMark(NamedTuple):
    """A person's message to an attempt (``tether steer``): when it was delivered or refused."""

    attempt: int
    at_ms: int
    label: str
    delivered: bool


class NodeDetail(NamedTuple):
    """What a node's rows show beneath it once read: its attempts, calls, tool calls and
    the steers their attempts took or refused."""

    attempts: tuple[AttemptRecord, ...]
    calls: tuple[CallRecord, ...] = ()
    tools: tuple[ToolCall, ...] = ()
    steers: tuple[SteerMark, ...] = ()


class RunTimeline(NamedTuple):
    """A run on a time axis: its bars, extent, idle stretches and critical path."""

    run: RunRecord
    start_ms: int
    end_ms: int
    bars: tuple[NodeBar, ...]
    idle: tuple[Span, ...]
    details: Mapping[str, NodeDetail]
    live: bool

    @property
    def busy_ms(self) -> int:
        """Time at least one node was running."""
        return self.end_ms - self.start_ms - self.idle_ms

    @property
    def idle_ms(self) -> int:
        """Time no node was running (between the run's start and its end, or now)."""
        return sum((s.end_ms or self.end_ms) - s.start_ms for s in self.idle)

    @property
    def critical_path(self) -> list[str]:
        """The node iterations whose ends decided the run's end, first to last."""
        path = [bar for bar in self.bars if bar.critical]
        return [bar.node.key for bar in sorted(path, key=_end_of)]


def _end_of(bar: NodeBar) -> int:
    return bar.node.finished_at_ms or bar.node.started_at_ms or bar.ready_ms


def run_extent(run: RunRecord, nodes: Sequence[NodeRecord], now_ms: int) -> tuple[int, int]:
    """(start, end) of the axis: the run's start to its end, or to now while it runs."""
    start = run.started_at_ms or run.created_at_ms
    firsts = [n.started_at_ms for n in nodes if n.started_at_ms is not None]
    if firsts:
        start = min(start, *firsts)
    if run.status in ("running", "pending") and not run.finished_at_ms:
        return start, max(start, now_ms)
    ends = [n.finished_at_ms for n in nodes if n.finished_at_ms is not None]
    end = run.finished_at_ms or max(ends, default=0) or run.updated_at_ms
    return start, max(start, end, *ends)


def _latest_finished(nodes: Iterable[NodeRecord]) -> NodeRecord | None:
    done = [n for n in nodes if n.finished_at_ms is not None]
    return max(done, key=lambda n: (n.finished_at_ms or 0, n.iteration)) if done else None


class _Graph:
    """Who waits for whom among a run's node rows: a dependency names a node (every iteration
    of it) or a fan-out (every copy, ``review[a.py]`` for ``review``); an iteration after the
    first waits for the one before."""

    def __init__(self, nodes: Sequence[NodeRecord]) -> None:
        self.by_id: dict[str, list[NodeRecord]] = {}
        self.by_key = {node.key: node for node in nodes}
        self._found: dict[str, tuple[list[NodeRecord], bool]] = {}
        for node in nodes:
            self.by_id.setdefault(node.node_id, []).append(node)
            if "[" in node.node_id:
                base = node.node_id.split("[", 1)[0]
                self.by_id.setdefault(base, []).append(node)

    def dependencies(self, node: NodeRecord) -> tuple[list[NodeRecord], bool]:
        """The node rows ``node`` waits for, and whether one it names has no row yet
        (worked out once per node: the critical path asks again)."""
        key = node.key
        known = self._found.get(key)
        if known is not None:
            return known
        deps: list[NodeRecord] = []
        unknown = False
        for dep in node.depends_on:
            found = self.by_id.get(dep)
            if not found:
                unknown = True
                continue
            deps.extend(found)
        previous = self.by_key.get(f"{node.node_id}#{node.iteration - 1}")
        if previous is not None:
            deps.append(previous)
        self._found[key] = (deps, unknown)
        return deps, unknown

    def ready(self, node: NodeRecord, start: int) -> int | None:
        """When every node row ``node`` waits for had finished (``start`` when it waits for
        none); None while one has not (or has no row yet). The same answer as
        :meth:`dependencies` gives, without keeping the lists: asked once per node row."""
        latest: int | None = None
        groups: list[list[NodeRecord]] = []
        if node.depends_on_json not in (None, "[]"):
            for name in node.depends_on:
                found = self.by_id.get(name)
                if not found:
                    return None
                groups.append(found)
        if node.iteration:
            previous = self.by_key.get(f"{node.node_id}#{node.iteration - 1}")
            if previous is not None:
                groups.append([previous])
        for group in groups:
            for dep in group:
                finished = dep.finished_at_ms
                if finished is None:
                    return None
                if latest is None or finished > latest:
                    latest = finished
        return start if latest is None else latest


def build_timeline(run: RunRecord, nodes: Sequence[NodeRecord], now_ms: int) -> RunTimeline:
    """Every node iteration's bar, the run's idle stretches and its critical path, from the
    run's node rows alone (attempts come later, :func:`with_details`)."""
    start, end = run_extent(run, nodes, now_ms)
    live = run.status in ("running", "pending") and not run.finished_at_ms
    graph = _Graph(nodes)
    critical = _critical(nodes, graph)
    bars: list[NodeBar] = []
    open_end = end if not live else None
    for node in nodes:
        ready = graph.ready(node, start)
        spans = node_spans(node, start, ready, open_end)
        bars.append(NodeBar(node, tuple(spans), ready if ready is not None else start,
                            bool(critical) and node.key in critical))
    return RunTimeline(run, start, end, tuple(bars), tuple(idle_spans(nodes, start, end, live)),
                       {}, live)


def node_spans(
    node: NodeRecord, run_start: int, ready: int | None, run_end: int | None
) -> list[Span]:
    """A node iteration's stretches from its row: waiting on dependencies (``ready`` None:
    still waiting), queued for dispatch, then active until its end state (or until now).
    ``run_end`` is None while the run is live (what has not ended goes on)."""
    began, ended = node.started_at_ms, node.finished_at_ms
    if node.state == "finished" and node.attempts == 0:
        at = ended or run_start
        return [Span(at, at, "carried")]
    spans: list[Span] = []
    moved = began if began is not None else ended
    if ready is None and moved is None:
        return [Span(run_start, run_end, "waiting")]
    ready = ready if ready is not None else (moved if moved is not None else run_start)
    if moved is not None:
        ready = min(ready, moved)
    if ready > run_start:
        spans.append(Span(run_start, ready, "waiting"))
    if began is None:
        if ended is not None:  # skipped or cancelled before it ran
            if ended > ready:
                spans.append(Span(ready, ended, "queued"))
            spans.append(Span(ended, ended, node.state))
        else:
            spans.append(Span(ready, run_end, "queued"))
        return spans
    if began > ready:
        spans.append(Span(ready, began, "queued"))
    kind = "cached" if node.cached else (
        node.state if node.state in ENDED_NODE_STATES else "running"
    )
    spans.append(Span(began, ended if ended is not None else run_end, kind))
    return spans


def _critical(nodes: Sequence[NodeRecord], graph: _Graph) -> set[str]:
    """Walk back from the node that ended last (or the running one that started last)
    through the dependency that finished last before it started."""
    running = [n for n in nodes if n.started_at_ms and n.finished_at_ms is None]
    current = (max(running, key=lambda n: n.started_at_ms or 0) if running
               else _latest_finished(nodes))
    path: set[str] = set()
    while current is not None and current.key not in path:
        path.add(current.key)
        began = current.started_at_ms
        deps = [d for d in graph.dependencies(current)[0]
                if d.finished_at_ms is not None and (began is None or d.finished_at_ms <= began)]
        current = _latest_finished(deps)
    return path


def idle_spans(nodes: Sequence[NodeRecord], start: int, end: int, live: bool) -> list[Span]:
    """Stretches of the run during which no node was running."""
    intervals = sorted(
        (n.started_at_ms, n.finished_at_ms if n.finished_at_ms is not None else end)
        for n in nodes
        if n.started_at_ms is not None and (n.finished_at_ms or end) > n.started_at_ms
    )
    idle: list[Span] = []
    cursor = start
    for begin, finish in intervals:
        if begin > cursor:
            idle.append(Span(cursor, begin, "idle"))
        cursor = max(cursor, finish)
    if cursor < end:
        idle.append(Span(cursor, None if live else end, "idle"))
    return idle


def with_details(timeline: RunTimeline, details: Mapping[str, NodeDetail]) -> RunTimeline:
    """The timeline with the attempts, calls and tool calls of some node iterations (keyed like
    :attr:`NodeRecord.key`) added to what it already knew."""
    return timeline._replace(details={**timeline.details, **details})


def attempt_spans(bar: NodeBar, attempts: Sequence[AttemptRecord]) -> list[Span]:
    """A node's row with its attempts read: the waits before it, then each attempt in its end
    state with the wait before each retry."""
    if not attempts:
        return list(bar.spans)
    spans = [s for s in bar.spans if s.kind in ("waiting", "queued")]
    previous_end: int | None = None
    for attempt in sorted(attempts, key=lambda a: a.attempt):
        if previous_end is not None and attempt.started_at_ms > previous_end:
            spans.append(Span(previous_end, attempt.started_at_ms, "retrying"))
        spans.append(Span(attempt.started_at_ms, attempt.finished_at_ms, attempt_kind(attempt)))
        previous_end = attempt.finished_at_ms
    return spans


def attempt_kind(attempt: AttemptRecord) -> str:
    """How an attempt's span is drawn."""
    if attempt.cached:
        return "cached"
    return attempt.state if attempt.state != "running" or attempt.finished_at_ms else "running"


class Row(NamedTuple):
    """One line of the drawn timeline.

    ``key``: ``node#0`` for a node iteration, ``node#0/2`` for its attempt 2, ``node#0/2/c17``
    for call 17 of that attempt and ``node#0/2/t3`` for its fourth tool call."""

    key: str
    depth: int
    kind: str
    label: str
    spans: tuple[Span, ...]
    node_key: str
    attempt: int | None = None
    critical: bool = False
    expandable: bool = False
    item_id: int | None = None
    """The call id of a call row; the tool call's index of a tool row."""


RUN_ROW = "run"
"""The key of the first row: the run itself, busy or idle."""


def run_row(timeline: RunTimeline) -> Row:
    """The run's own row: busy while a node runs, idle otherwise."""
    spans: list[Span] = []
    cursor = timeline.start_ms
    for gap in timeline.idle:
        if gap.start_ms > cursor:
            spans.append(Span(cursor, gap.start_ms, "busy"))
        spans.append(gap)
        cursor = gap.end_ms if gap.end_ms is not None else timeline.end_ms
    if cursor < timeline.end_ms:
        spans.append(Span(cursor, timeline.end_ms if not timeline.live else None, "busy"))
    return Row(RUN_ROW, 0, "run", f"run {timeline.run.run_id}", tuple(spans), RUN_ROW)


NodeRows = dict[str, tuple[NodeBar, "NodeDetail | None", Row]]
"""Node rows already built, by key, with the bar and detail they were built from."""


def flatten(timeline: RunTimeline, expanded: frozenset[str] | set[str],
            built: NodeRows | None = None) -> list[Row]:
    """The rows to draw: the run's (busy or idle), one per node iteration (its attempts as
    segments once read), and, under each expanded one, a row per attempt with its calls and
    tool calls beneath. ``built`` keeps the node rows between calls: a row whose bar and
    detail are the same objects is reused (expanding one node of 10 000 rebuilds none)."""
    rows: list[Row] = [run_row(timeline)]
    known: NodeRows = built if built is not None else {}
    for bar in timeline.bars:
        node = bar.node
        key = node.key
        detail = timeline.details.get(key)
        kept = known.get(key)
        if kept is not None and kept[0] is bar and kept[1] is detail:
            rows.append(kept[2])
        else:
            spans = attempt_spans(bar, detail.attempts) if detail else list(bar.spans)
            row = Row(key, 0, "node", key, tuple(spans), key, critical=bar.critical,
                      expandable=node.attempts > 0)
            known[key] = (bar, detail, row)
            rows.append(row)
        if key not in expanded or detail is None:
            continue
        for attempt in sorted(detail.attempts, key=lambda a: a.attempt):
            rows.extend(attempt_rows(node.key, attempt, detail, bar.critical))
    return rows


def attempt_rows(
    node_key: str, attempt: AttemptRecord, detail: NodeDetail, critical: bool
) -> list[Row]:
    """An attempt's row, then its model calls and tool calls in time order."""
    number = attempt.attempt
    head = f"attempt {number}"
    if attempt.agent:
        head += f" · {attempt.agent}"
    rows = [Row(f"{node_key}/{number}", 1, "attempt", head,
                (Span(attempt.started_at_ms, attempt.finished_at_ms, attempt_kind(attempt)),),
                node_key, number, critical)]
    children: list[tuple[int, Row]] = []
    for call in detail.calls:
        if call.attempt != number:
            continue
        label = f"call {call.call_id}" if call.kind == "model" else f"{call.kind} {call.call_id}"
        if call.model:
            label += f" · {call.model}"
        children.append((call.started_at_ms, Row(
            f"{node_key}/{number}/c{call.call_id}", 2, "call", label,
            (Span(call.started_at_ms, call.finished_at_ms, "call"),), node_key, number,
            item_id=call.call_id,
        )))
    for index, tool in enumerate(detail.tools):
        if tool.attempt != number:
            continue
        label = ("" if tool.exact else "≈ ") + f"tool {tool.name}"
        children.append((tool.start_ms, Row(
            f"{node_key}/{number}/t{index}", 2, "tool", label,
            (Span(tool.start_ms, tool.end_ms, "tool" if tool.ok else "tool-failed"),),
            node_key, number, item_id=index,
        )))
    for index, steer in enumerate(detail.steers):
        if steer.attempt == number:
            children.append((steer.at_ms, Row(
                f"{node_key}/{number}/s{index}", 2, "steer", steer.label,
                (Span(steer.at_ms, steer.at_ms, "steer" if steer.delivered else "steer-refused"),),
                node_key, number, item_id=index,
            )))
    rows.extend(row for _, row in sorted(children, key=lambda pair: pair[0]))
    return rows


def visible_node_keys(rows: Sequence[Row], first: int, count: int) -> list[str]:
    """The node iterations with a row among ``rows[first:first + count]`` (whose attempts a
    view reads to draw them)."""
    return list(dict.fromkeys(row.node_key for row in rows[max(0, first) : first + count]))


class LoggedTool(NamedTuple):
    """A tool call an agent CLI's log shows (no time of its own): its name, outcome, a short
    detail, the model message that asked for it (Claude Code), and its place in the log."""

    name: str
    ok: bool = True
    detail: str = ""
    message_id: str | None = None
    order: int = 0


def place_logged_tools(
    node_key: str, attempt: AttemptRecord, calls: Sequence[CallRecord],
    logged: Sequence[LoggedTool], now_ms: int,
) -> list[ToolCall]:
    """Put an attempt's logged tool calls in time: after the model call whose message asked for
    them, before the next call (Claude Code names the message); otherwise spread in log order
    over the attempt. Either way the time is approximate (``exact`` False)."""
    end = attempt.finished_at_ms or now_ms
    mine = sorted((c for c in calls if c.attempt == attempt.attempt and c.kind == "model"),
                  key=lambda c: c.call_id)
    after: dict[str, tuple[int, int]] = {}
    for index, call in enumerate(mine):
        detail = call.detail if isinstance(call.detail, dict) else {}
        message = detail.get("message_id")
        if isinstance(message, str):
            following = mine[index + 1].started_at_ms if index + 1 < len(mine) else end
            after[message] = (call.finished_at_ms, max(call.finished_at_ms, following))
    groups: dict[tuple[int, int], list[LoggedTool]] = {}
    for tool in logged:
        window = after.get(tool.message_id or "") or (attempt.started_at_ms, end)
        groups.setdefault(window, []).append(tool)
    placed: list[ToolCall] = []
    for (start, finish), tools in groups.items():
        step = (finish - start) / max(1, len(tools))
        for index, tool in enumerate(sorted(tools, key=lambda t: t.order)):
            begin = int(start + step * index)
            placed.append(ToolCall(node_key, attempt.attempt, begin, int(begin + step), tool.name,
                                   tool.ok, tool.detail, exact=False))
    return sorted(placed, key=lambda t: t.start_ms)
