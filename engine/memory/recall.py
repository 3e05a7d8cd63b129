"""Local recall: BM25 over the accepted notes and live facts of a task's banks, tag-scoped.

The search policy shared with ``tether notes search`` (splitting the prompt into terms, quoting
them, probing document counts up to a cap, dropping common words, the newest pool, BM25) lives
in :mod:`store.search_policy`; the SQL runs in :mod:`store.recall`. What is recall's own is here:
merging notes and facts on one score, the tag scope of facts, explaining why an item was picked,
and the result the runtime reports.

Why term choice matters: ``recall="auto"`` uses the whole task prompt as the query, which is
full of words that occur in most notes. Searching those would touch almost every note and make
recall cost grow with the store; see :func:`store.search_policy.plan_recall`.

Scores are BM25 computed here over the candidates (document counts from the probe, the note
count from the largest rowid), so notes and facts are ranked on one scale. SQLite's ``bm25()``
only pre-selects the best notes when all searched terms are rare (see ``store/sql/recall.py``).

A backend is anything with ``async recall(request) -> RecallResult``; the runtime takes one as a
parameter so tests can plug in one that hangs or raises.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from engine.memory.items import RecallItem, RecallRequest, RecallResult
from store.clock import Clock
from store.database import Database
from store.recall import RecallIndex, RecallRow
from store.search_policy import bm25, idf, prompt_terms, scored_words


class RecallBackend(Protocol):
    """Where recall results come from (local SQLite by default)."""

    async def recall(self, request: RecallRequest) -> RecallResult:
        """Return ranked items for the request, or a degraded result saying why not."""
        ...


def matched_terms(terms: Iterable[str], words: Iterable[str]) -> tuple[str, ...]:
    """The query terms that occur among ``words`` (why an item was picked)."""
    present = set(words)
    return tuple(t for t in terms if t in present)


def fact_text(value: Any) -> str:
    """The text a fact contributes: ``content`` of an object, a string as is, else JSON."""
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def has_all_tags(have: Iterable[str], required: Iterable[str]) -> bool:
    """True when every required tag is present (records must carry the task's tag scope)."""
    return set(required) <= set(have)


def row_text(row: RecallRow) -> str:
    """The text a candidate contributes to the block."""
    return str(row.value) if row.source == "note" else fact_text(row.value)


def score_rows(
    rows: Sequence[RecallRow],
    terms: Sequence[str],
    counts: Mapping[str, int],
    total_docs: int,
) -> list[RecallItem]:
    """Score candidates with BM25 on one scale and explain each (matched terms)."""
    docs = [scored_words(f"{row.key or ''} {row_text(row)}") for row in rows]
    average = sum(len(d) for d in docs) / len(docs) if docs else 1.0
    weights = {term: idf(counts.get(term, 1), total_docs) for term in terms}
    return [
        RecallItem(
            f"{row.source}:{row.ref}",
            row.source,
            row.namespace,
            row.key,
            row_text(row),
            bm25(doc, weights, average),
            matched_terms(terms, doc),
            row.tags,
            row.at_ms,
        )
        for row, doc in zip(rows, docs, strict=True)
    ]


def rank(items: Iterable[RecallItem], limit: int) -> tuple[RecallItem, ...]:
    """Best score first; ties go to the newest, then to the id (deterministic)."""
    ordered = sorted(items, key=lambda i: (-i.score, -(i.at_ms or 0), i.id))
    return tuple(ordered[:limit])


class LocalRecallBackend:
    """Recall over the workspace database's FTS5 indexes."""

    def __init__(self, db: Database, clock: Clock | None = None) -> None:
        self.index = RecallIndex(db)
        self.clock = clock or db.clock

    async def recall(self, request: RecallRequest) -> RecallResult:
        """Search notes and facts of ``request.namespaces`` (see the module docstring)."""
        terms = prompt_terms(request.query)
        if not terms or not request.namespaces:
            return RecallResult(terms=terms)
        found = await self.index.candidates(
            terms,
            request.namespaces,
            tags=request.tags,
            limit=request.limit,
            now_ms=self.clock.now_ms(),
        )
        plan = found.plan
        rows = [*found.notes, *(f for f in found.facts if has_all_tags(f.tags, request.tags))]
        searched = tuple(dict.fromkeys((*plan.note_terms, *plan.fact_terms)))
        items = rank(score_rows(rows, searched, found.counts, found.total_notes), request.limit)
        return RecallResult(
            items=items,
            terms=searched,
            details={
                "newest_pool": plan.newest_pool,
                "dropped_common_terms": list(plan.dropped),
            },
        )
