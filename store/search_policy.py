"""Pure search policy shared by note search and recall: turning user text into safe FTS5
queries, choosing which words are worth searching, and scoring pools of matches.

Two readers use it, both over the ``notes_fts`` index (the SQL runs in their I/O shells):

* ``tether notes search`` (:meth:`store.notes.NoteStore.search_notes`) matches notes holding
  *every* word the person typed (:func:`match_all`) and plans with :func:`plan_search`;
* the memory runtime's recall (:mod:`store.recall`, ``engine/memory/recall.py``) uses a whole
  task prompt as its query, so it skips stop words (:func:`prompt_terms`), matches notes and
  facts holding *any* chosen word (:func:`match_any`) and plans with :func:`plan_recall`.

Safety: user text is split into words and every word is written as an FTS5 string literal
(``"word"``, inner ``"`` doubled). Operators (``AND``, ``OR``, ``NOT``, ``NEAR``), column filters
(``body:``), prefix stars and parentheses in the text are therefore only ever words or
separators, never syntax.

Speed (measured in ``bench/bench_note_search.py`` and ``bench/bench_recall.py``; the numbers
there explain the constants):

* FTS5's ``bm25()`` first counts every note containing each query word, a walk of that word's
  whole posting list: cheap for rare words, tens of milliseconds for a word in most of a
  million notes. (``notes_fts_vocab`` has the same cost: it counts by walking, too.) So each
  word is first *probed*: its matches are counted only up to one more than the reader's
  common-word threshold, which bounds the probe. A word above the threshold is *common*
  (:func:`split_common`).
* Common words are dropped when at least one rarer word remains (they carry almost no BM25
  weight anyway; stop-word practice).
* A query made only of common words matches most notes, where BM25 cannot tell them apart
  (inverse document frequency is near zero): only the newest :data:`RECENT_POOL` matches are
  read and scored here (:func:`density_scores`, :func:`bm25`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from store.errors import InvalidInputError

# More words than this add nothing to a query and only cost probes.
MAX_QUERY_TERMS = 16
# Pools: ranked and unranked reads look at this many of the newest matches at most.
# Note search ranks with SQLite's bm25() over at most RANK_POOL of the newest matches.
RANK_POOL = 500
# Queries of only common words (and recall's broad any-word queries) score this many of the
# newest matches in Python.
RECENT_POOL = 200

# Note search: a word in more notes than this is common. All words must match, so a common
# word beside a rare one costs little; only an all-common query needs the recent pool.
COMMON_DF = 20_000
# Recall: a word in more notes than this is common. Any word may match, so every searched word
# adds its whole match list to the candidates: the threshold is far lower than note search's.
RECALL_COMMON_DF = 1_000
# Recall searches at most this many of the rarest words...
MAX_RECALL_TERMS = 8
# ...or, when every word is common, the first few of them over the recent pool.
ALL_COMMON_RECALL_TERMS = 3
# Recall lets SQLite rank every match only when the chosen words match at most this many notes
# in all; otherwise it scores the recent pool in Python.
RANK_ALL_MAX_DOCS = 2_000

# BM25's usual constants.
BM25_K1 = 1.2
BM25_B = 0.75
# Only the start of a long text is tokenized when scoring in Python.
SCORED_CHARS = 8_192

# Function words carry no topic; recall drops them from prompts before probing (a probe each).
_STOP_WORDS_TEXT = (
    "a about above after again all also am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each few for "
    "from further had has have having he her here hers him his how i if in into is it its "
    "itself just me more most my no nor not now of off on once only or other our ours out "
    "over own same she should so some such than that the their theirs them then there these "
    "they this those through to too under until up very was we were what when where which "
    "while who whom why will with would you your yours"
)
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

# FTS5's unicode61 tokenizer keeps letters, numbers and private-use characters; everything
# else separates words. This pattern is the same split for the purpose of counting terms.
_WORD = re.compile(r"[^\W_]+")


# -- words -----------------------------------------------------------------------------------


def fold(word: str) -> str:
    """Lower-case ``word`` and drop its accents, like ``unicode61 remove_diacritics 2``."""
    if word.isascii():  # no accents to drop: the common case, for every word of a prompt
        return word.lower()
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def scored_words(text: str) -> list[str]:
    """The folded words of the start of ``text`` (:data:`SCORED_CHARS`), as the index has them.

    Folding the whole text at once is the same as folding each word, and cheaper (this runs for
    every candidate scored in Python).
    """
    return _WORD.findall(fold(text[:SCORED_CHARS]))


def index_words(text: str) -> list[str]:
    """Every folded word of ``text`` in order, as the full-text index holds them (the
    PostgreSQL backend builds its ``tsvector`` from these)."""
    return _WORD.findall(fold(text))


def _distinct_terms(text: str, keep: Callable[[str], bool]) -> tuple[str, ...]:
    terms: list[str] = []
    for word in _WORD.findall(text.replace("\x00", " ")):
        term = fold(word)
        if term and keep(term) and term not in terms:
            terms.append(term)
            if len(terms) == MAX_QUERY_TERMS:
                break
    return tuple(terms)


def query_terms(text: str) -> tuple[str, ...]:
    """The distinct words of a typed query as the index stores them (case- and accent-folded),
    in order of first appearance, at most :data:`MAX_QUERY_TERMS`.

    Raises:
        InvalidInputError: the text holds no word at all.
    """
    terms = _distinct_terms(text, lambda term: True)
    if not terms:
        raise InvalidInputError("The search query has no words to look for.")
    return terms


def prompt_terms(text: str) -> tuple[str, ...]:
    """Like :func:`query_terms` for a whole task prompt: stop words and one-character words are
    skipped, and a prompt with no word left gives no terms (recall then finds nothing)."""
    return _distinct_terms(text, lambda term: len(term) > 1 and term not in STOP_WORDS)


# -- FTS5 queries ----------------------------------------------------------------------------


def fts_literal(term: str) -> str:
    """One FTS5 string literal: the term in double quotes, inner double quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_all(terms: Sequence[str]) -> str:
    """An FTS5 query matching rows that contain every term (implicit AND of literals)."""
    return " ".join(fts_literal(term) for term in terms)


