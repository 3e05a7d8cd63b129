"""What recall returns: ranked items with their provenance, and a result that can say "degraded".

"Nothing found" (``items == ()``, ``degraded is False``) and "recall failed" (``degraded is True``
with a reason) are different answers and are never confused: the dashboard shows the second as a
warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ItemSource = Literal["note", "fact"]


@dataclass(frozen=True)
class RecallItem:
    """One recalled note or fact.

    ``id`` is stable and unique across both sources: ``note:<note id>`` or
    ``fact:<namespace>/<key>``. ``matched_terms`` says why it was picked.
    """

    id: str
    source: ItemSource
    namespace: str
    key: str | None
    text: str
    score: float
    matched_terms: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    at_ms: int | None = None

    def describe(self) -> dict[str, Any]:
        """JSON-ready provenance (without the text, which the block itself carries)."""
        return {
            "id": self.id,
            "source": self.source,
            "namespace": self.namespace,
            "key": self.key,
            "score": round(self.score, 6),
            "matched_terms": list(self.matched_terms),
            "tags": list(self.tags),
        }


@dataclass(frozen=True)
class RecallRequest:
    """What to recall: from which namespaces, with which query, scoped by which tags."""

    namespaces: tuple[str, ...]
    query: str
    tags: tuple[str, ...] = ()
    limit: int = 16


@dataclass(frozen=True)
class RecallResult:
    """Ranked items (best first), the terms actually searched, and a failure flag."""

    items: tuple[RecallItem, ...] = ()
    terms: tuple[str, ...] = ()
    degraded: bool = False
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failed(cls, reason: str) -> RecallResult:
        """A result that says recall did not work (distinct from finding nothing)."""
        return cls(degraded=True, reason=reason)
