"""Recall reads over the workspace database: ranked notes from the term index and candidate
facts from the facts' full-text index.

The policy (terms, BM25, the weak-match guard, question echo) is :mod:`store.search.search_policy`;
the per-bank postings are :mod:`store.search.term_index`; merging notes and facts and explaining why
each was picked is ``engine/memory/recall.py``. Everything one recall needs is read in a single
hop to the connection's thread (:meth:`Database.run_read`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from store.db.seam import Connection, Database, RowLike
from store.memory.note_values import note_tags
from store.memory.notes import notes_by_rowid
from store.search import recall_sql as sql
from store.search.bank_arrays import LIVE
from store.search.search_policy import match_any
from store.search.term_index import index_for
from store.search.term_ranking import Ranked, Stats, demote_echoes

# Facts are few per bank; recall reads at most this many of the newest matching ones.
FACT_POOL = 200


@dataclass(frozen=True)
class RecallRow:
    """One candidate: a note (``key`` None) or a fact (``value`` decoded)."""

    source: Literal["note", "fact"]
    ref: str
    namespace: str
    key: str | None
    value: Any
    tags: tuple[str, ...]
    at_ms: int
    score: float = 0.0
    matched: tuple[str, ...] = ()
    echo: bool = False


@dataclass(frozen=True)
class Candidates:
    """Ranked notes (exact BM25, guard and echo applied), candidate facts, and the statistics
    of each bank's live notes for the searched terms (to score facts on the same scale)."""

    notes: list[RecallRow] = field(default_factory=list)
    facts: list[RecallRow] = field(default_factory=list)
    stats: dict[str, Stats] = field(default_factory=dict)


def _fact_tags(raw: Any) -> tuple[str, ...]:
    # A fact's value is free JSON: only a list of strings counts as its tags.
    if isinstance(raw, list):
        return tuple(t for t in raw if isinstance(t, str))
    return ()


def _note(row: RowLike, ranked: Ranked) -> RecallRow:
    return RecallRow(
        "note",
        str(row["id"]),
        str(row["namespace"]),
        None,
        str(row["body"]),
        note_tags(row["tags_json"]),
        int(row["created_at_ms"]),
        ranked.score,
        ranked.matched,
        ranked.echo,
    )


def _fact(row: RowLike) -> RecallRow:
    value = json.loads(row["value_json"])
    tags = _fact_tags(value.get("tags")) if isinstance(value, dict) else ()
    return RecallRow(
        "fact",
        f"{row['namespace']}/{row['key']}",
        str(row["namespace"]),
        str(row["key"]),
        value,
        tags,
        int(row["updated_at_ms"]),
    )


class RecallIndex:
    """Reads recall candidates: notes through the term index, facts through FTS5."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.index = index_for(db)

    async def candidates(
        self,
        terms: Sequence[str],
        namespaces: Sequence[str],
        *,
        tags: Mapping[str, Sequence[Sequence[str]]] | None = None,
        limit: int,
        now_ms: int,
        question: str | None = None,
        words: Sequence[str] = (),
    ) -> Candidates:
        """The best ``limit`` live notes of ``namespaces`` (tag-scoped per namespace: groups,
        each met by any one tag) holding any of ``terms`` (each bank
        ranked with its own statistics; weak-only matches refused; echoes of ``question``
        demoted) and the newest :data:`FACT_POOL` live facts holding any of ``words`` (the
        unstemmed words of the query: the facts' FTS5 index stems them itself)."""
        scope = json.dumps(list(namespaces))
        index = self.index

        def work(conn: Connection) -> Candidates:
            ranked = index.search(
                conn, namespaces, terms, limit=limit, require_all=False, tags=tags,
                per_bank_stats=True, guard=True, echo_text=question,
            )
            rows = notes_by_rowid(conn, [item.rowid for item in ranked])
            if question is not None:
                texts = {rowid: str(row["body"]) for rowid, row in rows.items()}
                ranked = demote_echoes(ranked, terms, texts)
            notes = [_note(rows[r.rowid], r) for r in ranked[:limit] if r.rowid in rows]
            stats = {
                ns: bank.stats(terms, bank.mask(LIVE))
                for ns, bank in ((ns, index.banks[ns]) for ns in namespaces)
            }
            facts: list[RecallRow] = []
            if words:
                params = {
                    "query": match_any(words),
                    "namespaces": scope,
                    "now": now_ms,
                    "pool": FACT_POOL,
                }
                facts = [_fact(r) for r in conn.execute(sql.RECALL_FACTS, params)]
            return Candidates(notes, facts, stats)

        return await self.db.run_read(work)
