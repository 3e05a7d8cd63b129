"""PostgreSQL twins of :mod:`store.search.vectors_sql` (semantic vectors kept in the database, as
``bytea``; the ``vector`` extension of pgvector would replace the column and the bank scan
here, behind the same statement names). Rows' numbers are ``seq`` (read as ``rowid``); a
replaced vector gets a new number, as SQLite's ``INSERT OR REPLACE`` gives it a new rowid."""

from __future__ import annotations

from store.sql.postgres.memory import fact_live

SAVE_VECTOR = """
INSERT INTO memory_vectors (ref, model, namespace, source_rowid, dim, vector, created_at_ms)
VALUES (%(ref)s, %(model)s, %(namespace)s, %(source_rowid)s, %(dim)s, %(vector)s, %(now)s)
ON CONFLICT (model, ref) DO UPDATE SET
    namespace = excluded.namespace, source_rowid = excluded.source_rowid, dim = excluded.dim,
    vector = excluded.vector, created_at_ms = excluded.created_at_ms, seq = DEFAULT
"""

GET_MARK = "SELECT mark FROM vector_progress WHERE model = %(model)s AND source = %(source)s"

SET_MARK = """
INSERT INTO vector_progress (model, source, mark) VALUES (%(model)s, %(source)s, %(mark)s)
ON CONFLICT (model, source) DO UPDATE SET
    mark = greatest(vector_progress.mark, excluded.mark)
"""

NOTES_TO_EMBED = """
SELECT seq AS rowid, id, namespace, body FROM notes WHERE seq > %(mark)s ORDER BY seq
LIMIT %(limit)s
"""

COUNT_NOTES_TO_EMBED = "SELECT count(*) FROM notes WHERE seq > %(mark)s"

_FACT_NEEDS_VECTOR = f"""updated_at_ms >= %(mark)s AND {fact_live()} AND NOT EXISTS (
    SELECT 1 FROM memory_vectors v
    WHERE v.model = %(model)s AND v.ref = 'fact:' || facts.namespace || '/' || facts.key
      AND v.created_at_ms >= facts.updated_at_ms)"""

FACTS_TO_EMBED = f"""
SELECT seq AS rowid, namespace, key, value_json, updated_at_ms FROM facts
WHERE {_FACT_NEEDS_VECTOR}
ORDER BY updated_at_ms, seq LIMIT %(limit)s
"""

COUNT_FACTS_TO_EMBED = f"SELECT count(*) FROM facts WHERE {_FACT_NEEDS_VECTOR}"

BANK_VECTORS = """
SELECT seq AS rowid, ref, source_rowid, vector FROM memory_vectors
WHERE model = %(model)s AND namespace = %(namespace)s AND dim = %(dim)s
ORDER BY seq
"""

VECTORS_AFTER = """
SELECT seq AS rowid, ref, namespace, source_rowid, vector FROM memory_vectors
WHERE model = %(model)s AND seq > %(after)s AND dim = %(dim)s
ORDER BY seq
"""

MAX_VECTOR_ROWID = "SELECT max(seq) FROM memory_vectors"

COUNT_VECTORS = "SELECT count(*) FROM memory_vectors WHERE model = %(model)s"

LIVE_FACTS = f"""
SELECT f.namespace, f.key, f.value_json, f.updated_at_ms FROM facts f
JOIN jsonb_array_elements(%(keys)s::jsonb) AS j
  ON f.namespace = j.value ->> 0 AND f.key = j.value ->> 1
WHERE {fact_live('f')}
"""
