"""SQL text for recall: BM25 over accepted notes and live facts of several namespaces.

Executed by :mod:`store.recall`. The statements vary only by fixed fragments chosen with flags
(tag scope, candidate pool), never by user text; namespaces, tags and the FTS query are bound
parameters (namespaces and tags as JSON arrays).

Two shapes for each source:

* *ranked*: every match is ranked by ``bm25()`` (used when the chosen terms are rare, so the
  match set is small);
* *newest pool*: FTS5 walks matches newest-first by rowid and stops after ``:pool`` of them
  that pass the filters, and only those are ranked. A query made of very common words therefore
  costs the same at a million notes as at a thousand.
"""

from __future__ import annotations

from store.sql.memory import NOT_SUPERSEDED_BY_ACCEPTED

# How many notes contain each term (the FTS vocabulary keeps these counts; nothing is scanned).
TERM_DOCUMENT_COUNT = "SELECT doc FROM notes_fts_vocab WHERE term = ?"

# The largest rowid is a cheap upper bound of the note count (one b-tree descent).
APPROXIMATE_NOTE_COUNT = "SELECT coalesce(max(rowid), 0) FROM notes"

_NOTE_TAGS_CONTAIN_ALL = """NOT EXISTS (
    SELECT value FROM json_each(:tags)
    EXCEPT SELECT value FROM json_each(coalesce(n.tags_json, '[]')))"""

_FACT_LIVE = "(f.ttl_ms IS NULL OR f.updated_at_ms + f.ttl_ms > :now)"


def _pooled(base: str, rowid: str, newest_pool: bool) -> str:
    if newest_pool:
        inner = f"{base}\n    ORDER BY {rowid} DESC LIMIT :pool"
        return f"SELECT * FROM ({inner})\nORDER BY bm25 LIMIT :limit"
    return f"{base}\nORDER BY bm25 LIMIT :limit"


def recall_notes_sql(*, with_tags: bool, newest_pool: bool) -> str:
    """Accepted, not-superseded notes of ``:namespaces`` matching ``:query`` (best first).

    With ``with_tags`` a note must carry every tag in ``:tags``.
    """
    conditions = [
        "notes_fts MATCH :query",
        "n.namespace IN (SELECT value FROM json_each(:namespaces))",
        "n.status = 'accepted'",
        NOT_SUPERSEDED_BY_ACCEPTED,
    ]
    if with_tags:
        conditions.append(_NOTE_TAGS_CONTAIN_ALL)
    base = f"""
SELECT n.id, n.namespace, n.body, n.tags_json, n.created_at_ms, bm25(notes_fts) AS bm25
FROM notes_fts JOIN notes n ON n.rowid = notes_fts.rowid
WHERE {' AND '.join(conditions)}"""
    return _pooled(base, "notes_fts.rowid", newest_pool)


def recall_facts_sql(*, newest_pool: bool) -> str:
    """Live facts of ``:namespaces`` whose key or value matches ``:query`` (best first).

    Tag scoping of facts happens on the decoded value (a ``tags`` list inside a JSON object).
    """
    base = f"""
SELECT f.namespace, f.key, f.value_json, f.updated_at_ms, bm25(facts_fts) AS bm25
FROM facts_fts JOIN facts f ON f.rowid = facts_fts.rowid
WHERE facts_fts MATCH :query
  AND f.namespace IN (SELECT value FROM json_each(:namespaces))
  AND {_FACT_LIVE}"""
    return _pooled(base, "facts_fts.rowid", newest_pool)
