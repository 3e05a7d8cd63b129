"""SQL text for recall: candidate notes and facts of several namespaces for a set of terms.

Executed by :mod:`store.recall`. The statements vary only by fixed fragments chosen with flags
(tag scope, candidate pool), never by user text; namespaces, tags and the FTS query (built from
quoted literals by :mod:`store.search_policy`) are bound parameters (lists as JSON arrays).

Measured at a million notes, two FTS5 conveniences are avoided on purpose:

* ``fts5vocab`` document counts walk the whole doclist of a term (tens of ms for a common
  word), so terms are probed with :data:`store.sql.memory.TERM_MATCH_COUNTS_CAPPED`, which
  counts matches only up to a cap (shared with note search);
* ``bm25()`` first counts every document containing each term (over 100 ms for common words),
  so only the *ranked* shape, used when every searched term is rare, calls it. The *newest
  pool* shape walks matches newest-first by rowid, stops after ``:pool`` rows that pass the
  filters, and leaves scoring to the caller.

``CROSS JOIN`` pins the join order: the full-text match drives and each match's row is looked
up by rowid. Without statistics the planner may otherwise start from an index on the notes and
run the full-text query once per note.
"""

from __future__ import annotations

from store.sql.memory import NOT_SUPERSEDED_BY_ACCEPTED, fact_live

# The largest rowid is a cheap upper bound of the note count (one b-tree descent).
APPROXIMATE_NOTE_COUNT = "SELECT coalesce(max(rowid), 0) FROM notes"

_NOTE_TAGS_CONTAIN_ALL = """NOT EXISTS (
    SELECT value FROM json_each(:tags)
    EXCEPT SELECT value FROM json_each(coalesce(n.tags_json, '[]')))"""



def recall_notes_sql(*, with_tags: bool, newest_pool: bool) -> str:
    """Accepted, not-superseded notes of ``:namespaces`` matching ``:query``.

    Ranked: the best ``:limit`` by ``bm25()``. Newest pool: the newest ``:pool`` matches, in
    no particular rank. With ``with_tags`` a note must carry every tag in ``:tags``.
    """
    conditions = [
        "notes_fts MATCH :query",
        "n.namespace IN (SELECT value FROM json_each(:namespaces))",
        "n.status = 'accepted'",
        NOT_SUPERSEDED_BY_ACCEPTED,
    ]
    if with_tags:
        conditions.append(_NOTE_TAGS_CONTAIN_ALL)
    where = " AND ".join(conditions)
    # Only what recall shows: the pool is up to 200 rows, and the full note columns and Note
    # objects cost ~0.5 ms more per recall (measured at 100k notes).
    columns = "n.id, n.namespace, n.body, n.tags_json, n.created_at_ms"
    if newest_pool:
        return f"""
SELECT {columns}
FROM notes_fts CROSS JOIN notes n ON n.rowid = notes_fts.rowid
WHERE {where}
ORDER BY notes_fts.rowid DESC LIMIT :pool"""
    return f"""
SELECT {columns}
FROM notes_fts CROSS JOIN notes n ON n.rowid = notes_fts.rowid
WHERE {where}
ORDER BY bm25(notes_fts) LIMIT :limit"""


# Live facts of :namespaces whose key or value matches :query: the newest :pool of them (facts
# are few; tag scoping happens on the decoded value, a ``tags`` list inside a JSON object).
RECALL_FACTS = f"""
SELECT f.namespace, f.key, f.value_json, f.updated_at_ms
FROM facts_fts CROSS JOIN facts f ON f.rowid = facts_fts.rowid
WHERE facts_fts MATCH :query
  AND f.namespace IN (SELECT value FROM json_each(:namespaces))
  AND {fact_live('f')}
ORDER BY facts_fts.rowid DESC LIMIT :pool"""
