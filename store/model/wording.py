"""Counts in sentences, the same wherever Tether writes one (store, engine, dashboard, CLI)."""

from __future__ import annotations


def plural(count: int, noun: str, plural_noun: str = "") -> str:
    """``1 run``, ``2 runs``, ``0 runs``, ``1,200 runs`` (``plural_noun`` for irregular
    words)."""
    return f"{count:,} {noun if count == 1 else (plural_noun or noun + 's')}"
