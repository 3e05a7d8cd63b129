"""What a replay says, as pure functions of a :class:`store.read.replay.ReplayState`: the
cursor's header (``Replay 37/212 · 12:03:41.220 · node report finished``), the event in words,
where ``--at`` / ``--at-time`` put the cursor, and ``tether replay``'s text and JSON. Stored
strings are made visible (:func:`tui.plain.visible`), never interpreted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from store.errors import InvalidInputError
from store.model.history_records import EventRecord
from store.model.run_records import RunRecord
from store.model.states import ENDED_NODE_STATES
from store.read.replay import ReplayLog, ReplayState
from store.read.replay_reads import NoteText
from tui.event_text import event_sentence
from tui.plain import cost, plural, tokens, visible

WORKSPACE_SUBJECT = "The workspace"
"""What :func:`tui.event_text.subject` calls an event of no run (here: of the run replayed)."""


def moment(at_ms: int) -> str:
    """The time of day of an event, to the millisecond, in UTC (``12:03:41.220``)."""
    when = datetime.fromtimestamp(at_ms / 1000, tz=UTC)
    return when.strftime("%H:%M:%S.") + f"{at_ms % 1000:03d}"


def moment_iso(at_ms: int) -> str:
    """An event's time as ISO 8601 in UTC, to the millisecond."""
    when = datetime.fromtimestamp(at_ms / 1000, tz=UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at_ms % 1000:03d}Z"


def node_name(node_id: str | None, iteration: int | None) -> str:
    """A node iteration as people read it: ``review``, or ``review#2`` past the first."""
    return f"{node_id}#{iteration}" if iteration else str(node_id)


def event_words(event: EventRecord) -> str:
    """What the cursor's event did, in a few words (its run is the one replayed)."""
    payload = event.payload if event.payload_json else None
    state = payload.get("state") if isinstance(payload, Mapping) else None
    if event.type == "node.state" and event.node_id:
        name = node_name(event.node_id, event.iteration)
        if state in ENDED_NODE_STATES:
            return visible(f"node {name} ended: {state}", keep_newlines=False)
        return visible(f"node {name} is {state}", keep_newlines=False)
    sentence = event_sentence(event._replace(run_id=None)).rstrip(".")
    if event.node_id is None and sentence.startswith(WORKSPACE_SUBJECT):
        sentence = "run" + sentence[len(WORKSPACE_SUBJECT):]  # the replayed run's own event
    return visible(sentence[:1].lower() + sentence[1:], keep_newlines=False)


def header(state: ReplayState) -> str:
    """The cursor's line: position of total, the event's time, what it did."""
    return (f"Replay {state.position}/{state.total} · {moment(state.event.at_ms)} · "
            f"{event_words(state.event)}")


def parse_moment(text: str) -> int:
    """``--at-time``: an ISO 8601 date and time (UTC unless it says otherwise), in ms.

    Raises:
        InvalidInputError: the text is not one.
    """
    try:
        when = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise InvalidInputError(
            f"--at-time {text!r} is not a time; give one such as 2026-01-01T12:03:41.220Z."
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return round(when.timestamp() * 1000)


def cursor_position(log: ReplayLog, at: int | None, at_ms: int | None) -> int:
    """Where ``--at N`` (1..total) or ``--at-time`` put the cursor; the last event by default.

    Raises:
        InvalidInputError: N is out of range, or the time is before the run's first event.
    """
    if at is not None:
        if not 1 <= at <= log.total:
            raise InvalidInputError(
                f"--at {at} is out of range: the run has {log.total} events (1 to {log.total})."
            )
        return at
    if at_ms is not None:
        position = log.position_at_time(at_ms)
        if position == 0:
            raise InvalidInputError(
                f"The run's first event was at {moment_iso(log.events[0].at_ms)}; "
                f"nothing had happened by {moment_iso(at_ms)}."
            )
        return position
    return log.total


def replay_document(
    run: RunRecord, state: ReplayState, notes: Mapping[str, NoteText], cut: bool = False
) -> dict[str, Any]:
    """``tether replay --format json``: the run as of the cursor's event."""
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "position": state.position,
        "events": state.total,
        "events_cut": cut,
        "event": {
            "seq": state.event.seq,
            "at": moment_iso(state.event.at_ms),
            "at_ms": state.event.at_ms,
            "type": state.event.type,
            "node_id": state.event.node_id,
            "iteration": state.event.iteration,
            "words": event_words(state.event),
        },
        "run_status": state.run_status,
        "nodes_ended": state.nodes_ended,
        "nodes_total": run.nodes_total,
        "tokens": state.run_tokens.as_dict() | {"total": state.run_tokens.total},
        **state.run_cost.as_dict(),
        "nodes": [
            {
                "node_id": node.node_id,
                "iteration": node.iteration,
                "state": node.state,
                "attempts": node.attempts,
                "cached": node.cached,
                "carried_from": node.carried_from,
                "calls": usage.calls if usage else 0,
                "tokens": (usage.tokens.as_dict() | {"total": usage.tokens.total})
                if usage else None,
                **(usage.cost.as_dict() if usage else {}),
            }
            for node in state.nodes
            for usage in [state.usage.get(node.key)]
        ],
        "buckets": [{"bucket": b.bucket, "calls": b.calls, "tokens": b.tokens.total}
                    for b in state.buckets],
        "memory_blocks": [
            {"node_id": b.summary.node_id, "iteration": b.summary.iteration,
             "bytes_used": b.summary.bytes_used, "budget_bytes": b.summary.budget_bytes,
             "items": b.items, "truncated": bool(b.summary.truncated),
             "warning": b.summary.warning, "degraded": bool(b.summary.degraded)}
            for b in state.blocks
        ],
        "notes": [
            {"note_id": n.note_id, "node": n.node_key, "status_when_written": n.status,
             "status_now": notes[n.note_id].status if n.note_id in notes else None,
             "body": notes[n.note_id].body if n.note_id in notes else None}
            for n in state.notes
        ],
    }  # fmt: skip


