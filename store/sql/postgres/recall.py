"""PostgreSQL twins of :mod:`store.sql.recall`: candidate notes and facts for recall."""

from __future__ import annotations

from store.sql.postgres.memory import NOT_SUPERSEDED_BY_ACCEPTED, fact_live
from store.sql.postgres.search import BM25_TERMS, bm25_sql, derive_query, newest_matches
from store.sql.postgres.statement import Twin

# The largest seq is a cheap upper bound of the note count (like SQLite's max(rowid)).
APPROXIMATE_NOTE_COUNT = "SELECT coalesce(max(seq), 0) FROM notes"

_NOTE_TAGS_CONTAIN_ALL = """NOT EXISTS (
    SELECT jsonb_array_elements_text(%(tags)s::jsonb)
    EXCEPT SELECT jsonb_array_elements_text(coalesce(n.tags_json, '[]')::jsonb))"""


def recall_notes_sql(*, with_tags: bool, newest_pool: bool) -> Twin:
    """Accepted, not-superseded notes of ``:namespaces`` matching ``:query``: the best
    ``%(limit)s`` by BM25, or the newest ``%(pool)s`` matches."""
    conditions = [
        "n.search_vector @@ %(tsquery)s::tsquery",
        "n.namespace IN (SELECT jsonb_array_elements_text(%(namespaces)s::jsonb))",
        "n.status = 'accepted'",
        NOT_SUPERSEDED_BY_ACCEPTED,
    ]
    if with_tags:
        conditions.append(_NOTE_TAGS_CONTAIN_ALL)
    where = " AND ".join(conditions)
    columns = "n.id, n.namespace, n.body, n.tags_json, n.created_at_ms"
    if newest_pool:
        # The full-text condition is each branch's own (dense: walk; sparse: GIN).
        rest = " AND ".join(conditions[1:])
        return Twin(f"""
SELECT id, namespace, body, tags_json, created_at_ms
FROM ({newest_matches(columns + ", n.seq", rest, "sum")}) AS pool
ORDER BY seq DESC LIMIT %(pool)s""", derive_query)
    return Twin(f"""
WITH {BM25_TERMS}
SELECT {columns}
FROM notes n
WHERE {where}
ORDER BY {bm25_sql('n.search_vector', 'n.body_length')}, n.seq DESC LIMIT %(limit)s""",
        derive_query)


RECALL_FACTS = Twin(f"""
SELECT f.namespace, f.key, f.value_json, f.updated_at_ms
FROM facts f
WHERE f.search_vector @@ %(tsquery)s::tsquery
  AND f.namespace IN (SELECT jsonb_array_elements_text(%(namespaces)s::jsonb))
  AND {fact_live('f')}
ORDER BY f.seq DESC LIMIT %(pool)s""", derive_query)
