"""How a person writes a fact's time to live: a number of milliseconds, or a number with a unit
(``500ms``, ``30s``, ``5m``, ``2h``, ``7d``). One reading for ``tether memory set --ttl`` and the
dashboard's fact editor."""

from __future__ import annotations

import re

_TTL_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_TTL_RE = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")


def parse_ttl(text: str) -> int | None:
    """Turn a TTL typed by a person into milliseconds; blank means "never expires".

    Accepts a bare number of milliseconds or a number with a unit: ``500ms``, ``30s``, ``5m``,
    ``2h``, ``7d``.

    Raises:
        ValueError: the text is neither blank nor a duration above 0 (a TTL of 0 would write
            a fact already expired).
    """
    if not text.strip():
        return None
    match = _TTL_RE.match(text)
    if match is None:
        raise ValueError("TTL must be blank or a duration such as 90000, 30s, 5m, 2h or 7d.")
    ttl_ms = int(match.group(1)) * _TTL_UNITS_MS[match.group(2) or "ms"]
    if ttl_ms == 0:
        raise ValueError("TTL must be above 0 (0 expires the fact as it is written); leave it "
                         "blank for none.")
    return ttl_ms


def format_ttl(ttl_ms: int | None) -> str:
    """The shortest exact spelling of a TTL that :func:`parse_ttl` reads back ("" for none)."""
    if ttl_ms is None:
        return ""
    for unit in ("d", "h", "m", "s"):
        size = _TTL_UNITS_MS[unit]
        if ttl_ms and ttl_ms % size == 0:
            return f"{ttl_ms // size}{unit}"
    return str(ttl_ms)