def match_any(terms: Sequence[str]) -> str:
    """An FTS5 query matching rows that contain any of the terms (OR of literals)."""
    return " OR ".join(fts_literal(term) for term in terms)


# -- plans -----------------------------------------------------------------------------------


def split_common(
    terms: Sequence[str], capped_counts: Mapping[str, int], common_df: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(kept, common)``: the terms matching at most ``common_df`` notes and the others, each
    in the given order.

    ``capped_counts`` maps terms to match counts probed up to ``common_df + 1``. A missing term
    counts as rare: the probe only chooses a strategy, so a tokenizer difference can never hide
    results.
    """
    common = tuple(term for term in terms if capped_counts.get(term, 0) > common_df)
    return tuple(term for term in terms if term not in common), common


@dataclass(frozen=True)
class SearchPlan:
    """How to run one note search.

    ``match_query`` is the FTS5 query; ``dropped`` are common words left out of it; with
    ``bm25`` false the query held only common words and is ranked by :func:`density_scores`.
    """

    terms: tuple[str, ...]
    match_query: str
    dropped: tuple[str, ...]
    bm25: bool


def plan_search(
    terms: Sequence[str],
    capped_counts: Mapping[str, int],
    *,
    common_df: int = COMMON_DF,
) -> SearchPlan:
    """Choose the words a note search matches (all of them) and how it ranks, from each word's
    match count probed up to ``common_df + 1``: common words are dropped while a rarer one
    remains; a query of only common words keeps them all and is ranked by density."""
    kept, common = split_common(terms, capped_counts, common_df)
    if kept:
        return SearchPlan(tuple(terms), match_all(kept), common, bm25=True)
    return SearchPlan(tuple(terms), match_all(terms), (), bm25=False)


@dataclass(frozen=True)
class RecallPlan:
    """What one recall searches once the term counts are known.

    ``note_terms`` empty skips notes; with ``newest_pool`` only the newest :data:`RECENT_POOL`
    matches are read (scored in Python) instead of SQLite's ``bm25()`` best; ``fact_terms``
    empty skips facts; ``dropped`` are the common words left out, in query order.
    """

    note_terms: tuple[str, ...]
    newest_pool: bool
    fact_terms: tuple[str, ...]
    dropped: tuple[str, ...] = ()


def plan_recall(
    terms: Sequence[str],
    capped_counts: Mapping[str, int],
    *,
    common_df: int = RECALL_COMMON_DF,
    max_terms: int = MAX_RECALL_TERMS,
) -> RecallPlan:
    """Pick the most informative recall terms, rarest first, from match counts probed up to
    ``common_df + 1``.

    Notes: terms no note contains are left out (they cannot match a note); common terms are
    dropped when rarer ones exist, and SQLite ranks every match only while the chosen terms
    match at most :data:`RANK_ALL_MAX_DOCS` notes. When every term is common, the first
    :data:`ALL_COMMON_RECALL_TERMS` (in query order) are searched over the newest pool.
    Facts, which are few and have no counts of their own, are searched for the chosen terms
    plus any that no note contains (a fact key may be the only place a word appears).
    """
    counts = {term: capped_counts.get(term, 0) for term in terms}
    order = {term: index for index, term in enumerate(terms)}
    present = sorted((t for t in terms if counts[t] > 0), key=lambda t: (counts[t], order[t]))
    rare, common = split_common(present, counts, common_df)
    if rare:
        chosen = tuple(rare[:max_terms])
        newest_pool = sum(counts[t] for t in chosen) > RANK_ALL_MAX_DOCS
        dropped = common
    elif present:
        chosen, newest_pool = tuple(present[:ALL_COMMON_RECALL_TERMS]), True
        dropped = tuple(present[ALL_COMMON_RECALL_TERMS:])
    else:
        chosen, newest_pool, dropped = (), False, ()
    unmatched = (t for t in terms if counts[t] == 0)
    fact_terms = tuple(dict.fromkeys((*chosen, *unmatched)))[:max_terms]
    in_query_order = tuple(t for t in terms if t in dropped)
    return RecallPlan(chosen, newest_pool, fact_terms, in_query_order)


# -- scores ----------------------------------------------------------------------------------


def idf(df: int, total_docs: int) -> float:
    """BM25's inverse document frequency (never negative)."""
    df = max(1, df)
    return math.log(1 + (max(total_docs, df) - df + 0.5) / (df + 0.5))


def bm25(doc: Sequence[str], weights: Mapping[str, float], average_length: float) -> float:
    """Okapi BM25 of one tokenised document; ``weights`` maps each term to its :func:`idf`."""
    length_norm = 1 - BM25_B + BM25_B * (len(doc) / max(average_length, 1.0))
    score = 0.0
    for term, weight in weights.items():
        tf = doc.count(term)
        if tf:
            score += weight * tf * (BM25_K1 + 1) / (tf + BM25_K1 * length_norm)
    return score


def density_scores(bodies: Sequence[str], terms: Sequence[str]) -> list[float]:
    """BM25's term-frequency part for ``terms`` in each body (every term weighs 1: no inverse
    document frequency), with the average length taken over ``bodies`` themselves.

    Used to order matches of common-word queries, where every word occurs in most notes.
    """
    docs = [scored_words(body) for body in bodies]
    average = sum(len(doc) for doc in docs) / max(1, len(docs))
    weights = dict.fromkeys(terms, 1.0)
    return [bm25(doc, weights, average) for doc in docs]
