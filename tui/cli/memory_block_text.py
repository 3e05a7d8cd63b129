"""A node's memory block for ``tether node``: as JSON, and as lines of text (accounting, each
recalled item with why it was found, in the words the query typed, then the block)."""

from __future__ import annotations

from typing import Any

from store.model.history_records import MemoryBlockRecord
from tui.plain import plural, visible
from tui.recall_words import readable_why


def memory_block_json(block: MemoryBlockRecord | None) -> dict[str, Any] | None:
    """The recalled memory block a node iteration saw (None when it has no memory config)."""
    if block is None:
        return None
    return {
        "text": block.text,
        "items": block.items,
        "bytes_used": block.bytes_used,
        "budget_bytes": block.budget_bytes,
        "truncated": block.truncated,
        "warning": block.warning,
        "degraded": block.degraded,
        "query": block.query,
        "banks": block.banks,
    }


def memory_block_lines(block: MemoryBlockRecord) -> list[str]:
    """The memory block as text: accounting, each recalled item and why, then the block."""
    head = f"Memory block: {block.bytes_used} of {block.budget_bytes} bytes"
    head += ", " + plural(sum(1 for i in block.items if i.get('included', True)), 'item')
    if block.truncated:
        head += ", truncated"
    lines = [head]
    if block.warning:
        lines.append(f"  {'warning' if block.degraded else 'note'}: {visible(block.warning)}")
    for item in block.items:
        mark = "" if item.get("included", True) else " (left out: budget)"
        # "why" says how the item was found (words matched, as the query typed them,
        # similarity, primer); blocks stored before it existed only have the matched terms.
        why = readable_why(item, block.query) or "matched: -"
        lines.append(
            f"  - {visible(str(item.get('id')))} {visible(str(item.get('namespace', '')))}"
            f" score {float(item.get('score') or 0):.3f} {visible(why)}{mark}"
        )
    if block.text:
        lines.extend(f"  | {visible(line)}" for line in block.text.split("\n"))
    return lines
