"""Full-text matching on PostgreSQL with the shared search policy.

FTS5 tokenizes inside SQLite; PostgreSQL gets the same words from Python instead: a fact's
``search_vector`` holds :func:`store.search.search_policy.index_terms` (the policy's split,
folding and Porter stemming), so both backends match exactly the same words. Queries arrive as
the FTS5 expressions the policy builds (quoted literals joined by spaces or ``OR``) and become
``tsquery`` text here. Ranking notes is not done in SQL on either backend: recall and note
search score with the in-memory per-bank index (``store/search/term_index.py``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from store.search.search_policy import index_terms as index_words

MAX_POSITION = 16_383
"""PostgreSQL keeps word positions up to this; later occurrences share it (counted once)."""

_LITERAL = re.compile(r'"((?:[^"]|"")*)"')


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_text(text: str) -> tuple[str, int]:
    """``(tsvector input, token count)`` for ``text``: every folded word with its positions."""
    positions: dict[str, list[int]] = defaultdict(list)
    words = index_words(text)
    for index, word in enumerate(words, start=1):
        spot = min(index, MAX_POSITION)
        places = positions[word]
        if not places or places[-1] != spot:
            places.append(spot)
    parts = [f"{_quote(word)}:{','.join(map(str, places))}" for word, places in positions.items()]
    return " ".join(parts), len(words)


def fts5_terms(expression: str) -> list[str]:
    """The terms of an FTS5 expression built from quoted literals (``"a" "b"``, ``"a" OR "b"``)."""
    return [match.replace('""', '"') for match in _LITERAL.findall(expression)]


def fts5_to_tsquery(expression: str) -> str:
    """The ``tsquery`` text matching what the FTS5 expression matches: all literals (implicit
    AND) or any of them (``OR``). A literal holding several words is a phrase of them."""
    terms = fts5_terms(expression)
    joiner = " | " if " OR " in _LITERAL.sub("", expression) else " & "
    groups = []
    for term in terms:
        words = index_words(term)
        if not words:
            continue
        group = " <-> ".join(_quote(word) for word in words)
        groups.append(f"({group})" if len(words) > 1 else group)
    return joiner.join(groups) if groups else "''"


def derive_fact(params: Mapping[str, Any]) -> dict[str, Any]:
    """Lexemes of a fact's key and JSON value (FTS5 indexed both columns)."""
    vector, _ = tsvector_text(f"{params['key']} {params['value_json']}")
    return {"search_vector": vector}


def derive_query(params: Mapping[str, Any]) -> dict[str, Any]:
    """``%(tsquery)s`` from the FTS5 ``:query``, and the searched terms for BM25."""
    expression = str(params["query"])
    words = [word for term in fts5_terms(expression) for word in index_words(term)]
    terms = list(dict.fromkeys(words))
    return {"tsquery": fts5_to_tsquery(expression), "bm25_terms": terms}
