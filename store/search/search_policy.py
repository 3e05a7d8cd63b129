"""Pure search policy shared by note search and recall (and by any other backend, such as a
PostgreSQL one, that must rank the same way): turning text into index terms, BM25 with the
statistics of the searched bank, the weak-match guard, question echo, the sentence fallback of
note search, and fusing keyword and semantic rankings.

Two readers use it, both over the live notes of a scope (accepted and not superseded by an
accepted note):

* ``tether notes search`` (:meth:`store.memory.notes.NoteOps.search_notes`) first matches notes
  holding *every* typed word (:data:`MODE_ALL_WORDS`); when that finds fewer than the limit it
  falls back to the recall policy (:data:`MODE_ANY_WORD`: stop words dropped, any word, weak
  matches refused), so a question typed as a sentence still finds its answer;
* recall (``engine/memory/recall.py``) uses a whole task prompt as its query: stop words are
  skipped (:func:`prompt_terms`), a note holding *any* term is a candidate, and a candidate
  matched only by weak words (:func:`weak_terms`) is never admitted: an empty block is better
  than a block of noise.

Terms are what the full-text index stores: words split like FTS5's ``unicode61`` tokenizer,
folded (lower case, accents removed: ``remove_diacritics 2``) and stemmed by FTS5's Porter rules
(:mod:`store.search.porter`), so ``opening`` finds ``opened`` on both sides.

Ranking is exact Okapi BM25 (:func:`idf`, :func:`bm25_weight`) with the statistics of the
scope searched: a bank's own note count, average length and document frequencies. Words are
never judged rare or common by counts over other banks. The arithmetic over postings lives in
:mod:`store.search.term_index`; these functions define it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence

from store.errors import InvalidInputError
from store.search.porter import stem

# More words than this add nothing to a typed query.
MAX_QUERY_TERMS = 16
# A task prompt is longer; recall scores up to this many of its distinct content words.
MAX_PROMPT_TERMS = 48

# BM25's usual constants.
BM25_K1 = 1.2
BM25_B = 0.75

# The weak-match guard: a term is weak in a scope when it occurs in more than this share of its
# live notes (a speaker's name, a date every note carries, "test" in a bank of test notes)...
WEAK_TERM_SHARE = 0.2
# ...and in more than this many notes (so a handful of notes in a tiny bank are not all weak).
WEAK_MIN_NOTES = 5

# Question echo: a note whose question sentences share at least this share of the query's terms
# repeats the question rather than answering it, unless at least ECHO_ANSWER_TERMS query terms
# also occur outside them (chat answers often end with a counter-question); an echo's score is
# multiplied by the penalty. The answer-terms rule was chosen on the tuning splits
# (docs/benchmarks/recall-quality.md): the older rule, any "?" in the note, demoted the
# evidence of about a sixth of real chat questions.
ECHO_SHARE = 0.5
ECHO_ANSWER_TERMS = 2
ECHO_PENALTY = 0.25

# Note search modes (shown by the CLI and the dashboard: which one answered).
MODE_ALL_WORDS = "all words"
MODE_ANY_WORD = "any word"

# Hybrid recall fuses its two rankings by reciprocal rank with a small constant and equal
# weights: on the tuning splits (bench/bench_recall_quality.py --sweep, docs/benchmarks/
# recall-quality.md) k = 2..5 form a plateau (mean hit@10 0.729-0.730 over chat, docs and
# LoCoMo) above normalised score fusion at any weight (best 0.721, equal weights) and the
# textbook k = 60 (0.686): a small k lets the top few of either ranking lead, so the signal
# that works on a set (keyword on LoCoMo, meaning on chat) is not drowned by the other's
# long tail. The fusion study of issue 22 (bench/recall_fusion_study.py, tuning splits only:
# 51 fusions, keyword weights from the query's coverage, idf or the lists' agreement, z-score
# and cosine-plus-BM25 score fusion) found none better by more than 4 questions of 975, each
# trading chat for LoCoMo, so these stay. RRF_K is the textbook constant for other callers.
HYBRID_FUSION = "rrf"
HYBRID_RRF_K = 5
KEYWORD_WEIGHT = 1.0
SEMANTIC_WEIGHT = 1.0
# Query-adaptive keyword weight: when none of keyword recall's first WEAK_KEYWORD_LOOK candidates
# matches WEAK_KEYWORD_FRACTION of the query's terms (or WEAK_KEYWORD_TERMS of them), its
# evidence is weak (a casual reply sharing one word with the question) and its weight is
# multiplied by WEAK_KEYWORD_SHARE. Chosen on the tuning splits
# (docs/benchmarks/recall-quality.md); both thresholds 0 turn the rule off.
WEAK_KEYWORD_TERMS = 0
WEAK_KEYWORD_SHARE = 0.5
WEAK_KEYWORD_FRACTION = 0.5
WEAK_KEYWORD_LOOK = 3
RRF_K = 60

# Function words carry no topic; recall and the sentence fallback drop them.
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
# else separates words. This pattern is the same split.
_WORD = re.compile(r"[^\W_]+")


# -- words -----------------------------------------------------------------------------------


def fold(word: str) -> str:
    """Lower-case ``word`` and drop its accents, like ``unicode61 remove_diacritics 2``."""
    if word.isascii():  # no accents to drop: the common case
        return word.lower()
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


# Bump when index_terms changes what it returns for some text, or the index's tags change
# (2: project-bank notes carry their derived scope, store/memory/bank_tags.py): persisted
# term-index snapshots (store/search/term_snapshot.py) made by another version are then rebuilt
# instead of trusted.
INDEX_TERMS_VERSION = 2


def index_terms(text: str) -> list[str]:
    """Every term of ``text`` in order, as the porter full-text index stores it."""
    return [stem(word) for word in _WORD.findall(fold(text.replace("\x00", " ")))]


def _distinct_terms(
    text: str, keep: Callable[[str], bool], limit: int
) -> tuple[str, ...]:
    terms: list[str] = []
    for word in _WORD.findall(fold(text.replace("\x00", " "))):
        if not keep(word):
            continue
        term = stem(word)
        if term not in terms:
            terms.append(term)
            if len(terms) == limit:
                break
    return tuple(terms)


def query_terms(text: str) -> tuple[str, ...]:
    """The distinct terms of a typed query (folded and stemmed like the index), in order of
    first appearance, at most :data:`MAX_QUERY_TERMS`.

    Raises:
        InvalidInputError: the text holds no word at all.
    """
    terms = _distinct_terms(text, lambda word: True, MAX_QUERY_TERMS)
    if not terms:
        raise InvalidInputError("The search query has no words to look for.")
    return terms


def is_content_word(word: str) -> bool:
    """A folded word worth searching for in a sentence: not a stop word, not one letter."""
    return len(word) > 1 and word not in STOP_WORDS


def prompt_terms(text: str, limit: int = MAX_PROMPT_TERMS) -> tuple[str, ...]:
    """Like :func:`query_terms` for a sentence or a whole task prompt: stop words and
    one-character words are skipped (before stemming), and a text with no word left gives no
    terms (recall then finds nothing)."""
    return _distinct_terms(text, is_content_word, limit)


def prompt_words(text: str, limit: int = MAX_PROMPT_TERMS) -> tuple[str, ...]:
    """The distinct folded content words of ``text`` before stemming: what an FTS5 query over
    a porter index is written with (FTS5 stems query words itself; a stem stemmed again can
    change, ``agreed`` -> ``agre`` -> ``agr``)."""
    words: list[str] = []
    for word in _WORD.findall(fold(text.replace("\x00", " "))):
        if is_content_word(word) and word not in words:
            words.append(word)
            if len(words) == limit:
                break
    return tuple(words)


# -- FTS5 queries (facts, and the benchmarks' exact reference) -------------------------------


def fts_literal(term: str) -> str:
    """One FTS5 string literal: the term in double quotes, inner double quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_all(terms: Sequence[str]) -> str:
    """An FTS5 query matching rows that contain every term (implicit AND of literals)."""
    return " ".join(fts_literal(term) for term in terms)


