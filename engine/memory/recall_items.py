"""What recall returns: ranked items with their provenance, and a result that can say "degraded".

"Nothing found" (``items == ()``, ``degraded is False``) and "recall failed" (``degraded is True``
with a reason) are different answers and are never confused: the dashboard shows the second as a
warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from store.memory.bank_tags import effective_tags

ItemSource = Literal["note", "fact", "primer"]


def explain(
    matched_terms: tuple[str, ...], similarity: float | None, found_by: tuple[str, ...]
) -> str:
    """One line saying how an item was found: the words it matched (as stemmed terms), its
    semantic similarity, or that it is a primer inserted as configured."""
    if "primer" in found_by:
        return "primer (configured)"
    parts = []
    if matched_terms:
        parts.append("words " + ", ".join(matched_terms))
    if similarity is not None:
        parts.append(f"similarity {similarity:.2f}")
    return "; ".join(parts) or "no match recorded"


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
    similarity: float | None = None
    found_by: tuple[str, ...] = ("keyword",)
    # A chat turn's answered turn (the end of the previous turn of its stream), shown before it
    answers: str | None = None

    @property
    def why(self) -> str:
        """How this item was found (see :func:`explain`)."""
        return explain(self.matched_terms, self.similarity, self.found_by)

    def describe(self) -> dict[str, Any]:
        """JSON-ready provenance (without the text, which the block itself carries)."""
        return {
            "id": self.id,
            "source": self.source,
            "namespace": self.namespace,
            "key": self.key,
            "score": round(self.score, 6),
            "matched_terms": list(self.matched_terms),
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "found_by": list(self.found_by),
            "why": self.why,
            "tags": list(self.tags),
            "carries_answered_turn": self.answers is not None,
        }


# A tag scope: every group must be met, a group by any one of its tags.
TagGroups = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RecallRequest:
    """What to recall: from which namespaces, with which query, scoped by which tags.

    ``tags`` must all be present on a record unless ``tag_groups`` gives a namespace its own
    scope (the bank-type rules of :mod:`engine.memory.tag_rules`)."""

    namespaces: tuple[str, ...]
    query: str
    tags: tuple[str, ...] = ()
    limit: int = 16
    tag_groups: Mapping[str, TagGroups] | None = None

    def groups_for(self, namespace: str) -> TagGroups:
        """The tag scope of one namespace."""
        if self.tag_groups is not None and namespace in self.tag_groups:
            return self.tag_groups[namespace]
        return tuple((tag,) for tag in self.tags)

    def admits(self, namespace: str, tags: tuple[str, ...]) -> bool:
        """True when a record of ``namespace`` with ``tags`` is inside the request's tag scope
        (its derived scope counted: :func:`store.memory.bank_tags.effective_tags`)."""
        have = set(effective_tags(namespace, tags))
        return all(any(tag in have for tag in group) for group in self.groups_for(namespace))

    def scopes(self) -> dict[str, TagGroups]:
        """The tag scope of every namespace of the request."""
        return {namespace: self.groups_for(namespace) for namespace in self.namespaces}


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


def said_the_same(item: RecallItem) -> tuple[str, str]:
    """What two items share when they say the same thing: a fact's key and the text, runs of
    whitespace collapsed and case folded (the bank does not count: the prompt would read the
    same line twice either way)."""
    return (" ".join((item.key or "").split()).casefold(), " ".join(item.text.split()).casefold())


def without_repeats(
    items: Sequence[RecallItem],
) -> tuple[tuple[RecallItem, ...], dict[str, tuple[RecallItem, ...]]]:
    """``items`` (best first) without those repeating a better-ranked item's text, and the
    repeats left out, by the id of the item they repeat: the same note added twice would
    otherwise take the block's bytes twice and push out evidence it does not hold. The
    repeats stay known, so an agent superseding what it recalled can retire them too."""
    first: dict[tuple[str, str], str] = {}
    kept: list[RecallItem] = []
    repeats: dict[str, list[RecallItem]] = {}
    for item in items:
        key = said_the_same(item)
        if key in first:
            repeats.setdefault(first[key], []).append(item)
        else:
            first[key] = item.id
            kept.append(item)
    return tuple(kept), {kept_id: tuple(found) for kept_id, found in repeats.items()}
