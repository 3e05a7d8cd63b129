"""Exact top-k BM25 over one bank's postings (:mod:`store.search.term_index`), reading as few
postings as the answer allows.

Small queries are scored in full: every posting of the query's terms (any word) or of the
intersection (every word). When the lists are long (a word in most of a million notes), the
search walks them in *impact order* instead: each term's postings come in runs, one per term
frequency, each run shortest note first and newest first among equals. Along a run a term's
BM25 contribution can only fall, whatever the statistics, so the next unread posting of each
run bounds everything after it. The walk (the threshold algorithm of Fagin et al.) always
reads the next block of the run whose next posting scores highest, scores each newly seen note
in full (binary search into every query term's note-ordered list), and stops once the
``k``-th best score found is above the sum over terms of each term's best unread
contribution: no unseen note can do better, or tie it, so the answer is exact, ties included
(newest first). Notes of the delta segment (newer than the runs) are scored in full first.

The bound is computed with the same float32 operations, term by term in the same order, as
the scores, so it is never below the score of a note it stands for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from store.search.search_policy import (
    BM25_B,
    BM25_K1,
    ECHO_PENALTY,
    idf,
    is_question_echo,
    weak_terms,
)


class BankIndex(Protocol):
    """What ranking reads of one bank's postings (:class:`store.search.bank_index.BankIndex`)."""

    base_docs: int

    @property
    def size(self) -> int: ...

    @property
    def rowids(self) -> np.ndarray: ...

    @property
    def lengths(self) -> np.ndarray: ...

    def namespace_of(self, doc: int) -> str: ...

    def has_base_postings(self, term: str) -> bool: ...

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]: ...

    def dense_tf(self, term: str, docs: np.ndarray, tfs: np.ndarray) -> np.ndarray | None: ...

    def runs(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


# Echo demotion can only reorder what it sees: rank this many extra candidates before cutting.
ECHO_HEADROOM = 16
# Queries with at most this many postings to score are scored in full (cheaper than a walk).
EXHAUSTIVE_POSTINGS = 16_384
# The walk reads a run in blocks growing from the first size to the last.
FIRST_BLOCK = 64
LAST_BLOCK = 8_192


@dataclass(frozen=True)
class Ranked:
    """One ranked note: its rowid, BM25 score, the query terms it holds, and whether it was
    demoted as an echo of the question."""

    rowid: int
    namespace: str
    score: float
    matched: tuple[str, ...]
    echo: bool = False


@dataclass
class Stats:
    """BM25 statistics of a set of notes: how many, their total length, and per-term counts."""

    notes: int = 0
    length: float = 0.0
    df: dict[str, int] = field(default_factory=dict)

    def add(self, other: Stats) -> None:
        self.notes += other.notes
        self.length += other.length
        for term, count in other.df.items():
            self.df[term] = self.df.get(term, 0) + count

    @property
    def average_length(self) -> float:
        return self.length / self.notes if self.notes else 1.0


@dataclass(frozen=True)
class Query:
    """What one bank is asked: distinct terms, every word or any, how many, the weak-match
    guard, and the question (for echo demotion headroom)."""

    terms: tuple[str, ...]
    require_all: bool
    limit: int
    guard: bool
    echo_text: str | None

    @property
    def want(self) -> int:
        return self.limit + (ECHO_HEADROOM if self.echo_text is not None else 0)


Lists = Mapping[str, tuple[np.ndarray, np.ndarray]]


def contribution(
    lengths: np.ndarray, docs: np.ndarray, tfs: np.ndarray, weight: float, average: float
) -> np.ndarray:
    """One term's BM25 contribution at each of its postings (float32)."""
    norms = np.float32(BM25_K1 * (1 - BM25_B)) + np.float32(BM25_K1 * BM25_B / average) * (
        lengths[docs])
    return np.float32(weight * (BM25_K1 + 1)) * tfs / (tfs + norms)


def score_bank(bank: BankIndex, mask: np.ndarray, stats: Stats, query: Query) -> list[Ranked]:
    """Exact BM25 of the admitted notes of one bank under ``stats``; the best ``want``
    (limit plus headroom for echo demotion), with the terms each matched."""
    if not stats.notes:
        return []
    average = stats.average_length
    weights = {t: idf(stats.df.get(t, 0), stats.notes) for t in query.terms}
    weak = weak_terms(stats.df, stats.notes) if query.guard else frozenset()
    if len(query.terms) == 1 and bank.has_base_postings(query.terms[0]):
        if query.terms[0] in weak:
            return []
        candidates, scores = _one_term(bank, mask, query, weights[query.terms[0]], average)
        return _top(bank, candidates, scores, query, {query.terms[0]: bank.postings(
            query.terms[0])})
    lists = {term: bank.postings(term) for term in query.terms}
    if query.require_all:
        if min(docs.shape[0] for docs, _ in lists.values()) == 0:
            return []
        shortest = min(query.terms, key=lambda t: lists[t][0].shape[0])
        if lists[shortest][0].shape[0] <= EXHAUSTIVE_POSTINGS:
            docs = lists[shortest][0]
            candidates, scores = _score(bank, docs[mask[docs]], query, lists, weights, average)
        else:
            candidates, scores = _walk(bank, mask, query, lists, weights, average,
                                       query.terms)
    else:
        sources = tuple(t for t in query.terms if t not in weak)
        if not sources:
            return []
        if sum(lists[t][0].shape[0] for t in sources) <= EXHAUSTIVE_POSTINGS:
            docs = np.unique(np.concatenate([lists[t][0] for t in sources]))
            candidates, scores = _score(bank, docs[mask[docs]], query, lists, weights, average)
        else:
            candidates, scores = _walk(bank, mask, query, lists, weights, average, sources)
    return _top(bank, candidates, scores, query, lists)


def _score(
    bank: BankIndex,
    docs: np.ndarray,
    query: Query,
    lists: Lists,
    weights: Mapping[str, float],
    average: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact scores of ``docs`` (term by term, in query order); every word: only the notes
    holding all terms are kept."""
    total = np.zeros(docs.shape[0], dtype=np.float32)
    keep = np.ones(docs.shape[0], dtype=bool)
    lengths = bank.lengths
    for term in query.terms:
        term_docs, term_tfs = lists[term]
        if term_docs.shape[0] == 0:
            if query.require_all:
                return docs[:0], total[:0]
            continue
        dense = bank.dense_tf(term, term_docs, term_tfs)
        if dense is not None:
            found = dense[docs].astype(np.float32)
            has = found > 0
            tfs = np.where(has, found, np.float32(1))
        else:
            where = np.minimum(np.searchsorted(term_docs, docs), term_docs.shape[0] - 1)
            has = term_docs[where] == docs
            tfs = np.where(has, term_tfs[where], np.float32(1))
        if query.require_all:
            keep &= has
        total += np.where(has, contribution(lengths, docs, tfs, weights[term], average),
                          np.float32(0))
    if query.require_all:
        return docs[keep], total[keep]
    return docs, total


@dataclass
class _Run:
    """One run being walked: its postings (impact order), where the walk is, the run's term
    frequency, the contribution of its next posting, and the next block's size."""

    docs: np.ndarray
    position: int
    end: int
    tf: float
    next: float = 0.0
    block: int = FIRST_BLOCK

    @property
    def left(self) -> bool:
        return self.position < self.end

    def advance(self, position: int, lengths: np.ndarray, weight: float, average: float) -> None:
        """Move to ``position`` and compute the next posting's contribution."""
        self.position = position
        if self.left:
            self.next = float(contribution(
                lengths, self.docs[position:position + 1],
                np.asarray([self.tf], dtype=np.float32), weight, average)[0])


def _walk(
    bank: BankIndex,
    mask: np.ndarray,
    query: Query,
    lists: Lists,
    weights: Mapping[str, float],
    average: float,
    sources: Sequence[str],
) -> tuple[np.ndarray, np.ndarray]:
    """Candidates holding the exact best ``want`` notes (the threshold walk, see the module
    docstring). Candidates come from the runs of ``sources`` (every term, or the terms the
    weak-match guard leaves); any other term is bounded by its largest possible
    contribution."""
    lengths = bank.lengths
    seen = np.zeros(bank.size, dtype=bool)
    pool = _Pool(query.want)

    def score_new(docs: np.ndarray) -> None:
        docs = docs[~seen[docs]]
        seen[docs] = True
        docs = docs[mask[docs]]
        if docs.shape[0]:
            pool.add(*_score(bank, docs, query, lists, weights, average))

    # The delta segment's postings, in full (they are few and newer than every run).
    # (Needles are int32 like the lists: a Python int would make numpy copy the whole list.)
    first_delta = np.int32(bank.base_docs)
    delta = [lists[t][0][np.searchsorted(lists[t][0], first_delta):] for t in sources]
    if any(d.shape[0] for d in delta):
        score_new(np.unique(np.concatenate(delta)))
    runs: dict[str, list[_Run]] = {}
    for term in sources:
        docs, edges, tfs = bank.runs(term)
        runs[term] = []
        for (start, end), tf in zip(edges.tolist(), tfs.tolist(), strict=True):
            run = _Run(docs, start, end, tf)
            run.advance(start, lengths, weights[term], average)
            runs[term].append(run)
    caps = {}
    for term in query.terms:
        docs, tfs = lists[term]
        if term not in runs and docs.shape[0]:
            caps[term] = float(contribution(
                np.asarray([lengths.min()], dtype=np.float32), np.zeros(1, dtype=np.int64),
                np.asarray([tfs.max()], dtype=np.float32), weights[term], average)[0])
    while True:
        if query.require_all and any(not any(r.left for r in rs) for rs in runs.values()):
            break  # every note holding one of the terms has been seen
        bound = np.float32(0)
        best_run, best_term = None, ""
        for term in query.terms:
            if term not in runs:
                bound = np.float32(bound + np.float32(caps.get(term, 0.0)))
                continue
            top = 0.0
            for run in runs[term]:
                if run.left and run.next >= top:
                    top = run.next
                    if best_run is None or run.next > best_run.next:
                        best_run, best_term = run, term
            bound = np.float32(bound + np.float32(top))
        if best_run is None or (pool.full and pool.kth > float(bound)):
            break
        end = min(best_run.end, best_run.position + best_run.block)
        score_new(best_run.docs[best_run.position:end])
        best_run.block = min(LAST_BLOCK, best_run.block * 2)
        best_run.advance(end, lengths, weights[best_term], average)
    return pool.docs, pool.scores


class _Pool:
    """The best notes found so far (every note scoring at least the ``want``-th best)."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.docs = np.zeros(0, dtype=np.int32)
        self.scores = np.zeros(0, dtype=np.float32)
        self.kth = -np.inf

    @property
    def full(self) -> bool:
        return self.scores.shape[0] >= self.want

    def add(self, docs: np.ndarray, scores: np.ndarray) -> None:
        if not docs.shape[0]:
            return
        self.docs = np.concatenate([self.docs, docs])
        self.scores = np.concatenate([self.scores, scores])
        count = self.scores.shape[0]
        if count >= self.want:
            self.kth = float(np.partition(self.scores, count - self.want)[count - self.want])
            if count > 4 * self.want:
                keep = self.scores >= self.kth
                self.docs, self.scores = self.docs[keep], self.scores[keep]


def _one_term(
    bank: BankIndex, mask: np.ndarray, query: Query, weight: float, average: float
) -> tuple[np.ndarray, np.ndarray]:
    """Candidates holding the exact top notes of a one-term query without scoring every
    posting: the first ``want`` admitted notes of each run (nothing later in a run can beat
    them: longer, or as long and older), plus the delta segment's postings."""
    term = query.terms[0]
    want = query.want
    docs, edges, tfs = bank.runs(term)
    picked_docs: list[np.ndarray] = []
    picked_tfs: list[np.ndarray] = []
    for (start, end), tf in zip(edges.tolist(), tfs.tolist(), strict=True):
        window = want * 4
        while True:
            group = docs[start:min(end, start + window)]
            admitted = group[mask[group]][:want]
            if admitted.shape[0] == want or start + window >= end:
                break
            window *= 4
        picked_docs.append(admitted)
        picked_tfs.append(np.full(admitted.shape[0], tf, dtype=np.float32))
    all_docs, all_tfs = bank.postings(term)
    first_delta = int(np.searchsorted(all_docs, np.int32(bank.base_docs)))
    extra_docs, extra_tfs = all_docs[first_delta:], all_tfs[first_delta:]
    keep = mask[extra_docs]
    picked_docs.append(extra_docs[keep])
    picked_tfs.append(extra_tfs[keep])
    candidates = np.concatenate(picked_docs)
    return candidates, contribution(bank.lengths, candidates, np.concatenate(picked_tfs),
                                    weight, average)


def _top(
    bank: BankIndex, candidates: np.ndarray, scores: np.ndarray, query: Query, lists: Lists
) -> list[Ranked]:
    """The best ``want`` candidates (best score first, then newest), with matched terms."""
    if candidates.shape[0] == 0:
        return []
    want = query.want
    if candidates.shape[0] > want:
        # Everything scoring at least the want-th best (ties included), then cut below.
        kth = np.partition(scores, candidates.shape[0] - want)[candidates.shape[0] - want]
        keep = scores >= kth
        candidates, scores = candidates[keep], scores[keep]
    rowids = bank.rowids[candidates]
    best = np.lexsort((-rowids, -scores))[:want]
    docs = candidates[best].astype(np.int32)
    holds = []
    for term in query.terms:
        term_docs = lists[term][0] if term in lists else bank.postings(term)[0]
        if term_docs.shape[0]:
            at = np.minimum(np.searchsorted(term_docs, docs), term_docs.shape[0] - 1)
            holds.append((term, (term_docs[at] == docs).tolist()))
    return [
        Ranked(int(rowids[position]), bank.namespace_of(int(doc)), float(scores[position]),
               tuple(term for term, held in holds if held[index]))
        for index, (position, doc) in enumerate(zip(best.tolist(), docs.tolist(), strict=True))
    ]


def order(ranked: Iterable[Ranked]) -> list[Ranked]:
    """Best score first; ties go to the newest note (larger rowid)."""
    return sorted(ranked, key=lambda r: (-r.score, -r.rowid))


def demote_echoes(
    ranked: Sequence[Ranked], terms: Sequence[str], texts: dict[int, str]
) -> list[Ranked]:
    """Multiply the score of notes that repeat the question (see
    :func:`store.search.search_policy.is_question_echo`) by the echo penalty, then re-order."""
    out = []
    for item in ranked:
        if is_question_echo(terms, item.matched, texts.get(item.rowid, "")):
            item = Ranked(item.rowid, item.namespace, item.score * ECHO_PENALTY, item.matched,
                          echo=True)
        out.append(item)
    return order(out)
