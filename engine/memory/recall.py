"""Local recall: BM25 over the accepted notes and live facts of a task's banks, tag-scoped.

Policy lives in pure functions here (tokenising the query, choosing which terms are worth
searching, explaining why an item was picked, merging notes and facts); the SQL runs in
:mod:`store.recall`.

Why term choice matters: ``recall="auto"`` uses the whole task prompt as the query, which is
full of words that occur in most notes. Searching those would rank almost every note and make
recall cost grow with the store. So the rarest terms are kept (document counts come from the FTS
vocabulary, no scan), words that occur in more than a few percent of notes are dropped when
rarer ones exist, and when every term is common only the newest matches are ranked.

A backend is anything with ``async recall(request) -> RecallResult``; the runtime takes one as a
parameter so tests can plug in one that hangs or raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from engine.memory.items import RecallItem, RecallRequest, RecallResult
from store.clock import Clock
from store.database import Database
from store.recall import RecallIndex, RecallRow

MAX_QUERY_TERMS = 64
MAX_SEARCH_TERMS = 8
# A term in more than this share of notes (and more than COMMON_MIN_DOCS of them) says little.
COMMON_SHARE = 0.02
COMMON_MIN_DOCS = 2000
# Rank every match only when the chosen terms can match at most this many notes; otherwise
# rank the newest POOL_SIZE matches. Both keep recall bounded at a million notes.
RANK_ALL_MAX_DOCS = 2000
POOL_SIZE = 500

_TOKEN = re.compile(r"[^\W_]+")


class RecallBackend(Protocol):
    """Where recall results come from (local SQLite by default)."""

    async def recall(self, request: RecallRequest) -> RecallResult:
        """Return ranked items for the request, or a degraded result saying why not."""
        ...


def query_terms(text: str, limit: int = MAX_QUERY_TERMS) -> tuple[str, ...]:
    """Distinct lower-case word tokens of ``text`` in order of first appearance.

    Tokens are runs of letters and digits, which is how the FTS5 ``unicode61`` tokenizer splits
    text, so every term can be quoted into a MATCH expression safely.
    """
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(text.casefold()):
        seen.setdefault(match.group(0), None)
        if len(seen) >= limit:
            break
    return tuple(seen)


@dataclass(frozen=True)
class TermChoice:
    """Which terms to search and whether only the newest matches get ranked."""

    terms: tuple[str, ...]
    newest_pool: bool
    dropped_common: tuple[str, ...] = ()


def choose_terms(
    counts: Mapping[str, int], total_notes: int, max_terms: int = MAX_SEARCH_TERMS
) -> TermChoice:
    """Pick the most informative terms by note document count (rarest first).

    Terms no note contains are left out (they cannot match a note). Common terms are dropped
    when rarer ones exist; when all terms are common the three rarest are searched over a pool
    of the newest matches.
    """
    present = sorted((t for t, c in counts.items() if c > 0), key=lambda t: (counts[t], t))
    if not present:
        return TermChoice((), False)
    threshold = max(COMMON_MIN_DOCS, int(total_notes * COMMON_SHARE))
    rare = [t for t in present if counts[t] <= threshold]
    if rare:
        chosen = tuple(rare[:max_terms])
        dropped = tuple(t for t in present if counts[t] > threshold)
        return TermChoice(chosen, sum(counts[t] for t in chosen) > RANK_ALL_MAX_DOCS, dropped)
    return TermChoice(tuple(present[:3]), True, tuple(present[3:]))


def match_expression(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression that matches any of ``terms``; each term is a quoted string."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def matched_terms(terms: Iterable[str], *texts: str) -> tuple[str, ...]:
    """The query terms that occur as words in ``texts`` (why an item was picked)."""
    words: set[str] = set()
    for text in texts:
        words.update(query_terms(text, limit=100_000))
    return tuple(t for t in terms if t in words)


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


def to_item(row: RecallRow, terms: tuple[str, ...]) -> RecallItem:
    """A store row as a ranked, explained recall item (score: higher is better)."""
    if row.source == "note":
        text = str(row.value)
        why = matched_terms(terms, text)
        return RecallItem(
            f"note:{row.ref}",
            "note",
            row.namespace,
            None,
            text,
            -row.bm25,
            why,
            row.tags,
            row.at_ms,
        )
    text = fact_text(row.value)
    why = matched_terms(terms, row.key or "", text)
    return RecallItem(
        f"fact:{row.ref}",
        "fact",
        row.namespace,
        row.key,
        text,
        -row.bm25,
        why,
        row.tags,
        row.at_ms,
    )


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
        terms = query_terms(request.query)
        if not terms or not request.namespaces:
            return RecallResult(terms=terms)
        counts = await self.index.term_document_counts(terms)
        total = await self.index.approximate_note_count()
        choice = choose_terms(counts, total)
        pool = POOL_SIZE if choice.newest_pool else None
        rows: list[RecallRow] = []
        if choice.terms:
            rows += await self.index.search_notes(
                request.namespaces,
                match_expression(choice.terms),
                tags=request.tags,
                limit=request.limit,
                pool=pool,
            )
        # Facts have no vocabulary table; they are few, so search the chosen terms plus any
        # that no note contains (a fact key may be the only place a word appears).
        fact_terms = (*choice.terms, *(t for t in terms if counts.get(t, 0) == 0))
        if fact_terms:
            facts = await self.index.search_facts(
                request.namespaces,
                match_expression(fact_terms[:MAX_SEARCH_TERMS]),
                now_ms=self.clock.now_ms(),
                limit=request.limit * 4 if request.tags else request.limit,
                pool=POOL_SIZE,
            )
            rows += [f for f in facts if has_all_tags(f.tags, request.tags)]
        searched = tuple(dict.fromkeys(fact_terms))
        items = rank((to_item(row, searched) for row in rows), request.limit)
        return RecallResult(
            items=items,
            terms=searched,
            details={
                "newest_pool": choice.newest_pool,
                "dropped_common_terms": list(choice.dropped_common),
            },
        )
