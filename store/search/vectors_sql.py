"""SQL text for semantic vectors (:mod:`store.search.vector_store`): saving embeddings, finding
records that lack one, and loading a bank's vectors."""

from __future__ import annotations

from store.db.dialect import Statement
from store.memory.memory_sql import fact_live

_VECTOR_ROW = """
    (ref, model, namespace, source_rowid, dim, vector, created_at_ms)
VALUES (:ref, :model, :namespace, :source_rowid, :dim, :vector, :now)
"""

# A replaced vector gets a new number (rowid, seq): the in-memory matrices pick it up as new.
SAVE_VECTOR = Statement(
    f"INSERT OR REPLACE INTO memory_vectors {_VECTOR_ROW}",
    postgres=f"""INSERT INTO memory_vectors {_VECTOR_ROW}
ON CONFLICT (model, ref) DO UPDATE SET namespace = excluded.namespace,
    source_rowid = excluded.source_rowid, dim = excluded.dim, vector = excluded.vector,
    created_at_ms = excluded.created_at_ms, seq = DEFAULT
""",
)

GET_MARK = "SELECT mark FROM vector_progress WHERE model = :model AND source = :source"

SET_MARK = """
INSERT INTO vector_progress (model, source, mark) VALUES (:model, :source, :mark)
ON CONFLICT (model, source) DO UPDATE SET mark = max(vector_progress.mark, excluded.mark)
"""

# Notes are append-only: every note above the mark still needs a vector.
NOTES_TO_EMBED = """
SELECT rowid AS rowid, id, namespace, body FROM notes WHERE rowid > :mark ORDER BY rowid
LIMIT :limit
"""

COUNT_NOTES_TO_EMBED = "SELECT count(*) FROM notes WHERE rowid > :mark"

# Facts change in place: a live fact written at or after the mark needs a (new) vector unless
# it already has one made since that write.
_FACT_NEEDS_VECTOR = f"""updated_at_ms >= :mark AND {fact_live()} AND NOT EXISTS (
    SELECT 1 FROM memory_vectors v
    WHERE v.model = :model AND v.ref = 'fact:' || facts.namespace || '/' || facts.key
      AND v.created_at_ms >= facts.updated_at_ms)"""

FACTS_TO_EMBED = f"""
SELECT rowid AS rowid, namespace, key, value_json, updated_at_ms FROM facts
WHERE {_FACT_NEEDS_VECTOR}
ORDER BY updated_at_ms, rowid LIMIT :limit
"""

COUNT_FACTS_TO_EMBED = f"SELECT count(*) FROM facts WHERE {_FACT_NEEDS_VECTOR}"

# A bank's vectors (the in-memory matrix is built from these, then kept current by rowid).
BANK_VECTORS = """
SELECT rowid AS rowid, ref, source_rowid, vector FROM memory_vectors
WHERE model = :model AND namespace = :namespace AND dim = :dim
ORDER BY rowid
"""

VECTORS_AFTER = """
SELECT rowid AS rowid, ref, namespace, source_rowid, vector FROM memory_vectors
WHERE model = :model AND rowid > :after AND dim = :dim
ORDER BY rowid
"""

MAX_VECTOR_ROWID = "SELECT max(rowid) FROM memory_vectors"

COUNT_VECTORS = "SELECT count(*) FROM memory_vectors WHERE model = :model"

# The facts behind semantic candidates, if still live (:keys is a JSON array of [ns, key]).
_LIVE_FACTS = "SELECT f.namespace, f.key, f.value_json, f.updated_at_ms FROM facts f"
LIVE_FACTS = Statement(
    f"""{_LIVE_FACTS}
JOIN json_each(:keys) j
  ON f.namespace = json_extract(j.value, '$[0]') AND f.key = json_extract(j.value, '$[1]')
WHERE {fact_live('f')}
""",
    postgres=f"""{_LIVE_FACTS}
JOIN jsonb_array_elements(CAST(:keys AS jsonb)) AS j
  ON f.namespace = j.value ->> 0 AND f.key = j.value ->> 1
WHERE {fact_live('f')}
""",
)
