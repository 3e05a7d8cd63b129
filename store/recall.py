"""Recall reads over the workspace database: capped term probes and candidate rows.

The policy (which terms to search, how to quote them) is :mod:`store.search_policy`; scoring,
merging and explaining results is ``engine/memory/recall.py``. This module executes the SQL of
:mod:`store.sql.recall` and decodes rows. Everything one recall needs is read in a single hop to
the connection's thread (:meth:`Database.run_read`): probe, plan, search notes, search facts.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from store.database_api import DatabaseApi
from store.notes import capped_match_counts, note_tags
from store.search_policy import RECALL_COMMON_DF, RECENT_POOL, RecallPlan, match_any, plan_recall
from store.sql import recall as sql


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


@dataclass(frozen=True)
class Candidates:
    """The term counts, the plan followed, the candidate rows and the note count bound."""

    counts: dict[str, int]
    plan: RecallPlan
    notes: list[RecallRow] = field(default_factory=list)
    facts: list[RecallRow] = field(default_factory=list)
    total_notes: int = 0


def _fact_tags(raw: Any) -> tuple[str, ...]:
    # A fact's value is free JSON: only a list of strings counts as its tags.
    if isinstance(raw, list):
        return tuple(t for t in raw if isinstance(t, str))
    return ()


def _note(row: sqlite3.Row) -> RecallRow:
    return RecallRow(
        "note",
        str(row["id"]),
        str(row["namespace"]),
        None,
        str(row["body"]),
        note_tags(row["tags_json"]),
        int(row["created_at_ms"]),
    )


def _fact(row: sqlite3.Row) -> RecallRow:
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
    """Reads the FTS5 indexes of notes and facts for recall."""

    def __init__(self, db: DatabaseApi) -> None:
        self.db = db

    async def candidates(
        self,
        terms: Sequence[str],
        namespaces: Sequence[str],
        *,
        tags: Sequence[str] = (),
        limit: int,
        now_ms: int,
    ) -> Candidates:
        """Probe each term's note count (up to ``RECALL_COMMON_DF + 1``), plan with
        :func:`~store.search_policy.plan_recall`, then read the candidate notes (accepted, live,
        tag-scoped; the best ``limit`` by BM25, or the newest ``RECENT_POOL`` unranked) and live
        facts (the newest ``RECENT_POOL``) of ``namespaces``."""
        scope = json.dumps(list(namespaces))
        common_df, pool = RECALL_COMMON_DF, RECENT_POOL

        def work(conn: sqlite3.Connection) -> Candidates:
            counts = capped_match_counts(conn, terms, common_df + 1)
            plan = plan_recall(terms, counts, common_df=common_df)
            notes: list[RecallRow] = []
            if plan.note_terms:
                params: dict[str, Any] = {
                    "query": match_any(plan.note_terms),
                    "namespaces": scope,
                    "limit": limit,
                    "pool": pool,
                }
                if tags:
                    params["tags"] = json.dumps(list(tags))
                statement = sql.recall_notes_sql(
                    with_tags=bool(tags), newest_pool=plan.newest_pool
                )
                notes = [_note(r) for r in conn.execute(statement, params)]
            facts: list[RecallRow] = []
            if plan.fact_terms:
                params = {
                    "query": match_any(plan.fact_terms),
                    "namespaces": scope,
                    "now": now_ms,
                    "pool": pool,
                }
                facts = [_fact(r) for r in conn.execute(sql.RECALL_FACTS, params)]
            total = 0
            if notes or facts:
                total = int(conn.execute(sql.APPROXIMATE_NOTE_COUNT).fetchone()[0] or 0)
            return Candidates(counts, plan, notes, facts, total)

        return await self.db.run_read(work)
