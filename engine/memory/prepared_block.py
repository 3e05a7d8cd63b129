"""What the scheduler gets for one attempt (:class:`PreparedBlock`), how a block's items are
persisted, and the digest a successful output is retained as (pure)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from engine.memory.block import (
    TRUNCATION_MARKER,
    MemoryBlock,
    longest_prefix_within,
    utf8_len,
)
from store.model.history_records import MemoryBlockRecord

RETAIN_MAX_BYTES = 4000


def output_as_data(output: Any) -> Any:
    """A task output as JSON data (pydantic models dumped)."""
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json")
    return output


def retain_digest(node_id: str, output: Any, max_bytes: int = RETAIN_MAX_BYTES) -> str:
    """The note body retained for a successful task: which task, then its output, bounded.

    The output is compact JSON (strings as themselves); the whole body is cut at a code-point
    boundary with the visible truncation marker when it exceeds ``max_bytes``.
    """
    data = output_as_data(output)
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    body = f"Task {node_id} succeeded with: {text}"
    if utf8_len(body) <= max_bytes:
        return body
    keep = longest_prefix_within(body, max_bytes - utf8_len(TRUNCATION_MARKER))
    return body[:keep] + TRUNCATION_MARKER


def retained_note_id(run_id: str, node_id: str, iteration: int, namespace: str) -> str:
    """The id of the note a node iteration of a run retains in ``namespace``: one per node
    and bank, so a resumed run can tell whether it was written (a kill between the node's
    end and its retention) and writing it again never makes a second one."""
    key = json.dumps([run_id, node_id, iteration, namespace])
    return "retained-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True)
class PreparedBlock:
    """What the scheduler gets for one attempt: the block text (or None) and its record."""

    text: str | None
    reused: bool
    degraded: bool
    warning: str | None
    item_ids: tuple[str, ...] = ()
    bytes_used: int = 0
    budget_bytes: int = 0
    truncated: bool = False
    block_id: int | None = None

    @classmethod
    def from_record(cls, record: MemoryBlockRecord) -> PreparedBlock:
        """A block persisted earlier (another attempt of the node iteration, or before a resume)."""
        ids = tuple(
            str(item.get("id"))
            for item in record.items
            if isinstance(item, dict) and item.get("included", True)
        )
        return cls(
            text=record.text,
            reused=True,
            degraded=record.degraded,
            warning=record.warning,
            item_ids=ids,
            bytes_used=record.bytes_used,
            budget_bytes=record.budget_bytes,
            truncated=record.truncated,
            block_id=record.block_id,
        )


ITEM_TEXT_PREVIEW_CHARS = 500


def block_items_record(block: MemoryBlock) -> list[dict[str, Any]]:
    """The ``items_json`` of a stored block: every recalled item with its provenance, score, why
    it was picked and a text preview; included ones first, then those the budget left out."""
    included = [
        {**entry.describe(), "included": True, "text": entry.item.text[:ITEM_TEXT_PREVIEW_CHARS]}
        for entry in block.included
    ]
    omitted = [
        {**item.describe(), "included": False, "text": item.text[:ITEM_TEXT_PREVIEW_CHARS]}
        for item in block.omitted
    ]
    return included + omitted
