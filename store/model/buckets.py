"""Context-window size of a model call and the bucket it falls in (BRIEF section 2)."""

from __future__ import annotations

# Lower edge inclusive: a call of exactly 50 000 tokens is in "50k–100k".
BUCKET_EDGES: tuple[int, ...] = (50_000, 100_000, 200_000, 500_000, 1_000_000)
BUCKET_LABELS: tuple[str, ...] = ("<50k", "50k–100k", "100k–200k", "200k–500k", "500k–1M", "≥1M")


def context_window(input_tokens: int, cache_read_tokens: int, cache_write_tokens: int) -> int:
    """Tokens the model had in its window for one call: fresh input plus both cache lanes."""
    return input_tokens + cache_read_tokens + cache_write_tokens


def bucket_for(context_tokens: int) -> str:
    """The bucket label for a context-window size."""
    for edge, label in zip(BUCKET_EDGES, BUCKET_LABELS, strict=False):
        if context_tokens < edge:
            return label
    return BUCKET_LABELS[-1]
