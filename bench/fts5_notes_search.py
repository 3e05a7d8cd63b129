"""``tether notes search`` answered by SQLite FTS5 ``bm25()``: the cold-start benchmark's
like-for-like side (bench/bench_cold_start.py).

Everything but the ranking is the real command: click, workspace resolution, opening and
checking the database, formatting the hits. The search is the one FTS5 query Tether ran before
its term index (every word, live notes only, ``ORDER BY bm25(notes_fts)``), so the difference
is the term index's cost in a fresh process: importing numpy, mapping the snapshot, the tail.

    python bench/fts5_notes_search.py --workspace W notes search QUERY [--namespace NS] ...
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store.memory import notes as notes_module
from store.memory.memory_sql import NOT_SUPERSEDED_BY_ACCEPTED, NOTE_COLUMNS_N
from store.memory.namespaces import canonical_namespace
from store.memory.notes import NoteSearch, SearchHit, note_from_row
from store.search.search_policy import MODE_ALL_WORDS, match_all, query_terms


def fts5_sql(namespace: bool) -> str:
    """Live notes holding every word, ranked by FTS5's bm25() (lower is better)."""
    scope = "AND n.namespace = :namespace" if namespace else ""
    return f"""
SELECT {NOTE_COLUMNS_N}, bm25(notes_fts) AS rank
FROM notes_fts CROSS JOIN notes n ON n.rowid = notes_fts.rowid
WHERE notes_fts MATCH :query AND n.status = 'accepted' AND {NOT_SUPERSEDED_BY_ACCEPTED} {scope}
ORDER BY bm25(notes_fts) LIMIT :limit
"""


async def fts5_search(self: Any, query: str, *, namespace: Any = None, limit: int = 20,
                      **_: Any) -> NoteSearch:
    terms = query_terms(query)
    params: dict[str, Any] = {"query": match_all(query.split()), "limit": limit}
    if namespace is not None:
        params["namespace"] = canonical_namespace(namespace)
    rows = await self.db.fetch_all(fts5_sql(namespace is not None), params)
    hits = [SearchHit(note_from_row(row), -float(row["rank"]), terms, MODE_ALL_WORDS)
            for row in rows]
    return NoteSearch(hits, MODE_ALL_WORDS, terms)


if __name__ == "__main__":
    notes_module.NoteOps.search_notes_with_mode = fts5_search  # type: ignore[method-assign]
    from tui.cli.main import main

    sys.exit(main())
