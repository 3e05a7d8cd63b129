"""PostgreSQL twin of :mod:`store.search.recall_sql`: live facts matching a full-text query (notes
come from the in-memory term index, on both backends)."""

from __future__ import annotations

from store.search.tsvector import derive_query
from store.sql.postgres.memory import fact_live
from store.sql.postgres.statement import Twin

RECALL_FACTS = Twin(f"""
SELECT f.namespace, f.key, f.value_json, f.updated_at_ms
FROM facts f
WHERE f.search_vector @@ %(tsquery)s::tsquery
  AND f.namespace IN (SELECT jsonb_array_elements_text(%(namespaces)s::jsonb))
  AND {fact_live('f')}
ORDER BY f.seq DESC LIMIT %(pool)s""", derive_query)