def match_any(terms: Sequence[str]) -> str:
    """An FTS5 query matching rows that contain any of the terms (OR of literals)."""
    return " OR ".join(fts_literal(term) for term in terms)


# -- scores ----------------------------------------------------------------------------------


def idf(df: int, total_docs: int) -> float:
    """BM25's inverse document frequency in its non-negative form (Lucene's):
    ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""
    df = max(0, df)
    return math.log(1 + (max(total_docs, df) - df + 0.5) / (df + 0.5))


def length_norm(length: float, average_length: float) -> float:
    """BM25's document-length normalisation ``k1 * (1 - b + b * len / avg)``."""
    return BM25_K1 * (1 - BM25_B + BM25_B * length / max(average_length, 1e-9))


def bm25_weight(tf: float, length: float, average_length: float) -> float:
    """The term-frequency part of one term's BM25 contribution (multiply by its idf)."""
    return tf * (BM25_K1 + 1) / (tf + length_norm(length, average_length))


def bm25(doc: Sequence[str], weights: Mapping[str, float], average_length: float) -> float:
    """Okapi BM25 of one tokenised document; ``weights`` maps each term to its :func:`idf`."""
    score = 0.0
    for term, weight in weights.items():
        tf = doc.count(term)
        if tf:
            score += weight * bm25_weight(tf, len(doc), average_length)
    return score


