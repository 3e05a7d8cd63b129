"""One sentence per event for the activity feed (pure, tested directly).

The event log stores a JSON payload per event. The feed says what happened as a sentence, with
its subject first (``Call in review-b#0, attempt 2: 52.4k context (50k–100k) · 353 in · 46.9k
cache read · 273 out (reviewer/sim-1).``) instead of showing the JSON, which was cut at the edge
of the screen. An event of a type the feed does not know still reads as a sentence, its
scalars named (``Event something.new in run r-1: a=1 b=[2].``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from tui.format import plural, tokens

MAX_SUMMARY_CHARS = 240
"""A longer sentence is cut with an ellipsis (the run and node views show everything)."""


def _payload(raw: str | None) -> dict[str, Any] | None:
    """The payload object, or None when it is not a JSON object."""
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _count(value: Any) -> str:
    return tokens(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _usage(p: Mapping[str, Any]) -> dict[str, Any]:
    usage = p.get("tokens")
    return usage if isinstance(usage, dict) else {}


def _who(p: Mapping[str, Any]) -> str:
    who = "/".join(str(p[k]) for k in ("agent", "model") if p.get(k))
    simulated = p.get("simulated") and "simulated" not in who
    return f" ({who}{', simulated' if simulated else ''})" if who else ""


def _call(p: Mapping[str, Any]) -> str:
    usage = _usage(p)
    kind = p.get("kind") or "model"
    # A row that is no model call (a turn's or a session's totals) has no context window.
    size = (f"{_count(p.get('context_tokens'))} context ({p.get('bucket', '?')})"
            if kind == "model" else f"{kind} row, not one call (no bucket)")
    parts = [size,
             f"{_count(usage.get('input_tokens'))} in",
             f"{_count(usage.get('cache_read_tokens'))} cache read",
             f"{_count(usage.get('output_tokens'))} out"]
    return " · ".join(parts) + _who(p)


def _attempt_finished(p: Mapping[str, Any]) -> str:
    usage = _usage(p)
    total = sum(v for v in usage.values() if isinstance(v, int) and not isinstance(v, bool))
    text = f"{p.get('state', '?')} with {tokens(total)} tokens"
    if p.get("cached"):
        text = "taken from the task cache"
    if p.get("error"):
        text += f": {p['error']}"
    return text


def _run_created(p: Mapping[str, Any]) -> str:
    text = f"created for workflow {p.get('workflow', '?')}"
    if p.get("generation"):
        text += f", generation {p['generation']} of {p.get('parent_run_id', '?')}"
    return text


def _run_status(p: Mapping[str, Any]) -> str:
    text = f"is now {p.get('status', '?')}"
    if p.get("to_run_id"):
        text += f" and continues in {p['to_run_id']}"
    if p.get("error"):
        text += f": {p['error']}"
    return text


def _handoff(p: Mapping[str, Any]) -> str:
    text = f"handed off to {p.get('to_run_id', '?')} ({p.get('trigger', '?')})"
    return text + (f": {p['reason']}" if p.get("reason") else "")


def _memory_block(p: Mapping[str, Any]) -> str:
    # the runtime's warnings begin "no block: ..." for the dashboard's cells; the sentence
    # says "got no memory block" itself
    warning = re.sub(r"(^|; )no block: ", r"\1", str(p.get("warning") or ""))
    if p.get("degraded"):
        return f"had its recall degraded: {warning or 'no reason recorded'}"
    items = p.get("items")
    count = items if isinstance(items, int) else len(items) if isinstance(items, list) else 0
    if not p.get("bytes_used"):
        return f"got no memory block: {warning or 'nothing recalled'}"
    cut = ", truncated to fit" if p.get("truncated") else ""
    return (f"got a memory block of {p.get('bytes_used')} of {p.get('budget_bytes')} bytes, "
            f"{plural(count, 'item')}{cut}")


def _memory_tool(p: Mapping[str, Any]) -> str:
    details = []
    items = p.get("items")
    if isinstance(items, list):
        details.append(plural(len(items), "item"))
    if p.get("note_id"):
        details.append(f"note {p['note_id']} ({p.get('status', '?')})")
    text = f"called the memory tool {p.get('tool', '?')}"
    if not p.get("ok"):
        text += ", which failed"
        details = [str(p["error"])] if p.get("error") else []
    return text + (f": {', '.join(details)}" if details else "")


# What each event says about its subject (the subject is said by event_line).
SUMMARIES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "call": _call,
    "attempt.finished": _attempt_finished,
    "attempt.started": lambda p: "started" + _who(p),
    "attempt.abandoned": lambda p: "was abandoned (its process is gone)",
    "node.state": lambda p: f"is now {p.get('state', '?')}"
    + (" (from the task cache)" if p.get("cached") else "")
    + (f" (carried from {p['carried_from']})" if p.get("carried_from") else "")
    + (f": {p['error']}" if p.get("error") else ""),
    "budget.alert": lambda p: str(p["text"]),
    "run.created": _run_created,
    "run.status": _run_status,
    "run.deleted": lambda p: f"run {p.get('run_id', '?')} was deleted",
    "run.queued": lambda p: "was queued for a worker",
    "run.claimed": lambda p: "was claimed by a worker" + (
        f" ({p['worker_id']})" if p.get("worker_id") else ""),
    "run.resumed": lambda p: "was resumed",
    "handoff": _handoff,
    "memory.block": _memory_block,
    "memory.tool": _memory_tool,
    "memory.warning": lambda p: "had a memory warning: "
    + str(p.get("warning") or p.get("message") or "no detail recorded"),
    "memory.retained": lambda p: "retained its output as "
    + (f"note {p['note_id']}" if p.get("note_id") else "a note"),
    "warning": lambda p: f"warned: {p['reason']}",
    "cache.hit": lambda p: "took its output from the task cache",
    "cache.invalid": lambda p: "found a task-cache entry it could not use",
}


def pairs(payload: Mapping[str, Any]) -> str:
    """``key=value`` for scalars, ``key=[n]`` / ``key={n}`` for lists and objects."""
    parts = []
    for key, value in payload.items():
        if isinstance(value, list):
            shown = f"[{len(value)}]"
        elif isinstance(value, dict):
            shown = f"{{{len(value)}}}"
        else:
            shown = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
        parts.append(f"{key}={shown}")
    return " ".join(parts)


def event_summary(event_type: str, payload_json: str | None) -> str:
    """What an event says about its subject (no JSON); an unknown type names its fields."""
    payload = _payload(payload_json)
    if payload is None:
        return f"{event_type}: payload " + pairs({"": payload_json}).lstrip("=")
    summarise = SUMMARIES.get(event_type)
    if summarise is not None:
        try:
            return summarise(payload)
        except (TypeError, ValueError, KeyError):
            pass  # an unexpected payload shape: fall back to its pairs
    return f"{event_type}: {pairs(payload)}" if payload else event_type


def subject(event: Any) -> str:
    """Who or what the event is about: a call in a node's attempt, an attempt, a node, a run."""
    node = f"{event.node_id}#{event.iteration or 0}" if event.node_id else ""
    run = f" of {event.run_id}" if event.run_id else ""
    if event.type == "call":
        return f"Call in {node}, attempt {event.attempt}{run}" if node else f"Call{run}"
    if event.type.startswith("attempt.") and node:
        return f"Attempt {event.attempt} of {node}{run}"
    if event.type.startswith("memory.") and node:
        return f"Node {node}{run}"
    if node:
        return f"Node {node}{run}"
    if event.run_id:
        return f"Run {event.run_id}"
    return "The workspace"


def event_sentence(event: Any) -> str:
    """The event as one sentence: its subject, what happened, a full stop."""
    summary = event_summary(event.type, event.payload_json)
    head = subject(event)
    if event.type == "run.deleted":
        sentence = summary[:1].upper() + summary[1:]
    elif event.type == "budget.alert":  # its text names the run or the day itself
        sentence = f"Budget alert: {summary}"
    elif event.type == "call" or ":" in summary.split(" ", 1)[0]:
        sentence = f"{head}: {summary}"
    else:
        sentence = f"{head} {summary}"
    return sentence if sentence.endswith((".", "…")) else sentence + "."


def event_line(event: Any) -> str:
    """One feed line: time (UTC), sequence number, then the event as a sentence (the feed
    widget shows it literally, control characters made visible)."""
    when = datetime.fromtimestamp(event.at_ms / 1000, tz=UTC).strftime("%H:%M:%S")
    sentence = event_sentence(event)
    if len(sentence) > MAX_SUMMARY_CHARS:
        sentence = sentence[: MAX_SUMMARY_CHARS - 1] + "…"
    return f"{when} {event.seq:>6}  {sentence}"
