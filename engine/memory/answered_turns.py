"""A recalled chat turn carries the turn it answers.

In conversation the answer and its question are two notes: "Bob: Boston, last May." means
little without "Alice: Where did you move to?" one turn before. A recalled note of kind
``turn`` with a ``stream:<name>`` tag (its thread) therefore brings the end of the previous
accepted ``turn`` note of the same bank and stream (by ``created_at_ms``), shown in the block
before its own text as ``[re: …]`` (:func:`engine.memory.block.render_item`). The carried
text is at most :data:`ANSWERED_BYTES` bytes, taken from the end of that turn (where its
question sits), and is shown only from the bytes the recalled items leave free in the block
(:func:`engine.memory.block.build_block`): context never displaces evidence.

Only the bank's :data:`LOOKBACK` newest notes before the turn are looked at: interleaved
streams further apart than that carry nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.memory.recall_items import RecallItem

if TYPE_CHECKING:
    from store.db.seam import Database

TURN_KIND = "turn"
ANSWERED_BYTES = 120
LOOKBACK = 64
ELLIPSIS = "…"

_NOTE = "SELECT kind, created_at_ms FROM notes WHERE id = :id"
_EARLIER = (
    "SELECT body, kind, tags_json, status FROM notes "
    "WHERE namespace = :namespace AND created_at_ms < :at "
    "ORDER BY created_at_ms DESC LIMIT :limit"
)


def stream_of(tags: Sequence[str]) -> str | None:
    """The item's ``stream:`` tag (its thread), if it has one."""
    return next((t for t in tags if t.startswith("stream:")), None)


def tail(text: str, max_bytes: int = ANSWERED_BYTES) -> str:
    """The end of ``text`` (whitespace collapsed) within ``max_bytes`` UTF-8 bytes, starting at
    a word and marked with ``…`` when the start was cut."""
    flat = " ".join(text.split())
    if len(flat.encode("utf-8")) <= max_bytes:
        return flat
    room = max_bytes - len(ELLIPSIS.encode("utf-8"))
    cut = flat.encode("utf-8")[-room:].decode("utf-8", errors="ignore")
    words = cut.split(" ", 1)
    return ELLIPSIS + (words[1] if len(words) == 2 and words[1] else cut)


def answered_turn(rows: Sequence[Any], stream: str) -> str | None:
    """The body of the newest accepted turn of ``stream`` among ``rows`` (newest first)."""
    for row in rows:
        tags = json.loads(row["tags_json"]) if row["tags_json"] else []
        if row["kind"] == TURN_KIND and stream in tags:
            return str(row["body"]) if row["status"] == "accepted" else None
    return None


async def with_answered_turns(db: Database, items: Sequence[RecallItem]) -> tuple[RecallItem, ...]:
    """``items`` with every recalled turn carrying the turn it answers (one read)."""
    wanted = [(at, item, stream) for at, item in enumerate(items)
              if item.source == "note" and (stream := stream_of(item.tags))]
    if not wanted:
        return tuple(items)

    def read(conn: Any) -> dict[int, str]:
        found: dict[int, str] = {}
        for at, item, stream in wanted:
            note = conn.execute(_NOTE, {"id": item.id.removeprefix("note:")}).fetchone()
            if note is None or note["kind"] != TURN_KIND:
                continue
            rows = conn.execute(_EARLIER, {"namespace": item.namespace,
                                           "at": int(note["created_at_ms"]),
                                           "limit": LOOKBACK}).fetchall()
            body = answered_turn(rows, stream)
            if body and body.strip():
                found[at] = tail(body)
        return found

    carried = await db.run_read(read)
    return tuple(dataclasses.replace(item, answers=carried[at]) if at in carried else item
                 for at, item in enumerate(items))
