"""Pure policy for note search: turning user text into a safe FTS5 query, and keeping every
query fast, including queries made only of very common words.

Safety: user text is split into words and every word is written as an FTS5 string literal
(``"word"``, inner ``"`` doubled), joined by spaces, which FTS5 reads as "all of these words".
Operators (``AND``, ``OR``, ``NOT``, ``NEAR``), column filters (``body:``), prefix stars and
parentheses in the text are therefore only ever words or separators, never syntax.

Speed (measured in ``bench/bench_note_search.py``; the numbers there explain the constants):

* FTS5's ``bm25()`` first counts every note containing each query word, a walk of that word's
  whole posting list: cheap for rare words, tens of milliseconds for a word in most of a
  million notes. (``notes_fts_vocab`` has the same cost: it counts by walking, too.) So each
  word is first *probed*: its matches are counted only up to :data:`COMMON_DF`, which bounds
  the probe. A word above that is *common*.
* Common words are dropped from the query when at least one other word remains (they carry
  almost no BM25 weight anyway; stop-word practice). The rest is ranked by BM25 over the newest
  :data:`RANK_POOL` matching live notes (all of them when there are fewer), so the per-match
  cost of ranking and of the read contract is bounded too.
* A query made only of common words matches most notes, where BM25 cannot tell them apart
  (inverse document frequency is near zero). It takes the newest :data:`RECENT_POOL` live notes
  containing all the words and orders them by :func:`density_scores` (BM25's term-frequency part).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from store.errors import InvalidInputError

# A word in more notes than this is common (the probe stops counting here).
COMMON_DF = 20_000
# BM25 ranks at most this many of the newest matches.
RANK_POOL = 500
# A query of only common words looks at this many of the newest matches.
RECENT_POOL = 200
# More words than this add nothing to a recall query and only cost probes.
MAX_QUERY_TERMS = 16
# BM25's usual constants, for density_scores.
_K1 = 1.2
_B = 0.75
# Only the start of a long body is tokenized when scoring common-word matches.
_DENSITY_CHARS = 8_192

# FTS5's unicode61 tokenizer keeps letters, numbers and private-use characters; everything
# else separates words. This pattern is the same split for the purpose of counting terms.
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class SearchPlan:
    """How to run one search.

    ``match_query`` is the FTS5 query; ``dropped`` are common words left out of it; with
    ``bm25`` false the query held only common words and is ranked by :func:`density_scores`.
    """

    terms: tuple[str, ...]
    match_query: str
    dropped: tuple[str, ...]
    bm25: bool


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
    capped_counts: Mapping[str, int],
    *,
    common_df: int = COMMON_DF,
) -> SearchPlan:
    """Choose the words to match and how to rank, from each word's probed match count.

    ``capped_counts`` maps each term to its match count, counted no higher than
    ``common_df + 1``. A missing term counts as rare: the probe only chooses a strategy, so a
    tokenizer difference can never hide results.
    """
    common = tuple(term for term in terms if capped_counts.get(term, 0) > common_df)
    kept = tuple(term for term in terms if term not in common)
    if kept:
        return SearchPlan(tuple(terms), match_query(kept), common, bm25=True)
    return SearchPlan(tuple(terms), match_query(terms), (), bm25=False)


def density_scores(bodies: Sequence[str], terms: Sequence[str]) -> list[float]:
    """BM25's term-frequency part for ``terms`` in each body (no inverse document frequency),
    with the average length taken over ``bodies`` themselves.

    Used to order matches of common-word queries, where every word occurs in most notes.
    """
    counted = [Counter(_words(body)) for body in bodies]
    lengths = [sum(counts.values()) for counts in counted]
    average = max(1.0, sum(lengths) / max(1, len(lengths)))
    scores = []
    for counts, length in zip(counted, lengths, strict=True):
        norm = _K1 * (1 - _B + _B * length / average)
        scores.append(sum(counts[t] * (_K1 + 1) / (counts[t] + norm) for t in terms))
    return scores


def _words(body: str) -> list[str]:
    text = body[:_DENSITY_CHARS]
    # Folding the whole text at once is the same as folding each word, and ASCII needs only
    # lower-casing: this runs for every note in the pool.
    return _WORD.findall(text.lower() if text.isascii() else fold(text))
