"""Full-text search on PostgreSQL with the shared search policy.

FTS5 tokenizes inside SQLite; PostgreSQL gets the same words from Python instead: a note's
``search_vector`` is built from :func:`store.search_policy.index_words` (the policy's split and
folding, the same that scores candidates), so both backends index, match and explain exactly the
same words. Queries arrive as the FTS5 expressions the policy builds (quoted literals joined by
spaces or ``OR``) and become ``tsquery`` text here.

BM25 follows FTS5's ``bm25()``: ``idf = ln((N - n + 0.5) / (n + 0.5))`` (at least 1e-6), term
frequency from the lexeme's positions, document length in tokens against the average from
``note_stats``; :func:`bm25_sql` is its SQL form and returns FTS5's sign (lower is better).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from store.search_policy import index_words

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


def literals_to_tsqueries(literals_json: str) -> list[str]:
    """A JSON array of FTS5 literals as a list of ``tsquery`` texts, in order."""
    return [fts5_to_tsquery(literal) for literal in json.loads(literals_json)]


BM25_TERMS = """bm25_terms AS (
    SELECT t.term, coalesce(nt.docs, 0) AS docs
    FROM unnest(%(bm25_terms)s::text[]) AS t(term)
    LEFT JOIN note_terms nt ON nt.term = t.term)"""
"""A CTE of each searched term with the number of notes holding it (BM25's ``n``)."""

DENSE_SHARE = 20
"""A pool query walks the newest notes when its words are in at least 1/20 of all notes."""


def dense(combine: str) -> str:
    """True when the searched terms are in so many notes that walking the newest notes finds
    the pool at once (a GIN bitmap would read every match first); ``combine`` is ``sum`` for
    any-word queries, ``min`` for all-word ones (an upper bound of the matches either way)."""
    # All words must occur: a word no note holds means no match at all (never walk for it).
    every = "count(nt.term) < cardinality(%(bm25_terms)s::text[])"
    missing = every if combine == "min" else "false"
    return f"""(SELECT NOT {missing}
        AND coalesce({combine}(nt.docs), 0) * {DENSE_SHARE} >= (SELECT docs FROM note_stats)
        FROM note_terms nt WHERE nt.term = ANY(%(bm25_terms)s::text[]))"""


def newest_matches(columns: str, where: str, combine: str) -> str:
    """The newest ``%(pool)s`` rows of ``notes n`` passing ``where`` and matching
    ``%(tsquery)s``: dense words walk the seq index newest first and test each note
    (``ts_match_vq``, which no index serves); sparse ones read the GIN index. Only the branch
    whose one-time condition holds runs."""
    return f"""
(SELECT {columns} FROM notes n
 WHERE {dense(combine)} AND ts_match_vq(n.search_vector, %(tsquery)s::tsquery) AND {where}
 ORDER BY n.seq DESC LIMIT %(pool)s)
UNION ALL
(SELECT {columns} FROM notes n
 WHERE NOT {dense(combine)} AND n.search_vector @@ %(tsquery)s::tsquery AND {where}
 ORDER BY n.seq DESC LIMIT %(pool)s)"""


def bm25_sql(vector: str, length: str) -> str:
    """FTS5's ``bm25()`` (negative: lower is better) of a note's ``vector`` and token
    ``length``, over the terms of the :data:`BM25_TERMS` CTE and ``note_stats``."""
    return f"""-(SELECT coalesce(sum(
        greatest(ln((st.docs - d.docs + 0.5) / (d.docs + 0.5)), 1e-6)
        * (cardinality(u.positions) * 2.2)
        / (cardinality(u.positions)
           + 1.2 * (0.25 + 0.75 * {length}
                    / greatest(st.tokens::float8 / greatest(st.docs, 1), 1e-9)))), 0)
     FROM unnest({vector}) AS u
     JOIN bm25_terms AS d ON d.term = u.lexeme
     CROSS JOIN note_stats st)"""


def derive_note(params: Mapping[str, Any]) -> dict[str, Any]:
    """Lexemes and token count of a note body (``%(search_vector)s``, ``%(body_length)s``)."""
    vector, length = tsvector_text(str(params["body"]))
    return {"search_vector": vector, "body_length": length}


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


def derive_literals(params: Mapping[str, Any]) -> dict[str, Any]:
    """From the JSON array of FTS5 literals ``:literals``: ``%(tsqueries)s`` and, for a literal
    that is one word, that word in ``%(single_terms)s`` (None for a phrase)."""
    literals = json.loads(str(params["literals"]))
    singles = []
    for literal in literals:
        words = [w for term in fts5_terms(literal) for w in index_words(term)]
        singles.append(words[0] if len(words) == 1 else None)
    return {"tsqueries": [fts5_to_tsquery(lit) for lit in literals], "single_terms": singles}


def json_list(values: Sequence[str]) -> str:
    """A JSON array (for parameters the SQLite side also passes as JSON)."""
    return json.dumps(list(values))
