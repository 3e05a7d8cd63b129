"""Recall reads over the workspace database: capped term counts and candidate rows.

The policy (which terms to search, how to score, merge and explain results) lives in
``engine/memory/recall.py``; this module only executes the SQL of :mod:`store.sql.recall` and
decodes rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from store.database import Database
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


def _tags(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, list):
        return tuple(t for t in raw if isinstance(t, str))
    return ()


class RecallIndex:
    """Reads the FTS5 indexes of notes and facts for recall."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def term_document_counts(self, terms: Sequence[str], cap: int) -> dict[str, int]:
        """How many notes contain each term, counted up to ``cap`` (one statement)."""
        if not terms:
            return {}
        rows = await self.db.fetch_all(
            sql.TERM_DOCUMENT_COUNTS_CAPPED, {"terms": json.dumps(list(terms)), "cap": cap}
        )
        return {str(r["term"]): int(r["docs"]) for r in rows}

    async def approximate_note_count(self) -> int:
        """An upper bound of the number of notes, read in O(log n)."""
        return int(await self.db.fetch_value(sql.APPROXIMATE_NOTE_COUNT) or 0)

    async def search_notes(
        self,
        namespaces: Sequence[str],
        match: str,
        *,
        tags: Sequence[str] = (),
        limit: int,
        pool: int | None,
    ) -> list[RecallRow]:
        """Accepted, live notes of ``namespaces`` matching the FTS expression ``match``: the
        best ``limit`` by BM25, or (``pool`` given) the newest ``pool`` matches unranked."""
        statement = sql.recall_notes_sql(with_tags=bool(tags), newest_pool=pool is not None)
        params: dict[str, Any] = {
            "query": match,
            "namespaces": json.dumps(list(namespaces)),
            "limit": limit,
            "pool": pool or 0,
        }
        if tags:
            params["tags"] = json.dumps(list(tags))
        rows = await self.db.fetch_all(statement, params)
        return [
            RecallRow(
                "note",
                str(r["id"]),
                str(r["namespace"]),
                None,
                str(r["body"]),
                _tags(json.loads(r["tags_json"]) if r["tags_json"] else None),
                int(r["created_at_ms"]),
            )
            for r in rows
        ]

    async def search_facts(
        self, namespaces: Sequence[str], match: str, *, now_ms: int, pool: int
    ) -> list[RecallRow]:
        """The newest ``pool`` live facts of ``namespaces`` matching ``match``, decoded."""
        params = {
            "query": match,
            "namespaces": json.dumps(list(namespaces)),
            "now": now_ms,
            "pool": pool,
        }
        result = []
        for r in await self.db.fetch_all(sql.RECALL_FACTS, params):
            value = json.loads(r["value_json"])
            tags = _tags(value.get("tags")) if isinstance(value, dict) else ()
            result.append(
                RecallRow(
                    "fact",
                    f"{r['namespace']}/{r['key']}",
                    str(r["namespace"]),
                    str(r["key"]),
                    value,
                    tags,
                    int(r["updated_at_ms"]),
                )
            )
        return result
