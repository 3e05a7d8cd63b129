"""Counting what a listing left out, with the listing's own query (so the count can never
disagree with what the listing would show), up to a cap that bounds its cost."""

from __future__ import annotations

import re

LARGEST_INTEGER = 2**63 - 1
"""The largest integer both backends store and compare (SQLite INTEGER, PostgreSQL bigint):
a number bound to a statement beyond it fails (OverflowError), so entry points refuse it."""

MORE_COUNT_CAP = 1_000
"""Past this many left-out items a listing says "1,000+ more" instead of counting on."""

_SELECT_LIST = re.compile(r"^\s*SELECT\s.*?\sFROM\s", re.DOTALL)


def counted(query: str) -> str:
    """How many rows ``query`` (one of the store's fixed listing queries) returns; its
    own ``LIMIT`` parameter caps the count. Its select list becomes ``1``: counting reads the
    index the listing walks, not the rows' columns."""
    light, replaced = _SELECT_LIST.subn("SELECT 1 FROM ", query, count=1)
    if not replaced:
        raise ValueError("counted() needs a SELECT ... FROM query")
    return f"SELECT count(*) FROM ({light}) AS listing"
