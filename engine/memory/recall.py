"""Local recall: BM25 over the accepted notes and live facts of a task's banks, tag-scoped.

Policy lives in pure functions here (tokenising the query, choosing which terms are worth
searching, scoring, explaining why an item was picked, merging notes and facts); the SQL runs in
:mod:`store.recall`.

Why term choice matters: ``recall="auto"`` uses the whole task prompt as the query, which is
full of words that occur in most notes. Searching those would touch almost every note and make
recall cost grow with the store. So stop words are dropped, every remaining term's document
count is probed *up to a cap* (cheap even for a word in every note), the rare terms are kept
and the common ones dropped; when every term is common only the newest matches are scored.

Scores are BM25 computed here over the candidates (document counts from the probe, the note
count from the largest rowid), so notes and facts are ranked on one scale. SQLite's ``bm25()``
only pre-selects the best notes when all searched terms are rare (see ``store/sql/recall.py``).

A backend is anything with ``async recall(request) -> RecallResult``; the runtime takes one as a
parameter so tests can plug in one that hangs or raises.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.memory.items import RecallItem, RecallRequest, RecallResult
from store.clock import Clock
from store.database import Database
from store.recall import RecallIndex, RecallRow, SearchPlan

MAX_QUERY_TERMS = 16
MAX_SEARCH_TERMS = 8
# Document counts are probed up to this cap; a term at the cap is "common" and dropped when
# rarer terms exist.
PROBE_CAP = 1000
# Let SQLite rank every match only when the chosen terms can match at most this many notes;
# otherwise score the newest POOL_SIZE matches here. Both keep recall bounded at a million notes.
RANK_ALL_MAX_DOCS = 2000
POOL_SIZE = 200
SCORED_TEXT_CHARS = 8000
BM25_K1 = 1.2
BM25_B = 0.75

# Function words carry no topic; dropping them before probing saves a probe each.
_STOP_WORDS_TEXT = (
    "a about above after again all also am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each few for "
    "from further had has have having he her here hers him his how i if in into is it its "
    "itself just me more most my no nor not now of off on once only or other our ours out "
    "over own same she should so some such than that the their theirs them then there these "
    "they this those through to too under until up very was we were what when where which "
    "while who whom why will with would you your yours"
)
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

_TOKEN = re.compile(r"[^\W_]+")


class RecallBackend(Protocol):
    """Where recall results come from (local SQLite by default)."""

    async def recall(self, request: RecallRequest) -> RecallResult:
        """Return ranked items for the request, or a degraded result saying why not."""
        ...


def tokens(text: str) -> list[str]:
    """Lower-case word tokens (runs of letters and digits, as FTS5's ``unicode61`` splits)."""
    return _TOKEN.findall(text.casefold())


def query_terms(text: str, limit: int = MAX_QUERY_TERMS) -> tuple[str, ...]:
    """Distinct search terms of ``text`` in order of first appearance: stop words and
    one-character tokens dropped, at most ``limit``. Every term can be quoted into a MATCH
    expression safely."""
    seen: dict[str, None] = {}
    for token in _TOKEN.finditer(text.casefold()):
        term = token.group(0)
        if len(term) < 2 or term in STOP_WORDS:
            continue
        seen.setdefault(term, None)
        if len(seen) >= limit:
            break
    return tuple(seen)


@dataclass(frozen=True)
class TermChoice:
    """Which terms to search and whether only the newest matches get scored."""

    terms: tuple[str, ...]
    newest_pool: bool
    dropped_common: tuple[str, ...] = ()


def choose_terms(
    counts: Mapping[str, int], cap: int = PROBE_CAP, max_terms: int = MAX_SEARCH_TERMS
) -> TermChoice:
    """Pick the most informative terms by (capped) note document count, rarest first.

    Terms no note contains are left out (they cannot match a note). Terms at the cap are
    common: dropped when rarer ones exist; when all terms are common the first three (in query
    order) are searched over a pool of the newest matches.
    """
    order = {term: index for index, term in enumerate(counts)}
    present = sorted((t for t, c in counts.items() if c > 0), key=lambda t: (counts[t], order[t]))
    if not present:
        return TermChoice((), False)
    rare = [t for t in present if counts[t] < cap]
    if rare:
        chosen = tuple(rare[:max_terms])
        dropped = tuple(t for t in present if counts[t] >= cap)
        return TermChoice(chosen, sum(counts[t] for t in chosen) > RANK_ALL_MAX_DOCS, dropped)
    return TermChoice(tuple(present[:3]), True, tuple(present[3:]))


def idf(df: int, total_docs: int) -> float:
    """BM25's inverse document frequency (never negative)."""
    df = max(1, df)
    return math.log(1 + (max(total_docs, df) - df + 0.5) / (df + 0.5))


def search_plan(terms: Sequence[str], counts: Mapping[str, int]) -> SearchPlan:
    """What to search given the probed counts: the chosen note terms (:func:`choose_terms`),
    and for facts, which are few and have no counts of their own, those terms plus any that no
    note contains (a fact key may be the only place a word appears)."""
    choice = choose_terms({t: counts.get(t, 0) for t in terms})
    unmatched = (t for t in terms if counts.get(t, 0) == 0)
    fact_terms = tuple(dict.fromkeys((*choice.terms, *unmatched)))[:MAX_SEARCH_TERMS]
    return SearchPlan(choice.terms, choice.newest_pool, fact_terms)


def bm25(doc: Sequence[str], weights: Mapping[str, float], average_length: float) -> float:
    """Okapi BM25 of one tokenised document; ``weights`` maps each term to its :func:`idf`."""
    length_norm = 1 - BM25_B + BM25_B * (len(doc) / max(average_length, 1.0))
    score = 0.0
    for term, weight in weights.items():
        tf = doc.count(term)
        if tf:
            score += weight * tf * (BM25_K1 + 1) / (tf + BM25_K1 * length_norm)
    return score


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
    """Score candidates with :func:`bm25` on one scale and explain each (matched terms)."""
    docs = [tokens(f"{row.key or ''} {row_text(row)[:SCORED_TEXT_CHARS]}") for row in rows]
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
        terms = query_terms(request.query)
        if not terms or not request.namespaces:
            return RecallResult(terms=terms)
        found = await self.index.candidates(
            terms,
            request.namespaces,
            plan=lambda counts: search_plan(terms, counts),
            cap=PROBE_CAP,
            tags=request.tags,
            limit=request.limit,
            pool=POOL_SIZE,
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
                "dropped_common_terms": [
                    t for t in terms if found.counts.get(t, 0) >= PROBE_CAP
                    and t not in plan.note_terms
                ],
            },
        )
