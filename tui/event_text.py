"""One readable line per event for the activity feed (pure, tested directly).

The event log stores a JSON payload per event. The feed says what happened in words and numbers
(``call  52.4k context (50k–100k) · 353 in · 46.9k cache read · 273 out``) instead of showing
the JSON, which was cut at the edge of the screen; the feed scrolls sideways for the rest.
Unknown event types fall back to ``key=value`` pairs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from tui.format import tokens

MAX_SUMMARY_CHARS = 240
"""A longer summary is cut with an ellipsis (the run and node views show everything)."""


def _payload(raw: str | None) -> dict[str, Any] | None:
    """The payload object, or None when it is not a JSON object."""
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _count(value: Any) -> str:
    return tokens(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _call(p: Mapping[str, Any]) -> str:
    usage = p.get("tokens") if isinstance(p.get("tokens"), dict) else {}
    assert isinstance(usage, dict)
    kind = p.get("kind", "model")
    # A row that is no model call (a turn's or a session's totals) has no context window.
    size = (f"{_count(p.get('context_tokens'))} context ({p.get('bucket', '?')})"
            if kind == "model" else f"{kind} row, not one call (no bucket)")
    parts = [size,
             f"{_count(usage.get('input_tokens'))} in",
             f"{_count(usage.get('cache_read_tokens'))} cache read",
             f"{_count(usage.get('output_tokens'))} out"]
    who = "/".join(str(p[k]) for k in ("agent", "model") if p.get(k))
    if who:
        parts.append(who + (" (simulated)" if p.get("simulated") else ""))
    return " · ".join(parts)


def _attempt_finished(p: Mapping[str, Any]) -> str:
    usage = p.get("tokens") if isinstance(p.get("tokens"), dict) else {}
    assert isinstance(usage, dict)
    total = sum(v for v in usage.values() if isinstance(v, int) and not isinstance(v, bool))
    text = f"{p.get('state', '?')} · {tokens(total)} tokens"
    if p.get("error"):
        text += f" · {p['error']}"
    return text


def _run_created(p: Mapping[str, Any]) -> str:
    text = f"{p.get('workflow', '?')} created"
    if p.get("generation"):
        text += f" · generation {p['generation']} of {p.get('parent_run_id', '?')}"
    return text


def _run_status(p: Mapping[str, Any]) -> str:
    text = f"→ {p.get('status', '?')}"
    if p.get("to_run_id"):
        text += f" (continues in {p['to_run_id']})"
    if p.get("error"):
        text += f" · {p['error']}"
    return text


def _handoff(p: Mapping[str, Any]) -> str:
    return f"→ {p.get('to_run_id', '?')} · {p.get('trigger', '?')} · {p.get('reason', '')}"


def _memory_block(p: Mapping[str, Any]) -> str:
    if p.get("degraded"):
        return f"⚠ {p.get('warning') or 'recall degraded'}"
    items = p.get("items")
    count = items if isinstance(items, int) else len(items) if isinstance(items, list) else 0
    if not p.get("bytes_used"):
        return str(p.get("warning") or "no block")
    cut = " · truncated" if p.get("truncated") else ""
    return f"block {p.get('bytes_used')}/{p.get('budget_bytes')} B · {count} item(s){cut}"


def _memory_tool(p: Mapping[str, Any]) -> str:
    text = f"{p.get('tool', '?')} {'ok' if p.get('ok') else 'failed'}"
    items = p.get("items")
    if isinstance(items, list):
        text += f" · {len(items)} item(s)"
    if p.get("note_id"):
        text += f" · note {p['note_id']} ({p.get('status', '?')})"
    return text


SUMMARIES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "call": _call,
    "attempt.finished": _attempt_finished,
    "attempt.started": lambda p: "/".join(str(p[k]) for k in ("agent", "model") if p.get(k)),
    "node.state": lambda p: f"→ {p.get('state', '?')}" + (
        f" (carried from {p['carried_from']})" if p.get("carried_from") else ""),
    "budget.alert": lambda p: str(p["text"]),
    "run.created": _run_created,
    "run.status": _run_status,
    "handoff": _handoff,
    "memory.block": _memory_block,
    "memory.tool": _memory_tool,
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
    """What an event says, in one line of words (no JSON)."""
    payload = _payload(payload_json)
    if payload is None:
        return pairs({"payload": payload_json})
    summarise = SUMMARIES.get(event_type)
    if summarise is not None:
        try:
            return summarise(payload)
        except (TypeError, ValueError, KeyError):
            pass  # an unexpected payload shape: fall back to its pairs
    return pairs(payload)


def event_line(event: Any) -> str:
    """One feed line: time, sequence number, type, where (run, node#iteration, attempt) and
    what happened (the feed widget shows it literally, control characters made visible)."""
    when = datetime.fromtimestamp(event.at_ms / 1000, tz=UTC).strftime("%H:%M:%S")
    where = " ".join(
        part
        for part in (
            event.run_id or "",
            f"{event.node_id}#{event.iteration}" if event.node_id else "",
            f"a{event.attempt}" if event.attempt else "",
        )
        if part
    )
    summary = event_summary(event.type, event.payload_json)
    if len(summary) > MAX_SUMMARY_CHARS:
        summary = summary[: MAX_SUMMARY_CHARS - 1] + "…"
    return f"{when} {event.seq:>6}  {event.type:<16} {where}  {summary}"