def replay_lines(
    run: RunRecord, state: ReplayState, notes: Mapping[str, NoteText], cut: bool = False
) -> list[str]:
    """``tether replay``'s text: the header, the run line, one line per node, then the memory
    blocks and the notes proposed so far."""
    total = state.run_tokens
    lines = [
        f"Run {run.run_id} ({visible(run.workflow, keep_newlines=False)})",
        header(state) + f" · {moment_iso(state.event.at_ms)} · seq {state.event.seq}",
        f"run {state.run_status} · nodes ended {state.nodes_ended}/{run.nodes_total} · "
        f"tokens {tokens(total.total)} (fresh {tokens(total.input)}, cached "
        f"{tokens(total.cache_read)}, out {tokens(total.output)}) · cost "
        f"{cost(state.run_cost.usd, state.run_cost.unpriced_calls)}",
    ]
    if cut:
        lines.append(f"(only the run's first {state.total} events are replayed)")
    width = max([len(node_name(n.node_id, n.iteration)) for n in state.nodes] + [4])
    lines.append("")
    lines.append(f"  {'STATE':<10} {'NODE':<{width}}  ATT  CALLS   TOKENS  COST")
    for node in state.nodes:
        usage = state.usage.get(node.key)
        name = visible(node_name(node.node_id, node.iteration), keep_newlines=False)
        mark = " carried" if node.carried_from else (" cached" if node.cached else "")
        lines.append(
            f"  {node.state:<10} {name:<{width}}  {node.attempts:>3}  "
            f"{usage.calls if usage else 0:>5}  {tokens(usage.tokens.total if usage else 0):>7}"
            f"  {cost(usage.cost.usd, usage.cost.unpriced_calls) if usage else '–'}{mark}"
        )
    if not state.nodes:
        lines.append("  (no node yet)")
    if state.blocks:
        lines.append("")
        lines.append("Memory blocks recalled so far:")
        for block in state.blocks:
            s = block.summary
            said = f" — {visible(s.warning, keep_newlines=False)}" if s.warning else ""
            lines.append(f"  {node_name(s.node_id, s.iteration)}: {plural(block.items, 'item')}, "
                         f"{s.bytes_used} of {s.budget_bytes} bytes"
                         f"{' (truncated)' if s.truncated else ''}{said}")
    pending = state.pending_notes
    lines.append("")
    lines.append(f"Pending notes proposed so far: {len(pending)}")
    for note in pending:
        stored = notes.get(note.note_id)
        body = visible(stored.body, keep_newlines=False)[:120] if stored else "(note deleted)"
        now = f" [now {stored.status}]" if stored and stored.status != note.status else ""
        lines.append(f"  {note.note_id} from {note.node_key or 'the run'}{now}: {body}")
    return lines
