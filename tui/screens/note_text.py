"""A note's body as a person reads it (pure): a retained output is stored as the text the
engine wrote (``Task review succeeded with: {"summary": …, "findings": […]}``), and the
Memory view shows the JSON in it as words — ``summary: …`` with the findings as a list —
instead of a dump. The stored body never changes (notes are append-only); only its display."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from tui.format import literal

MAX_SCALAR_CHARS = 400


def _split_json(body: str) -> tuple[str, Any, str] | None:
    """(text before, the first JSON object in ``body``, text after), or None."""
    decoder = json.JSONDecoder()
    start = body.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(body, start)
        except ValueError:
            start = body.find("{", start + 1)
            continue
        if isinstance(value, dict) and value:
            return body[:start], value, body[end:]
        start = body.find("{", end)
    return None


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "; ".join(_scalar(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False)


def _label(key: str) -> str:
    return key.replace("_", " ")


def readable_body(body: str) -> str:
    """The body on one line, its JSON object as ``key: value · key: a; b``."""
    found = _split_json(body)
    if found is None:
        return body
    before, value, after = found
    fields = " · ".join(f"{_label(k)}: {_scalar(v)}" for k, v in value.items())
    return f"{before.rstrip()} {fields}{after}".strip()


def readable_text(body: str) -> Text:
    """The body for the inspector: the text, then each field of its JSON object on its own
    line (a list as indented items); shown literally."""
    found = _split_json(body)
    if found is None:
        return literal(body)
    before, value, after = found
    out = literal(before.rstrip())
    for key, item in value.items():
        out.append("\n")
        out.append(f"{_label(key)}: ", style="bold")
        if isinstance(item, list) and item:
            for element in item:
                out.append("\n  • ")
                out.append_text(literal(_scalar(element)[:MAX_SCALAR_CHARS]))
        else:
            out.append_text(literal(_scalar(item)[:MAX_SCALAR_CHARS]))
    if after.strip():
        out.append("\n")
        out.append_text(literal(after.strip()))
    return out
