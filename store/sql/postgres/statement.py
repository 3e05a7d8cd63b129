"""A PostgreSQL twin that also adapts its parameters.

Most twins are plain text. A few need parameters the SQLite statement does not pass, computed
from the ones it does: the lexemes of a note body (what FTS5 derives inside SQLite), or a
``tsquery`` from an FTS5 match expression. :class:`Twin` carries that derivation beside the
text, so the store modules keep passing exactly what they pass to SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Derive = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Twin:
    """PostgreSQL text plus a function adding derived named parameters."""

    text: str
    derive: Derive

    def params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters to bind: the given ones plus the derived ones."""
        return {**given, **self.derive(given)}


class Native(str):
    """Text already written for PostgreSQL (built by a twin module's function), sent as is."""

    __slots__ = ()
