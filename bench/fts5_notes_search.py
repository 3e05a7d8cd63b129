"""``tether notes search`` answered by SQLite FTS5 ``bm25()``: the cold-start benchmark's
like-for-like side (bench/bench_cold_start.py).

Everything but the ranking is the real command: click, workspace resolution, opening and
checking the database, formatting the hits. The search is the one FTS5 query Tether ran before
its term index (every word, live notes only, ``ORDER BY bm25(notes_fts)``), so the difference
is the term index's cost in a fresh process: importing numpy, mapping the snapshot, the tail.

The workspace database keeps no FTS5 index of notes (nothing in Tether reads one), so the
baseline has its own database beside it, ``fts5_baseline.db``: the notes and supersession
edges copied through SQLite (``ATTACH``), indexed by FTS5 exactly as Tether's schema once did
(:func:`build_baseline`, run by bench_cold_start.py before it times anything).

    python bench/fts5_notes_search.py --workspace W notes search QUERY [--namespace NS] ...
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store.memory import notes as notes_module
from store.memory.memory_sql import NOT_SUPERSEDED_BY_ACCEPTED, NOTE_COLUMNS, NOTE_COLUMNS_N
from store.memory.namespaces import canonical_namespace
from store.memory.note_values import NoteSearch, SearchHit, note_from_row
from store.search.search_policy import MODE_ALL_WORDS, match_all, query_terms

BASELINE = "fts5_baseline.db"


def build_baseline(folder: Path) -> Path:
    """The FTS5 baseline database of the workspace in ``folder`` (built once, then reused)."""
    target = folder / BASELINE
    if target.exists():
        return target
    building = target.with_suffix(".building")
    building.unlink(missing_ok=True)
    conn = sqlite3.connect(building)
    conn.execute("ATTACH DATABASE ? AS src", (f"file:{folder / 'tether.db'}?mode=ro",))
    conn.executescript(f"""
CREATE TABLE notes AS SELECT * FROM src.notes WHERE 0;
INSERT INTO notes (rowid, {NOTE_COLUMNS}) SELECT rowid, {NOTE_COLUMNS} FROM src.notes;
CREATE UNIQUE INDEX notes_id_idx ON notes (id);
CREATE TABLE note_supersessions AS SELECT * FROM src.note_supersessions;
CREATE INDEX note_supersessions_target_idx ON note_supersessions (supersedes_id);
CREATE VIRTUAL TABLE notes_fts USING fts5 (
    body, content = 'notes', content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO notes_fts (notes_fts) VALUES ('rebuild');
INSERT INTO notes_fts (notes_fts) VALUES ('optimize');
""")
    conn.commit()
    conn.execute("DETACH DATABASE src")
    conn.close()
    building.rename(target)
    return target


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
    baseline = Path(self.db.workspace.root) / BASELINE
    conn = sqlite3.connect(f"file:{baseline}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    rows = conn.execute(fts5_sql(namespace is not None), params).fetchall()
    conn.close()
    hits = [SearchHit(note_from_row(row), -float(row["rank"]), terms, MODE_ALL_WORDS)
            for row in rows]
    return NoteSearch(hits, MODE_ALL_WORDS, terms)


if __name__ == "__main__":
    notes_module.NoteOps.search_notes_with_mode = fts5_search  # type: ignore[method-assign]
    from tui.cli.main import main

    sys.exit(main())
