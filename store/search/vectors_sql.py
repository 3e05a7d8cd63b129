"""SQL text for semantic vectors (:mod:`store.search.vector_store`): saving embeddings, finding
records that lack one, and loading a bank's vectors."""

from __future__ import annotations

from store.memory.memory_sql import fact_live

SAVE_VECTOR = """
INSERT OR REPLACE INTO memory_vectors
    (ref, model, namespace, source_rowid, dim, vector, created_at_ms)
VALUES (:ref, :model, :namespace, :source_rowid, :dim, :vector, :now)
"""

GET_MARK = "SELECT mark FROM vector_progress WHERE model = :model AND source = :source"

SET_MARK = """
INSERT INTO vector_progress (model, source, mark) VALUES (:model, :source, :mark)
ON CONFLICT (model, source) DO UPDATE SET mark = max(mark, excluded.mark)
"""

# Notes are append-only: every note above the mark still needs a vector.
NOTES_TO_EMBED = """
SELECT rowid, id, namespace, body FROM notes WHERE rowid > :mark ORDER BY rowid LIMIT :limit
"""

COUNT_NOTES_TO_EMBED = "SELECT count(*) FROM notes WHERE rowid > :mark"

# Facts change in place: a live fact written at or after the mark needs a (new) vector unless
# it already has one made since that write.
_FACT_NEEDS_VECTOR = f"""updated_at_ms >= :mark AND {fact_live()} AND NOT EXISTS (
    SELECT 1 FROM memory_vectors v
    WHERE v.model = :model AND v.ref = 'fact:' || facts.namespace || '/' || facts.key
      AND v.created_at_ms >= facts.updated_at_ms)"""

FACTS_TO_EMBED = f"""
SELECT rowid, namespace, key, value_json, updated_at_ms FROM facts
WHERE {_FACT_NEEDS_VECTOR}
ORDER BY updated_at_ms, rowid LIMIT :limit
"""

COUNT_FACTS_TO_EMBED = f"SELECT count(*) FROM facts WHERE {_FACT_NEEDS_VECTOR}"

# A bank's vectors (the in-memory matrix is built from these, then kept current by rowid).
BANK_VECTORS = """
SELECT rowid, ref, source_rowid, vector FROM memory_vectors
WHERE model = :model AND namespace = :namespace AND dim = :dim
ORDER BY rowid
"""

VECTORS_AFTER = """
SELECT rowid, ref, namespace, source_rowid, vector FROM memory_vectors
WHERE model = :model AND rowid > :after AND dim = :dim
ORDER BY rowid
"""

MAX_VECTOR_ROWID = "SELECT max(rowid) FROM memory_vectors"

COUNT_VECTORS = "SELECT count(*) FROM memory_vectors WHERE model = :model"

# The facts behind semantic candidates, if still live (:keys is a JSON array of [ns, key]).
LIVE_FACTS = f"""
SELECT f.namespace, f.key, f.value_json, f.updated_at_ms FROM facts f
JOIN json_each(:keys) j
  ON f.namespace = json_extract(j.value, '$[0]') AND f.key = json_extract(j.value, '$[1]')
WHERE {fact_live('f')}
"""
