"""Keyword recall: exact BM25 over the live notes and facts of a task's banks, tag-scoped.

The policy shared with ``tether notes search`` (terms stemmed like the index, BM25 with each
bank's own statistics, the weak-match guard, question echo) lives in
:mod:`store.search.search_policy`; the postings are :mod:`store.search.term_index`; the reads run in
:mod:`store.search.recall_reads`. What is recall's own is here: scoring facts on the notes' scale,
merging both, and explaining why each item was picked (the words it matched).

A backend is anything with ``async recall(request) -> RecallResult``
(:class:`RecallBackend`): the runtime takes one as a parameter, so tests plug in one that hangs
or raises, semantic and hybrid recall (``engine/memory/semantic_recall.py``) wrap this one, and
another database (PostgreSQL) can bring its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from engine.memory.recall_items import RecallItem, RecallRequest, RecallResult
from store.clock import Clock
from store.db.seam import Database
from store.search.recall_reads import RecallIndex, RecallRow
from store.search.search_policy import (
    admitted,
    bm25,
    idf,
    index_terms,
    prompt_terms,
    prompt_words,
    weak_terms,
)
from store.search.term_ranking import Stats


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


def row_text(row: RecallRow) -> str:
    """The text a candidate contributes to the block."""
    return str(row.value) if row.source == "note" else fact_text(row.value)


def note_item(row: RecallRow) -> RecallItem:
    """A ranked note as a recall item (its exact BM25 score and matched terms)."""
    return RecallItem(
        f"note:{row.ref}", "note", row.namespace, None, row_text(row), row.score, row.matched,
        row.tags, row.at_ms,
    )


def score_facts(
    rows: Sequence[RecallRow], terms: Sequence[str], stats: dict[str, Stats]
) -> list[RecallItem]:
    """Score candidate facts with BM25 on their bank's note statistics (one scale with the
    notes), refusing facts matched only by weak terms."""
    items = []
    for row in rows:
        bank = stats.get(row.namespace) or Stats()
        doc = index_terms(f"{row.key or ''} {row_text(row)}")
        matched = matched_terms(terms, doc)
        if not matched or not admitted(matched, weak_terms(bank.df, bank.notes)):
            continue
        weights = {t: idf(bank.df.get(t, 0), max(bank.notes, 1)) for t in terms}
        items.append(
            RecallItem(
                f"fact:{row.ref}", "fact", row.namespace, row.key, row_text(row),
                bm25(doc, weights, bank.average_length if bank.notes else len(doc)),
                matched, row.tags, row.at_ms,
            )
        )
    return items


def rank(items: Iterable[RecallItem], limit: int) -> tuple[RecallItem, ...]:
    """Best score first; ties go to the newest, then to the id (deterministic)."""
    ordered = sorted(items, key=lambda i: (-i.score, -(i.at_ms or 0), i.id))
    return tuple(ordered[:limit])


class KeywordRecallBackend:
    """Keyword recall over the workspace database (exact BM25 per bank)."""

    name = "keyword"

    def __init__(self, db: Database, clock: Clock | None = None) -> None:
        self.index = RecallIndex(db)
        self.clock = clock or db.clock

    async def recall(self, request: RecallRequest) -> RecallResult:
        """Search notes and facts of ``request.namespaces`` (see the module docstring)."""
        terms = prompt_terms(request.query)
        if not terms or not request.namespaces:
            return RecallResult(terms=terms, details={"mode": self.name})
        found = await self.index.candidates(
            terms,
            request.namespaces,
            tags=request.scopes(),
            limit=request.limit,
            now_ms=self.clock.now_ms(),
            question=request.query,
            words=prompt_words(request.query),
        )
        facts = [f for f in found.facts if request.admits(f.namespace, f.tags)]
        items = rank(
            [*(note_item(row) for row in found.notes), *score_facts(facts, terms, found.stats)],
            request.limit,
        )
        return RecallResult(items=items, terms=terms, details={"mode": self.name})
