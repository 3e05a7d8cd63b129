"""SQL text for recall's facts: live facts of several namespaces matching a full-text query.

Executed by :mod:`store.search.recall_reads` (notes come from the in-memory term index,
:mod:`store.search.term_index`). Namespaces and the FTS query (built from quoted literals by
:mod:`store.search.search_policy`) are bound parameters (lists as JSON arrays).

``CROSS JOIN`` pins the join order: the full-text match drives and each match's row is looked
up by rowid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from store.db.dialect import Statement
from store.memory.memory_sql import fact_live


# Live facts of :namespaces whose key or value matches :query: the newest :pool of them (facts
# are few; tag scoping happens on the decoded value, a ``tags`` list inside a JSON object).
def _derive_query(params: Mapping[str, Any]) -> dict[str, Any]:
    from store.search.tsvector import derive_query

    return derive_query(params)


# On PostgreSQL the match is the fact's ``search_vector`` against a ``tsquery`` derived from the
# same FTS5 expression (store/search/tsvector.py): the same words match on both.
_RECALL_FACTS = "SELECT f.namespace, f.key, f.value_json, f.updated_at_ms"
_IN_NAMESPACES = f"""f.namespace IN (SELECT value FROM json_each(:namespaces))
  AND {fact_live('f')}"""
RECALL_FACTS = Statement(
    f"""{_RECALL_FACTS}
FROM facts_fts CROSS JOIN facts f ON f.rowid = facts_fts.rowid
WHERE facts_fts MATCH :query AND {_IN_NAMESPACES}
ORDER BY facts_fts.rowid DESC LIMIT :pool""",
    postgres=f"""{_RECALL_FACTS}
FROM facts f
WHERE f.search_vector @@ CAST(:tsquery AS tsquery) AND {_IN_NAMESPACES}
ORDER BY f.rowid DESC LIMIT :pool""",
    derive=_derive_query,
)
