"""Exact BM25 over a bank's notes: an in-memory inverted index per bank, kept current from the
database's tail.

Why not SQLite's ``bm25()``: FTS5 ranks with statistics over the whole table (every bank and
every status), and ranking a word that occurs in most of a million notes walks its whole
posting list before the first row comes back (tens of milliseconds). Here each bank has its
own postings (numpy arrays of note numbers and term frequencies, grouped by term), so a query
costs only the postings of its own terms, and the statistics (live note count, average length,
document frequencies) are those of the notes the search may return: by default a bank's live
notes (accepted, not superseded by an accepted note). Results equal exact BM25 over those notes
(``bench/bench_note_search.py`` checks against FTS5's ``bm25()`` and ``bm25s`` in the same run).

Keeping current: every note of a bank (any status) has a number in its bank's index, with its
status and whether an accepted note supersedes it, so a decision only flips two small arrays.
Before each search the index reads the database's tail in the same hop: notes with a larger
rowid than any seen (notes are append-only) and the ``note_changes`` log written by triggers
(status decisions, new supersession edges). New notes land in a small delta segment that is
merged into the arrays when it grows.

Cost by query shape (all exact): one term reads the first few admitted notes of each
term-frequency group of its postings, ordered by note length (BM25 only falls along them);
every word with a short list intersects it with the others by binary search; every word with
only long lists walks the shortest best-first until a length bound says nothing better is
left; any word accumulates into a dense array, or, when the weak-match guard admits only
notes holding a rarer term, scores just those.

A bank is built on its first search in a process (about 3 s per 100k notes on this machine);
a long-running process (engine, dashboard, ``tether mcp``) pays that once.
"""

from __future__ import annotations

import json
import sqlite3
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from store.search_policy import (
    BM25_B,
    BM25_K1,
    ECHO_PENALTY,
    idf,
    index_terms,
    is_question_echo,
    weak_terms,
)
from store.sql import term_index as sql

if TYPE_CHECKING:
    from store.database import Database

STATUS_CODES = {"pending": 0, "accepted": 1, "rejected": 2}
# Merge the delta segment into the arrays when it holds this many notes (or a tenth of them).
MERGE_AT_NOTES = 2_000
# Echo demotion can only reorder what it sees: rank this many extra candidates before cutting.
ECHO_HEADROOM = 16

Int = np.int64
# The name of the one index holding every note of the workspace (searches over several banks
# with pooled statistics: all of them, or one namespace kind).
WORKSPACE = "*"


@dataclass(frozen=True)
class Scope:
    """Which notes a search may return: statuses (codes) and whether superseded ones count."""

    statuses: tuple[int, ...] = (STATUS_CODES["accepted"],)
    include_superseded: bool = False
    kind: str | None = None


LIVE = Scope()


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