# -- the weak-match guard, question echo, the sentence fallback ------------------------------


def weak_terms(doc_counts: Mapping[str, int], live_notes: int) -> frozenset[str]:
    """The terms that occur in so large a share of a scope's live notes that a match on them
    alone says nothing (see :data:`WEAK_TERM_SHARE`)."""
    bound = max(WEAK_MIN_NOTES, WEAK_TERM_SHARE * live_notes)
    return frozenset(term for term, df in doc_counts.items() if df > bound)


def admitted(matched: Iterable[str], weak: frozenset[str]) -> bool:
    """True when a candidate matched at least one term that is not weak."""
    return any(term not in weak for term in matched)


_QUESTION_SENTENCE = re.compile(r"[^.!?\n]*\?")


def is_question_echo(terms: Sequence[str], matched: Iterable[str], text: str) -> bool:
    """True when ``text`` restates the question rather than answering it: its question
    sentences hold most of the query's terms (:data:`ECHO_SHARE`) and fewer than
    :data:`ECHO_ANSWER_TERMS` of the terms it matched occur anywhere else in it."""
    if not terms or "?" not in text:
        return False
    wanted = set(matched) & set(terms)
    if len(wanted) < max(2, math.ceil(ECHO_SHARE * len(terms))):
        return False
    asked = set(index_terms(" ".join(_QUESTION_SENTENCE.findall(text))))
    in_questions = wanted & asked
    if len(in_questions) < max(2, math.ceil(ECHO_SHARE * len(terms))):
        return False
    elsewhere = set(index_terms(_QUESTION_SENTENCE.sub(" ", text))) & wanted
    return len(elsewhere) < ECHO_ANSWER_TERMS


def needs_fallback(found: int, limit: int) -> bool:
    """Note search falls back to the any-word policy when all words found fewer than asked."""
    return found < limit


# -- hybrid ----------------------------------------------------------------------------------


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
) -> dict[str, float]:
    """Weighted reciprocal-rank fusion: each id scores ``sum(w / (k + rank))`` over the
    rankings it appears in (rank counted from 1)."""
    weights = weights or [1.0] * len(rankings)
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return fused


def keyword_share(
    matched_counts: Sequence[int], query_terms: int,
    min_terms: int = WEAK_KEYWORD_TERMS, share: float = WEAK_KEYWORD_SHARE,
    min_fraction: float = WEAK_KEYWORD_FRACTION,
) -> float:
    """The factor on keyword's fusion weight for one query: ``share`` when the best of its
    first candidates (``matched_counts``, distinct query terms each matched, in rank order)
    matches fewer than ``min_terms`` terms (or all of a shorter query's) or fewer than
    ``min_fraction`` of the query's terms, else 1."""
    if (min_terms <= 0 and min_fraction <= 0) or not matched_counts:
        return 1.0
    need = max(min(min_terms, query_terms), math.ceil(min_fraction * query_terms))
    best = max(matched_counts[:WEAK_KEYWORD_LOOK])
    return share if best < need else 1.0


def normalised_fusion(
    scores: Sequence[Mapping[str, float]],
    weights: Sequence[float] | None = None,
) -> dict[str, float]:
    """Weighted sum of min-max normalised scores (an id missing from a ranking adds 0)."""
    weights = weights or [1.0] * len(scores)
    fused: dict[str, float] = {}
    for ranking, weight in zip(scores, weights, strict=True):
        if not ranking:
            continue
        low, high = min(ranking.values()), max(ranking.values())
        span = high - low
        for key, value in ranking.items():
            share = (value - low) / span if span > 0 else 1.0
            fused[key] = fused.get(key, 0.0) + weight * share
    return fused
