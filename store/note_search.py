"""Pure policy for note search: turning user text into a safe FTS5 query, and keeping
queries made only of very common words fast.

Safety: user text is split into words and every word is written as an FTS5 string literal
(``"word"``, inner ``"`` doubled), joined by spaces, which FTS5 reads as "all of these words".
Operators (``AND``, ``OR``, ``NOT``, ``NEAR``), column filters (``body:``), prefix stars and
parentheses in the text are therefore only ever words or separators, never syntax.

Speed: BM25 has to score every matching note before it can sort them, so a query whose rarest
word appears in hundreds of thousands of notes would cost hundreds of milliseconds. The index
already knows each word's document count (``notes_fts_vocab``). Because all words must match,
the rarest word bounds the match count. When that bound is at most :data:`FULL_RANK_MAX`, every
match is ranked. Above it, only the newest :data:`COMMON_POOL` matching notes (FTS5 walks
rowids newest first and stops early) are ranked: common-word queries cost about as much as a
rare one and favour recent knowledge, which for notes is usually the relevant knowledge.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from store.errors import InvalidInputError

# Ranking this many matches by BM25 stays within a few milliseconds (see bench/bench_note_search).
FULL_RANK_MAX = 4_000
# How many of the newest matches are ranked when every word is common.
COMMON_POOL = 1_000
# More words than this add nothing to a recall query and only cost lookups.
MAX_QUERY_TERMS = 16

# FTS5's unicode61 tokenizer keeps letters, numbers and private-use characters; everything
# else separates words. This pattern is the same split for the purpose of counting terms.
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class SearchPlan:
    """How to run one search: the FTS5 query text and whether to rank only the newest pool."""

    terms: tuple[str, ...]
    match_query: str
    newest_pool: bool


def query_terms(text: str) -> tuple[str, ...]:
    """The distinct words of ``text`` as the index stores them (case- and accent-folded).

    Raises:
        InvalidInputError: the text holds no word at all.
    """
    cleaned = text.replace("\x00", " ")
    terms: list[str] = []
    for word in _WORD.findall(cleaned):
        term = fold(word)
        if term and term not in terms:
            terms.append(term)
        if len(terms) == MAX_QUERY_TERMS:
            break
    if not terms:
        raise InvalidInputError("The search query has no words to look for.")
    return tuple(terms)


def fold(word: str) -> str:
    """Lower-case ``word`` and drop its accents, like ``unicode61 remove_diacritics 2``."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def fts_literal(term: str) -> str:
    """One FTS5 string literal: the term in double quotes, inner double quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_query(terms: Sequence[str]) -> str:
    """An FTS5 query matching notes that contain every term (implicit AND of literals)."""
    return " ".join(fts_literal(term) for term in terms)


def plan_search(
    terms: Sequence[str],
    document_counts: Mapping[str, int],
    *,
    full_rank_max: int = FULL_RANK_MAX,
) -> SearchPlan:
    """Decide between ranking every match and ranking only the newest pool.

    ``document_counts`` maps each term to the number of notes containing it. A term missing
    from it (or counted 0) is treated as rare: the estimate only chooses a strategy, it never
    decides what matches, so a tokenizer difference cannot hide results.
    """
    bound = min(document_counts.get(term, 0) for term in terms)
    return SearchPlan(tuple(terms), match_query(terms), newest_pool=bound > full_rank_max)