class BankIndex:
    """The postings and per-note arrays of one bank (namespace)."""

    def __init__(self, namespace: str, vocabulary: dict[str, int]) -> None:
        self.namespace = namespace  # WORKSPACE: every note, each with its namespace code
        self.vocabulary = vocabulary
        self.namespace_codes: dict[str, int] = {}
        self.namespace_names: list[str] = []
        self.note_namespaces = np.zeros(0, dtype=np.int32)
        self.built_rowid = 0
        self.rowids = np.zeros(0, dtype=Int)
        self.lengths = np.zeros(0, dtype=np.float32)
        self.status = np.zeros(0, dtype=np.int8)
        self.superseded = np.zeros(0, dtype=bool)
        self.kinds: list[str | None] = []
        self.offsets = np.zeros(1, dtype=Int)  # CSR offsets by term id (base segment)
        self.post_doc = np.zeros(0, dtype=np.int32)
        self.post_tf = np.zeros(0, dtype=np.float32)
        self.delta: dict[int, tuple[list[int], list[int]]] = {}
        self.delta_notes = 0
        self.tags: dict[str, list[int]] = {}
        # Per term of the base segment: its postings grouped by term frequency, each group
        # shortest note first (see _best_of_one_term); valid until the postings are rebuilt.
        self._impact_orders: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._mask_cache: dict[tuple[Scope, tuple[str, ...] | None], np.ndarray] = {}
        # Per cached mask: note count, total length and document frequencies seen so far
        # (cleared with the masks on any change, so always exact).
        self._stats_cache: dict[int, tuple[int, float, dict[str, int]]] = {}

    # -- building and updating -------------------------------------------------------------

    @property
    def size(self) -> int:
        return int(self.rowids.shape[0])

    def _term_ids(self, text: str) -> list[int]:
        vocabulary = self.vocabulary
        ids = []
        for term in index_terms(text):
            term_id = vocabulary.get(term)
            if term_id is None:
                term_id = vocabulary[term] = len(vocabulary)
            ids.append(term_id)
        return ids

    def build(self, rows: Iterable[sqlite3.Row], built_rowid: int) -> None:
        """(Re)build from every note of the bank: rowid, body, status, superseded, kind, tags."""
        rowids: list[int] = []
        lengths: list[int] = []
        statuses: list[int] = []
        superseded: list[bool] = []
        kinds: list[str | None] = []
        tokens: list[list[int]] = []
        tags: dict[str, list[int]] = {}
        spaces: list[int] = []
        for doc, row in enumerate(rows):
            ids = self._term_ids(row["body"])
            spaces.append(self._namespace_code(row["namespace"]))
            rowids.append(int(row["rowid"]))
            lengths.append(len(ids))
            statuses.append(STATUS_CODES.get(row["status"], 0))
            superseded.append(bool(row["superseded"]))
            kinds.append(row["kind"])
            tokens.append(ids)
            for tag in _tags(row["tags_json"]):
                tags.setdefault(tag, []).append(doc)
        self.rowids = np.asarray(rowids, dtype=Int)
        self.lengths = np.asarray(lengths, dtype=np.float32)
        self.status = np.asarray(statuses, dtype=np.int8)
        self.superseded = np.asarray(superseded, dtype=bool)
        self.note_namespaces = np.asarray(spaces, dtype=np.int32)
        self.kinds = kinds
        self.tags = tags
        self.delta, self.delta_notes = {}, 0
        self._set_postings(tokens)
        self.built_rowid = built_rowid
        self._clear_caches()

    def _namespace_code(self, namespace: str) -> int:
        code = self.namespace_codes.get(namespace)
        if code is None:
            code = self.namespace_codes[namespace] = len(self.namespace_codes)
            self.namespace_names.append(namespace)
        return code

    def _set_postings(self, tokens: Sequence[Sequence[int]]) -> None:
        vocabulary_size = max(1, len(self.vocabulary))
        flat = np.fromiter(
            (term for ids in tokens for term in ids), dtype=Int, count=sum(map(len, tokens))
        )
        docs = np.repeat(np.arange(len(tokens), dtype=Int), [len(ids) for ids in tokens])
        self._set_from_pairs(docs, flat, np.ones(flat.shape[0], dtype=np.float32),
                             vocabulary_size)

    def _set_from_pairs(
        self, docs: np.ndarray, terms: np.ndarray, tfs: np.ndarray, vocabulary_size: int
    ) -> None:
        """Postings from (doc, term, tf) triples (repeats summed), grouped by term then doc."""
        keys = terms * np.int64(1 << 32) + docs
        unique, inverse = np.unique(keys, return_inverse=True)
        summed = np.bincount(inverse, weights=tfs, minlength=unique.shape[0])
        term_of = unique >> 32
        self.post_doc = (unique & 0xFFFFFFFF).astype(np.int32)
        self.post_tf = summed.astype(np.float32)
        self._impact_orders = {}
        self.offsets = np.searchsorted(term_of, np.arange(vocabulary_size + 1, dtype=Int))

    def append(self, row: sqlite3.Row) -> None:
        """Add one note inserted after the build (into the delta segment)."""
        doc = self.size
        ids = self._term_ids(row["body"])
        counts: dict[int, int] = {}
        for term_id in ids:
            counts[term_id] = counts.get(term_id, 0) + 1
        for term_id, tf in counts.items():
            docs, tfs = self.delta.setdefault(term_id, ([], []))
            docs.append(doc)
            tfs.append(tf)
        self.rowids = np.append(self.rowids, int(row["rowid"]))
        self.lengths = np.append(self.lengths, np.float32(len(ids)))
        self.status = np.append(self.status, np.int8(STATUS_CODES.get(row["status"], 0)))
        self.superseded = np.append(self.superseded, bool(row["superseded"]))
        self.note_namespaces = np.append(
            self.note_namespaces, np.int32(self._namespace_code(row["namespace"]))
        )
        self.kinds.append(row["kind"])
        for tag in _tags(row["tags_json"]):
            self.tags.setdefault(tag, []).append(doc)
        self.delta_notes += 1
        self._clear_caches()
        if self.delta_notes >= max(MERGE_AT_NOTES, self.size // 10):
            self.merge_delta()

    def merge_delta(self) -> None:
        """Fold the delta segment into the postings arrays."""
        if not self.delta:
            return
        base_terms = np.repeat(
            np.arange(self.offsets.shape[0] - 1, dtype=Int), np.diff(self.offsets)
        )
        extra_terms = [t for t, (docs, _) in self.delta.items() for _ in docs]
        extra_docs = [d for docs, _ in self.delta.values() for d in docs]
        extra_tfs = [f for _, tfs in self.delta.values() for f in tfs]
        self._set_from_pairs(
            np.concatenate([self.post_doc.astype(Int), np.asarray(extra_docs, dtype=Int)]),
            np.concatenate([base_terms, np.asarray(extra_terms, dtype=Int)]),
            np.concatenate([self.post_tf, np.asarray(extra_tfs, dtype=np.float32)]),
            max(1, len(self.vocabulary)),
        )
        self.delta, self.delta_notes = {}, 0

    def set_state(self, rowid: int, status: str | None, superseded: bool) -> None:
        """A note's status or supersession changed (``status`` None: the note is gone)."""
        doc = self.doc_of(rowid)
        if doc is None:
            return
        self.status[doc] = -1 if status is None else STATUS_CODES.get(status, 0)
        self.superseded[doc] = superseded
        self._clear_caches()

    def namespace_of(self, doc: int) -> str:
        if self.namespace != WORKSPACE:
            return self.namespace
        return self.namespace_names[int(self.note_namespaces[doc])]

    def has_base_postings(self, term: str) -> bool:
        term_id = self.vocabulary.get(term)
        return term_id is not None and term_id + 1 < self.offsets.shape[0] and bool(
            self.offsets[term_id + 1] > self.offsets[term_id])

    def doc_of(self, rowid: int) -> int | None:
        doc = int(np.searchsorted(self.rowids, rowid))
        return doc if doc < self.size and int(self.rowids[doc]) == rowid else None

    # -- searching -------------------------------------------------------------------------

    def impact_order(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The base postings of ``term`` ordered by term frequency (descending), then note
        length (ascending), then newest first; and where each frequency group starts.

        Within one frequency, BM25 only falls as a note gets longer, whatever the statistics,
        so the best notes of a group are at its start: a one-term search reads a few per group
        instead of scoring every posting."""
        term_id = self.vocabulary[term]
        start, end = int(self.offsets[term_id]), int(self.offsets[term_id + 1])
        docs, tfs = self.post_doc[start:end], self.post_tf[start:end]
        cached = self._impact_orders.get(term_id)
        if cached is None:
            order = np.lexsort((-self.rowids[docs], self.lengths[docs], -tfs))
            sorted_tfs = tfs[order]
            starts = np.flatnonzero(np.r_[True, sorted_tfs[1:] != sorted_tfs[:-1]])
            cached = self._impact_orders[term_id] = (order, starts)
        order, starts = cached
        return docs[order], tfs[order], starts, np.r_[starts[1:], order.shape[0]]

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Note numbers (ascending) and term frequencies of ``term`` in this bank."""
        term_id = self.vocabulary.get(term)
        if term_id is None:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        if term_id + 1 < self.offsets.shape[0]:
            start, end = int(self.offsets[term_id]), int(self.offsets[term_id + 1])
            docs, tfs = self.post_doc[start:end], self.post_tf[start:end]
        else:
            docs, tfs = self.post_doc[:0], self.post_tf[:0]
        extra = self.delta.get(term_id)
        if extra:
            docs = np.concatenate([docs, np.asarray(extra[0], dtype=np.int32)])
            tfs = np.concatenate([tfs, np.asarray(extra[1], dtype=np.float32)])
        return docs, tfs

    def mask(
        self,
        scope: Scope,
        tags: Sequence[Sequence[str]] = (),
        namespaces: Sequence[str] | None = None,
    ) -> np.ndarray:
        """Which notes the search may return (and which the statistics count): ``tags`` is a
        list of groups, each met by any one of its tags; in the workspace index,
        ``namespaces`` keeps only the notes of those namespaces."""
        key = (scope, tuple(namespaces) if namespaces is not None else None)
        base = self._mask_cache.get(key)
        if base is None:
            base = np.isin(self.status, scope.statuses)
            if not scope.include_superseded:
                base &= ~self.superseded
            if scope.kind is not None:
                base &= np.fromiter((k == scope.kind for k in self.kinds), bool, self.size)
            if namespaces is not None:
                codes = [self.namespace_codes[n] for n in namespaces if n in self.namespace_codes]
                base &= np.isin(self.note_namespaces, np.asarray(codes, dtype=np.int32))
            self._mask_cache[key] = base
        if not tags:
            return base
        result = base.copy()
        for group in tags:
            having = np.zeros(self.size, dtype=bool)
            for tag in group:
                having[np.asarray(self.tags.get(tag, []), dtype=Int)] = True
            result &= having
        return result

    def _clear_caches(self) -> None:
        self._mask_cache.clear()
        self._stats_cache.clear()

    def stats(self, terms: Sequence[str], mask: np.ndarray) -> Stats:
        """Statistics of the notes in ``mask`` for ``terms`` (cached per scope mask until the
        bank changes)."""
        cached = self._stats_cache.get(id(mask)) if any(
            m is mask for m in self._mask_cache.values()) else None
        if cached is None:
            cached = (int(np.count_nonzero(mask)), float(self.lengths[mask].sum()), {})
            if any(m is mask for m in self._mask_cache.values()):
                self._stats_cache[id(mask)] = cached
        notes, length, known = cached
        df = {}
        for term in terms:
            count = known.get(term)
            if count is None:
                docs, _ = self.postings(term)
                count = known[term] = int(np.count_nonzero(mask[docs])) if docs.shape[0] else 0
            df[term] = count
        return Stats(notes, length, df)


@dataclass
class _Query:
    terms: tuple[str, ...]
    require_all: bool
    limit: int
    guard: bool
    echo_text: str | None


def _contribution(
    bank: BankIndex, docs: np.ndarray, tfs: np.ndarray, weight: float, average: float
) -> np.ndarray:
    """One term's BM25 contribution at each of its postings (float32)."""
    norms = np.float32(BM25_K1 * (1 - BM25_B)) + np.float32(BM25_K1 * BM25_B / average) * (
        bank.lengths[docs])
    return np.float32(weight * (BM25_K1 + 1)) * tfs / (tfs + norms)


def _score_bank(
    bank: BankIndex, mask: np.ndarray, stats: Stats, query: _Query
) -> list[Ranked]:
    """Exact BM25 of the admitted notes of one bank under ``stats``; the best ``limit``
    (plus headroom for echo demotion), with the terms each matched.

    The cost is the postings of the query's own terms: every word required, the shortest list
    is intersected with the others (binary search); any word, the contributions accumulate in a
    dense array over the bank's notes.
    """
    if not stats.notes:
        return []
    average = stats.average_length
    weights = {t: idf(stats.df.get(t, 0), stats.notes) for t in query.terms}
    if len(query.terms) == 1 and bank.has_base_postings(query.terms[0]):
        if query.guard and query.terms[0] in weak_terms(stats.df, stats.notes):
            return []
        return _best_of_one_term(bank, mask, query, weights[query.terms[0]], average)
    lists = {term: bank.postings(term) for term in query.terms}
    shortest = min((docs.shape[0] for docs, _ in lists.values()), default=0)
    if query.require_all and len(lists) > 1 and shortest > bank.size // 16:
        # Every list is long: walk the shortest one best-first, stop when nothing left can
        # reach the current best (see _walk_every_word).
        candidates, scores = _walk_every_word(bank, mask, query, lists, weights, average)
    elif query.require_all:
        if shortest == 0:
            return []
        order_terms = sorted(query.terms, key=lambda t: lists[t][0].shape[0])
        candidates = lists[order_terms[0]][0]
        candidates = candidates[mask[candidates]]
        for term in order_terms[1:]:
            docs = lists[term][0]
            where = np.minimum(np.searchsorted(docs, candidates), docs.shape[0] - 1)
            candidates = candidates[docs[where] == candidates]
            if candidates.shape[0] == 0:
                return []
        scores = np.zeros(candidates.shape[0], dtype=np.float32)
        for term in query.terms:
            docs, tfs = lists[term]
            where = np.searchsorted(docs, candidates)
            scores += _contribution(bank, candidates, tfs[where], weights[term], average)
    else:
        weak = weak_terms(stats.df, stats.notes) if query.guard else frozenset()
        strong_postings = sum(docs.shape[0] for t, (docs, _) in lists.items() if t not in weak)
        if query.guard and strong_postings <= bank.size // 16:
            # Only notes holding a strong term are admitted: score just those, looking the
            # weak terms up by binary search instead of walking their long lists.
            strong_docs = [docs for t, (docs, _) in lists.items() if t not in weak]
            candidates = np.unique(np.concatenate(strong_docs)) if strong_docs else (
                np.zeros(0, dtype=np.int32))
            candidates = candidates[mask[candidates]]
            scores = np.zeros(candidates.shape[0], dtype=np.float32)
            for term, (docs, tfs) in lists.items():
                if docs.shape[0] == 0 or candidates.shape[0] == 0:
                    continue
                where = np.minimum(np.searchsorted(docs, candidates), docs.shape[0] - 1)
                has = docs[where] == candidates
                tf = np.where(has, tfs[where], np.float32(0))
                scores += np.where(
                    has, _contribution(bank, candidates, tf, weights[term], average), 0)
        else:
            dense = np.zeros(bank.size, dtype=np.float32)
            strong = np.zeros(bank.size, dtype=bool) if query.guard else None
            for term, (docs, tfs) in lists.items():
                if docs.shape[0] == 0:
                    continue
                np.add.at(dense, docs, _contribution(bank, docs, tfs, weights[term], average))
                if strong is not None and term not in weak:
                    strong[docs] = True
            allowed = mask & (dense > 0)
            if strong is not None:
                allowed &= strong
            candidates = np.flatnonzero(allowed)
            scores = dense[candidates]
    if candidates.shape[0] == 0:
        return []
    want = query.limit + (ECHO_HEADROOM if query.echo_text is not None else 0)
    if candidates.shape[0] > want:
        # Everything scoring at least the want-th best (ties included), then cut below.
        kth = np.partition(scores, candidates.shape[0] - want)[candidates.shape[0] - want]
        keep = scores >= kth
        candidates, scores = candidates[keep], scores[keep]
    rowids = bank.rowids[candidates]
    # Best score first; among equal scores the newest note (largest rowid) first.
    best = np.lexsort((-rowids, -scores))[:want]
    ranked = []
    for position in best:
        doc = int(candidates[position])
        matched = []
        for term in query.terms:
            docs = lists[term][0]
            if docs.shape[0]:
                at = int(np.searchsorted(docs, doc))
                if at < docs.shape[0] and int(docs[at]) == doc:
                    matched.append(term)
        ranked.append(Ranked(int(rowids[position]), bank.namespace_of(doc),
                             float(scores[position]), tuple(matched)))
    return ranked


WALK_BLOCK = 1024


def _walk_every_word(
    bank: BankIndex,
    mask: np.ndarray,
    query: _Query,
    lists: Mapping[str, tuple[np.ndarray, np.ndarray]],
    weights: Mapping[str, float],
    average: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Candidates and exact scores that contain the best notes holding every term, when every
    posting list is long (a threshold walk).

    Every answer holds the shortest list's term, so that list's postings are walked in
    impact order: per term frequency, shortest note first (:meth:`BankIndex.impact_order`).
    Each block looks the other terms up by binary search. A note later in a group is at least
    as long as the block's first, so no unseen note of the group can score more than that
    frequency's contribution at that length plus every other term's largest contribution at
    that length; once this bound falls below the current ``want``-th best score the group is
    done. The delta segment's postings are scored in full (they are few).
    """
    want = query.limit + (ECHO_HEADROOM if query.echo_text is not None else 0)
    walk = min(query.terms, key=lambda t: lists[t][0].shape[0])
    others = [t for t in query.terms if t != walk]
    tf_max = {t: float(lists[t][1].max()) for t in others}
    pool_docs: list[np.ndarray] = []
    pool_scores: list[np.ndarray] = []
    kth = -np.inf

    def score(docs: np.ndarray, tfs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        total = _contribution(bank, docs, tfs, weights[walk], average)
        keep = np.ones(docs.shape[0], dtype=bool)
        for term in others:
            term_docs, term_tfs = lists[term]
            where = np.minimum(np.searchsorted(term_docs, docs), term_docs.shape[0] - 1)
            has = term_docs[where] == docs
            keep &= has
            total = total + _contribution(bank, docs, np.where(has, term_tfs[where], 1),
                                          weights[term], average)
        return docs[keep], total[keep]

    def add(docs: np.ndarray, scores: np.ndarray) -> float:
        pool_docs.append(docs)
        pool_scores.append(scores)
        everything = np.concatenate(pool_scores)
        if everything.shape[0] < want:
            return -np.inf
        return float(np.partition(everything, everything.shape[0] - want)[
            everything.shape[0] - want])

    if bank.has_base_postings(walk):
        docs, tfs, starts, ends = bank.impact_order(walk)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            frequency = tfs[start]
            for block in range(start, end, WALK_BLOCK):
                first = docs[block:block + 1]
                bound = float(_contribution(bank, first, tfs[block:block + 1],
                                            weights[walk], average)[0])
                bound += sum(
                    float(_contribution(bank, first, np.asarray([tf_max[t]], dtype=np.float32),
                                        weights[t], average)[0])
                    for t in others
                )
                if bound < kth:
                    break
                chunk = docs[block:min(end, block + WALK_BLOCK)]
                chunk = chunk[mask[chunk]]
                if chunk.shape[0]:
                    found, found_scores = score(chunk, np.full(chunk.shape[0], frequency,
                                                               dtype=np.float32))
                    if found.shape[0]:
                        kth = max(kth, add(found, found_scores))
    extra = bank.delta.get(bank.vocabulary[walk])
    if extra:
        delta_docs = np.asarray(extra[0], dtype=np.int32)
        keep = mask[delta_docs]
        found, found_scores = score(delta_docs[keep],
                                    np.asarray(extra[1], dtype=np.float32)[keep])
        add(found, found_scores)
    if not pool_docs:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
    return np.concatenate(pool_docs), np.concatenate(pool_scores)


def _best_of_one_term(
    bank: BankIndex, mask: np.ndarray, query: _Query, weight: float, average: float
) -> list[Ranked]:
    """Exact top notes for a one-term query without scoring every posting: the first
    ``want`` admitted notes of each term-frequency group (see :meth:`BankIndex.impact_order`)
    plus the delta segment's postings, scored exactly, then cut."""
    term = query.terms[0]
    want = query.limit + (ECHO_HEADROOM if query.echo_text is not None else 0)
    docs, tfs, starts, ends = bank.impact_order(term)
    picked_docs: list[np.ndarray] = []
    picked_tfs: list[np.ndarray] = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        window = want * 4
        while True:
            group = docs[start:min(end, start + window)]
            admitted = group[mask[group]][:want]
            if admitted.shape[0] == want or start + window >= end:
                break
            window *= 4
        picked_docs.append(admitted)
        picked_tfs.append(np.full(admitted.shape[0], tfs[start], dtype=np.float32))
    term_id = bank.vocabulary[term]
    extra = bank.delta.get(term_id)
    if extra:
        extra_docs = np.asarray(extra[0], dtype=np.int32)
        keep = mask[extra_docs]
        picked_docs.append(extra_docs[keep])
        picked_tfs.append(np.asarray(extra[1], dtype=np.float32)[keep])
    candidates = np.concatenate(picked_docs) if picked_docs else np.zeros(0, np.int32)
    if candidates.shape[0] == 0:
        return []
    scores = _contribution(bank, candidates, np.concatenate(picked_tfs), weight, average)
    rowids = bank.rowids[candidates]
    best = np.lexsort((-rowids, -scores))[:want]
    return [Ranked(int(rowids[i]), bank.namespace_of(int(candidates[i])), float(scores[i]),
                   (term,)) for i in best]


def order(ranked: Iterable[Ranked]) -> list[Ranked]:
    """Best score first; ties go to the newest note (larger rowid)."""
    return sorted(ranked, key=lambda r: (-r.score, -r.rowid))


def demote_echoes(
    ranked: Sequence[Ranked], terms: Sequence[str], texts: dict[int, str]
) -> list[Ranked]:
    """Multiply the score of notes that repeat the question (see
    :func:`store.search_policy.is_question_echo`) by the echo penalty, then re-order."""
    out = []
    for item in ranked:
        if is_question_echo(terms, item.matched, texts.get(item.rowid, "")):
            item = Ranked(item.rowid, item.namespace, item.score * ECHO_PENALTY, item.matched,
                          echo=True)
        out.append(item)
    return order(out)


class TermIndex:
    """Per-bank indexes of one database, refreshed from its tail before every search."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self.banks: dict[str, BankIndex] = {}
        self.seen_rowid = 0
        self.seen_change = 0

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Apply new notes and liveness changes committed since the last call."""
        max_rowid, max_change = conn.execute(sql.TAIL_MARKS).fetchone()
        max_rowid, max_change = int(max_rowid or 0), int(max_change or 0)
        if max_rowid > self.seen_rowid:
            if self.banks:
                for row in conn.execute(sql.NOTES_AFTER, {"after": self.seen_rowid}):
                    for name in (row["namespace"], WORKSPACE):
                        bank = self.banks.get(name)
                        if bank is not None and int(row["rowid"]) > bank.built_rowid:
                            bank.append(row)
            self.seen_rowid = max_rowid
        if max_change > self.seen_change:
            if self.banks:
                for row in conn.execute(sql.CHANGED_NOTES, {"after": self.seen_change}):
                    rowid = int(row["note_rowid"])
                    if row["namespace"] is None:  # deleted: find it in whichever bank has it
                        for bank in self.banks.values():
                            bank.set_state(rowid, None, False)
                        continue
                    for name in (row["namespace"], WORKSPACE):
                        bank = self.banks.get(name)
                        if bank is not None:
                            bank.set_state(rowid, row["status"], bool(row["superseded"]))
            self.seen_change = max_change

    def bank(self, conn: sqlite3.Connection, namespace: str) -> BankIndex:
        """The index of one bank, built on first use (after :meth:`refresh`)."""
        bank = self.banks.get(namespace)
        if bank is None:
            bank = BankIndex(namespace, self.vocabulary)
            if namespace == WORKSPACE:
                rows = conn.execute(sql.ALL_NOTES)
            else:
                rows = conn.execute(sql.BANK_NOTES, {"namespace": namespace})
            bank.build(rows, self.seen_rowid)
            # Notes committed between the refresh and this read are already in the build.
            self.banks[namespace] = bank
        return bank

    def search(
        self,
        conn: sqlite3.Connection,
        namespaces: Sequence[str] | None,
        terms: Sequence[str],
        *,
        limit: int,
        require_all: bool,
        scope: Scope = LIVE,
        tags: Mapping[str, Sequence[Sequence[str]]] | None = None,
        per_bank_stats: bool = False,
        guard: bool = False,
        echo_text: str | None = None,
        namespace_range: tuple[str, str] | None = None,
    ) -> list[Ranked]:
        """The best ``limit`` notes of ``namespaces`` (None: every namespace, or those in
        ``namespace_range`` ``[low, high)``) for ``terms`` by exact BM25.

        ``require_all``: a note must hold every term (note search), else any term (recall).
        Statistics are those of the notes ``scope`` admits: pooled over all ``namespaces``, or
        each bank's own with ``per_bank_stats`` (recall over several banks). ``tags`` maps a
        namespace to its tag scope (groups, each met by any one tag). ``guard`` refuses
        notes matched only by weak terms; ``echo_text`` (the question) demotes echoes.
        """
        self.refresh(conn)
        query = _Query(tuple(dict.fromkeys(terms)), require_all, limit, guard, echo_text)
        wanted = None if namespaces is None else list(dict.fromkeys(namespaces))
        if wanted is None or (len(wanted) > 1 and not per_bank_stats):
            # Pooled statistics over several banks: one pass over the workspace index.
            workspace = self.bank(conn, WORKSPACE)
            if wanted is None and namespace_range is not None:
                low, high = namespace_range
                wanted = [n for n in workspace.namespace_names if low <= n < high]
            banks = [workspace]
            masks = [workspace.mask(scope, (), wanted)]
        else:
            banks = [self.bank(conn, ns) for ns in wanted]
            masks = [bank.mask(scope, (tags or {}).get(bank.namespace, ())) for bank in banks]
        per_bank = [bank.stats(query.terms, mask) for bank, mask in zip(banks, masks,
                                                                         strict=True)]
        pooled = Stats()
        if not per_bank_stats:
            for stats in per_bank:
                pooled.add(stats)
        ranked: list[Ranked] = []
        for bank, mask, stats in zip(banks, masks, per_bank, strict=True):
            ranked += _score_bank(bank, mask, stats if per_bank_stats else pooled, query)
        ranked = order(ranked)
        if echo_text is not None:
            return ranked  # the caller demotes echoes once it has the texts, then cuts
        return ranked[:limit]


_INDEXES: weakref.WeakKeyDictionary[Database, TermIndex] = weakref.WeakKeyDictionary()


def index_for(db: Database) -> TermIndex:
    """The term index of this open database (one per :class:`Database` in a process)."""
    index = _INDEXES.get(db)
    if index is None:
        index = _INDEXES[db] = TermIndex()
    return index


def _tags(tags_json: str | None) -> list[str]:
    if not tags_json:
        return []
    value: Any = json.loads(tags_json)
    return [tag for tag in value if isinstance(tag, str)] if isinstance(value, list) else []


__all__ = [
    "LIVE",
    "STATUS_CODES",
    "BankIndex",
    "Ranked",
    "Scope",
    "TermIndex",
    "WORKSPACE",
    "demote_echoes",
    "index_for",
    "order",
]
