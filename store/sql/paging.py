"""Counting what a listing left out, with the listing's own query (so the count can never
disagree with what the listing would show), up to a cap that bounds its cost."""

from __future__ import annotations

MORE_COUNT_CAP = 10_000
"""Past this many left-out items a listing says "10,000+ more" instead of counting on."""


def counted(query: str) -> str:
    """How many rows ``query`` returns (its own ``LIMIT`` parameter caps the count)."""
    return f"SELECT count(*) FROM ({query})"
