"""Exact BM25 over a bank's notes: an in-memory inverted index per bank, kept current from the
database's tail, and saved to a snapshot file that a fresh process maps instead of rebuilding.

Why not SQLite's ``bm25()``: FTS5 ranks with statistics over the whole table (every bank and
every status), and ranking a word that occurs in most of a million notes walks its whole
posting list before the first row comes back (tens of milliseconds). Here each bank has its
own postings (numpy arrays of note numbers and term frequencies, grouped by term), so a query
costs only the postings of its own terms, and the statistics (live note count, average length,
document frequencies) are those of the notes the search may return: by default a bank's live
notes (accepted, not superseded by an accepted note). Results equal exact BM25 over those notes
(``bench/bench_note_search.py`` checks against FTS5's ``bm25()`` and ``bm25s`` in the same run).

Each term's postings are kept twice: in note order (to look a note up by binary search, and
to count document frequencies), and in *impact order*: grouped by term frequency (highest
first), each group shortest note first, then newest first. Within one group BM25 only falls
along that order, whatever the statistics, which is what lets a search stop early (see
:mod:`store.search.term_ranking`).

Keeping current: every note of a bank (any status) has a number in its bank's index, with its
status and whether an accepted note supersedes it, so a decision only flips two small arrays.
Before each search the index reads the database's tail in the same hop: notes with a larger
rowid than any seen (notes are append-only) and the ``note_changes`` log written by triggers
(status decisions, new supersession edges). New notes land in a small delta segment, folded
into the arrays (a linear merge: the delta's notes are all newer) once it holds
``MERGE_AT_NOTES`` notes or ``1/MERGE_SHARE`` of the bank. A snapshot saves the delta as it
is (its own CSR arrays, "frozen" once read back), so saving never rewrites the base.

Cold start: a bank read from scratch costs about 3 s per 100k notes (SQLite reads and
tokenising). On a SQLite workspace the index is saved under ``<workspace>/index/`` after a
build and whenever enough notes or decisions arrived since (:mod:`store.search.term_snapshot`); a
fresh process maps that file, checks it against the database, and applies only the tail since.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from store.db.seam import Connection, RowLike
from store.search import snapshot_sql as snapshot_sql
from store.search import term_snapshot as snapshots
from store.search import term_sql as sql
from store.search.search_policy import INDEX_TERMS_VERSION, index_terms
from store.search.term_ranking import Query, Ranked, Stats, demote_echoes, order, score_bank
from store.search.term_snapshot import Snapshot, SnapshotRejected
from store.search.term_vocabulary import Vocabulary

if TYPE_CHECKING:
    from store.db.seam import Database

STATUS_CODES = {"pending": 0, "accepted": 1, "rejected": 2}
GONE = -1  # the status of a note that was deleted
# Merge the delta segment into the base arrays once it holds MERGE_AT_NOTES notes or
# 1/MERGE_SHARE of the bank: its postings are scored in full (the base's are read best-first),
# and snapshots save it unmerged, so this bound alone keeps it small.
MERGE_AT_NOTES = 2_000
MERGE_SHARE = 50
# In a bank of at least DENSE_MIN_NOTES, a term held by at least 1/DENSE_SHARE of its notes is
# looked up in a per-note array (one gather instead of a binary search per note scored); the
# DENSE_TERMS most recently used are kept (a byte per note each when frequencies fit).
DENSE_MIN_NOTES = 65_536
DENSE_SHARE = 8
DENSE_TERMS = 16

Int = np.int64
# The name of the one index holding every note of the workspace (searches over several banks
# with pooled statistics: all of them, or one namespace kind).
WORKSPACE = "*"
# Impact-order sort keys pack (term, tf, length) in 64 bits; lengths and tfs fit 16 bits
# (a note body is at most 64 KiB, so at most 32k terms).
_LOW16 = 0xFFFF


@dataclass(frozen=True)
class Scope:
    """Which notes a search may return: statuses (codes) and whether superseded ones count."""

    statuses: tuple[int, ...] = (STATUS_CODES["accepted"],)
    include_superseded: bool = False
    kind: str | None = None


LIVE = Scope()


class _Column:
    """A growable per-note array (room doubles), read as a view of its filled part."""

    def __init__(self, values: np.ndarray) -> None:
        self._data = values
        self._filled = int(values.shape[0])

    @property
    def values(self) -> np.ndarray:
        return self._data[: self._filled]

    def extend(self, more: np.ndarray) -> None:
        need = self._filled + int(more.shape[0])
        if need > self._data.shape[0] or not self._data.flags.writeable:
            grown = np.empty(max(need, self._filled * 2, 64), dtype=self._data.dtype)
            grown[: self._filled] = self._data[: self._filled]
            self._data = grown
        self._data[self._filled:need] = more
        self._filled = need


class _Names:
    """Names (namespaces, kinds, tags) numbered densely, looked up both ways."""

    def __init__(self, names: Iterable[Any] = ()) -> None:
        self.names: list[Any] = list(names)
        self.codes: dict[Any, int] = {name: code for code, name in enumerate(self.names)}

    def code(self, name: Any) -> int:
        found = self.codes.get(name)
        if found is None:
            found = self.codes[name] = len(self.names)
            self.names.append(name)
        return found


class BankIndex:
    """The postings and per-note arrays of one bank (namespace), or of the whole workspace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace  # WORKSPACE: every note, each with its namespace code
        self.vocabulary = Vocabulary()
        # Per note, in rowid order (a note's number is its position).
        self._rowids = _Column(np.zeros(0, dtype=Int))
        self._lengths = _Column(np.zeros(0, dtype=np.float32))
        self._spaces = _Column(np.zeros(0, dtype=np.int32))
        self._kinds = _Column(np.zeros(0, dtype=np.int16))
        self.status = np.zeros(0, dtype=np.int8)
        self.superseded = np.zeros(0, dtype=bool)
        self.space_names = _Names()
        self.kind_names = _Names([None])
        self.tag_names = _Names()
        self.tag_offsets = np.zeros(1, dtype=Int)  # CSR by tag code (base segment)
        self.tag_docs = np.zeros(0, dtype=np.int32)
        self.extra_tags: dict[int, list[int]] = {}
        # Base segment: postings by term number (CSR), in note order and in impact order.
        self.base_docs = 0  # notes [0, base_docs) are in the base segment
        self.offsets = np.zeros(1, dtype=Int)
        self.post_doc = np.zeros(0, dtype=np.int32)
        self.post_tf = np.zeros(0, dtype=np.float32)
        self.impact_doc = np.zeros(0, dtype=np.int32)
        self.run_offsets = np.zeros(1, dtype=Int)  # runs (one per term and tf) by term number
        self.run_start = np.zeros(1, dtype=Int)  # where each run starts in impact order
        self.run_tf = np.zeros(0, dtype=np.float32)
        # Delta segment: postings of notes added since the base was built, by term number:
        # those read from a snapshot (CSR, like the base), then those added since.
        self.frozen_offsets = np.zeros(1, dtype=Int)
        self.frozen_doc = np.zeros(0, dtype=np.int32)
        self.frozen_tf = np.zeros(0, dtype=np.float32)
        self.delta: dict[int, tuple[list[int], list[int]]] = {}
        # What the index reflects: notes up to this rowid, changes up to this log sequence.
        self.rowid_mark = 0
        self.change_mark = 0
        # Notes and decisions taken in since the last snapshot (or the build).
        self.tail = 0
        self._dense: dict[str, np.ndarray] = {}  # least recently used first
        self._mask_cache: dict[tuple[Scope, tuple[str, ...] | None], np.ndarray] = {}
        # Per cached mask: note count, total length and document frequencies seen so far
        # (cleared with the masks on any change, so always exact).
        self._stats_cache: dict[int, tuple[int, float, dict[str, int]]] = {}

    # -- per-note arrays -------------------------------------------------------------------

    @property
    def size(self) -> int:
        return int(self.status.shape[0])

    @property
    def rowids(self) -> np.ndarray:
        return self._rowids.values

    @property
    def lengths(self) -> np.ndarray:
        return self._lengths.values

    @property
    def delta_notes(self) -> int:
        return self.size - self.base_docs

    def namespace_of(self, doc: int) -> str:
        if self.namespace != WORKSPACE:
            return self.namespace
        return str(self.space_names.names[int(self._spaces.values[doc])])

    def doc_of(self, rowid: int) -> int | None:
        rowids = self.rowids
        doc = int(np.searchsorted(rowids, rowid))
        return doc if doc < rowids.shape[0] and int(rowids[doc]) == rowid else None

    # -- building and updating -------------------------------------------------------------

    def build(self, rows: Iterable[RowLike]) -> None:
        """Build from every note of the bank, in rowid order (rows of
        :data:`store.search.term_sql.BANK_NOTES`)."""
        self.append(rows)
        self.merge_delta()
        self.tail = 0

    def append(self, rows: Iterable[RowLike]) -> int:
        """Add notes inserted after the last one held (in rowid order; rows at or below
        :attr:`rowid_mark` are skipped) into the delta segment; returns how many."""
        first = self.size
        rowids: list[int] = []
        lengths: list[int] = []
        statuses: list[int] = []
        superseded: list[bool] = []
        spaces: list[int] = []
        kinds: list[int] = []
        texts: list[list[str]] = []
        mark = self.rowid_mark
        for row in rows:
            rowid = int(row["rowid"])
            if rowid <= mark:
                continue
            mark = rowid
            doc = first + len(rowids)
            terms = index_terms(row["body"])
            texts.append(terms)
            rowids.append(rowid)
            lengths.append(len(terms))
            statuses.append(STATUS_CODES.get(row["status"], 0))
            superseded.append(bool(row["superseded"]))
            spaces.append(self.space_names.code(row["namespace"]))
            kinds.append(self.kind_names.code(row["kind"]))
            for tag in _tags(row["tags_json"]):
                self.extra_tags.setdefault(self.tag_names.code(tag), []).append(doc)
        if not rowids:
            return 0
        flat = self.vocabulary.add_all([t for terms in texts for t in terms])
        delta = self.delta
        at = 0
        for offset, terms in enumerate(texts):
            counts: dict[int, int] = {}
            for term_id in flat[at:at + len(terms)]:
                counts[term_id] = counts.get(term_id, 0) + 1
            at += len(terms)
            for term_id, tf in counts.items():
                docs, tfs = delta.setdefault(term_id, ([], []))
                docs.append(first + offset)
                tfs.append(tf)
        self._rowids.extend(np.asarray(rowids, dtype=Int))
        self._lengths.extend(np.asarray(lengths, dtype=np.float32))
        self._spaces.extend(np.asarray(spaces, dtype=np.int32))
        self._kinds.extend(np.asarray(kinds, dtype=np.int16))
        self.status = np.concatenate([self.status, np.asarray(statuses, dtype=np.int8)])
        self.superseded = np.concatenate([self.superseded, np.asarray(superseded, dtype=bool)])
        self.rowid_mark = mark
        self.tail += len(rowids)
        self._dense.clear()
        self._clear_caches()
        if self.delta_notes >= max(MERGE_AT_NOTES, self.size // MERGE_SHARE):
            self.merge_delta()
        return len(rowids)

    def merge_delta(self) -> None:
        """Fold the delta segment into the base arrays.

        Every delta note is newer than every base note, so in note order a term's delta
        postings go after its base postings, and in impact order they go first among equal
        (tf, length): two sorted sequences merged, linear in the postings."""
        if self.delta_notes == 0:
            return
        vocabulary_size = len(self.vocabulary)
        d_terms, d_docs, d_tfs = self._delta_postings()
        base_counts = np.zeros(vocabulary_size, dtype=Int)
        base_counts[: self.offsets.shape[0] - 1] = np.diff(self.offsets)
        delta_counts = np.bincount(d_terms, minlength=vocabulary_size).astype(Int)
        delta_before = np.concatenate([[0], np.cumsum(delta_counts)[:-1]]).astype(Int)
        offsets = np.concatenate([[0], np.cumsum(base_counts + delta_counts)]).astype(Int)
        total = int(offsets[-1])
        base_terms = np.repeat(np.arange(vocabulary_size, dtype=Int), base_counts)
        # Note order: base postings shift by the delta postings of earlier terms.
        base_at = np.arange(base_terms.shape[0], dtype=Int) + delta_before[base_terms]
        delta_at = (offsets[d_terms] + base_counts[d_terms]
                    + np.arange(d_terms.shape[0], dtype=Int) - delta_before[d_terms])
        post_doc = np.empty(total, dtype=np.int32)
        post_tf = np.empty(total, dtype=np.float32)
        post_doc[base_at], post_doc[delta_at] = self.post_doc, d_docs
        post_tf[base_at], post_tf[delta_at] = self.post_tf, d_tfs
        # Impact order: (term, tf descending, length ascending, newest first).
        base_tf = np.repeat(self.run_tf, np.diff(self.run_start))
        base_keys = self._impact_keys(base_terms, base_tf, self.impact_doc)
        delta_keys = self._impact_keys(d_terms, d_tfs, d_docs)
        delta_order = np.lexsort((-d_docs, delta_keys))
        keys = np.concatenate([delta_keys[delta_order], base_keys])
        docs = np.concatenate([d_docs[delta_order], self.impact_doc])
        order = np.argsort(keys, kind="stable")  # two sorted runs: a merge
        keys, self.impact_doc = keys[order], docs[order]
        self.offsets, self.post_doc, self.post_tf = offsets, post_doc, post_tf
        self._set_runs(keys, vocabulary_size)
        self.frozen_offsets = np.zeros(1, dtype=Int)
        self.frozen_doc = np.zeros(0, dtype=np.int32)
        self.frozen_tf = np.zeros(0, dtype=np.float32)
        self.delta = {}
        self.base_docs = self.size
        self._merge_tags()
        self._clear_caches()

    def _delta_postings(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The delta segment's postings as (term, note, tf) arrays in term then note order."""
        items = sorted(self.delta.items())
        live_terms = np.repeat(np.asarray([t for t, _ in items], dtype=Int),
                               [len(docs) for _, (docs, _) in items])
        live_docs = np.fromiter((d for _, (docs, _) in items for d in docs), dtype=np.int32,
                                count=live_terms.shape[0])
        live_tfs = np.fromiter((f for _, (_, tfs) in items for f in tfs), dtype=np.float32,
                               count=live_terms.shape[0])
        if not self.frozen_doc.shape[0]:
            return live_terms, live_docs, live_tfs
        frozen_terms = np.repeat(np.arange(self.frozen_offsets.shape[0] - 1, dtype=Int),
                                 np.diff(self.frozen_offsets))
        terms = np.concatenate([frozen_terms, live_terms])
        # Two runs sorted by term; within a term the frozen notes are the older ones.
        order = np.argsort(terms, kind="stable")
        return (terms[order], np.concatenate([self.frozen_doc, live_docs])[order],
                np.concatenate([self.frozen_tf, live_tfs])[order])

    def _impact_keys(self, terms: np.ndarray, tfs: np.ndarray, docs: np.ndarray) -> np.ndarray:
        lengths = np.minimum(self.lengths[docs], _LOW16).astype(Int)
        return (terms << 32) | ((_LOW16 - np.minimum(tfs, _LOW16).astype(Int)) << 16) | lengths

    def _set_runs(self, keys: np.ndarray, vocabulary_size: int) -> None:
        heads = keys >> 16
        starts = np.flatnonzero(np.r_[True, heads[1:] != heads[:-1]]) if keys.shape[0] else (
            np.zeros(0, dtype=Int))
        self.run_start = np.concatenate([starts, [keys.shape[0]]]).astype(Int)
        self.run_tf = (_LOW16 - (heads[starts] & _LOW16)).astype(np.float32)
        self.run_offsets = np.searchsorted(
            heads[starts] >> 16, np.arange(vocabulary_size + 1, dtype=Int)).astype(Int)

    def _merge_tags(self) -> None:
        if not self.extra_tags:
            return
        count = len(self.tag_names.names)
        base_counts = np.zeros(count, dtype=Int)
        base_counts[: self.tag_offsets.shape[0] - 1] = np.diff(self.tag_offsets)
        codes = np.concatenate([
            np.repeat(np.arange(count, dtype=Int), base_counts),
            np.asarray([c for c, docs in self.extra_tags.items() for _ in docs], dtype=Int),
        ])
        docs = np.concatenate([
            self.tag_docs,
            np.asarray([d for docs in self.extra_tags.values() for d in docs], dtype=np.int32),
        ])
        order = np.lexsort((docs, codes))
        self.tag_docs = docs[order]
        self.tag_offsets = np.concatenate(
            [[0], np.cumsum(np.bincount(codes, minlength=count))]).astype(Int)
        self.extra_tags = {}

    def set_state(self, rowid: int, status: str | None, superseded: bool) -> None:
        """A note's status or supersession changed (``status`` None: the note is gone)."""
        doc = self.doc_of(rowid)
        if doc is None:
            return
        self.status[doc] = GONE if status is None else STATUS_CODES.get(status, 0)
        self.superseded[doc] = superseded
        self.tail += 1
        self._clear_caches()

    # -- snapshots -------------------------------------------------------------------------

    def snapshot_parts(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """What a snapshot stores: header fields and arrays (the delta segment as it is: a
        merge rewrites the base, a snapshot only copies it)."""
        self._merge_tags()
        d_terms, d_docs, d_tfs = self._delta_postings()
        d_offsets = np.searchsorted(d_terms, np.arange(len(self.vocabulary) + 1, dtype=Int))
        sorted_terms, sorted_ids, long_terms = self.vocabulary.to_snapshot()
        meta = {
            "namespace": self.namespace,
            "terms_version": INDEX_TERMS_VERSION,
            "rowid_mark": self.rowid_mark,
            "change_mark": self.change_mark,
            "base_docs": self.base_docs,
            "vocabulary_size": len(self.vocabulary),
            "long_terms": long_terms,
            "space_names": self.space_names.names,
            "kind_names": self.kind_names.names,
            "tag_names": self.tag_names.names,
        }
        arrays = {
            "rowids": self.rowids, "lengths": self.lengths, "status": self.status,
            "superseded": self.superseded, "spaces": self._spaces.values,
            "kinds": self._kinds.values, "tag_offsets": self.tag_offsets,
            "tag_docs": self.tag_docs, "offsets": self.offsets, "post_doc": self.post_doc,
            "post_tf": self.post_tf, "impact_doc": self.impact_doc,
            "run_offsets": self.run_offsets, "run_start": self.run_start,
            "run_tf": self.run_tf, "vocab_sorted": sorted_terms, "vocab_ids": sorted_ids,
            "delta_offsets": d_offsets.astype(Int), "delta_doc": d_docs, "delta_tf": d_tfs,
        }
        return meta, arrays

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> BankIndex:
        """A bank over a mapped snapshot's arrays (the mutable ones copied).

        Raises:
            SnapshotRejected: the arrays do not fit together.
        """
        meta, arrays = snapshot.meta, snapshot.arrays
        try:
            bank = cls(str(meta["namespace"]))
            _check_arrays(meta, arrays)
            bank.vocabulary = Vocabulary.from_snapshot(
                arrays["vocab_sorted"], arrays["vocab_ids"],
                {str(k): int(v) for k, v in meta["long_terms"].items()})
            bank._rowids = _Column(arrays["rowids"])
            bank._lengths = _Column(arrays["lengths"])
            bank._spaces = _Column(arrays["spaces"])
            bank._kinds = _Column(arrays["kinds"])
            bank.status = arrays["status"].copy()
            bank.superseded = arrays["superseded"].copy()
            bank.space_names = _Names(str(n) for n in meta["space_names"])
            bank.kind_names = _Names(meta["kind_names"])
            bank.tag_names = _Names(str(n) for n in meta["tag_names"])
            for name in ("tag_offsets", "tag_docs", "offsets", "post_doc", "post_tf",
                         "impact_doc", "run_offsets", "run_start", "run_tf"):
                setattr(bank, name, arrays[name])
            bank.frozen_offsets = arrays["delta_offsets"]
            bank.frozen_doc = arrays["delta_doc"]
            bank.frozen_tf = arrays["delta_tf"]
            bank.base_docs = int(meta["base_docs"])
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise SnapshotRejected("its arrays do not fit together") from error
        bank.rowid_mark = int(meta["rowid_mark"])
        bank.change_mark = int(meta["change_mark"])
        return bank

    # -- reading ---------------------------------------------------------------------------

    def term_id(self, term: str) -> int | None:
        return self.vocabulary.get(term)

    def has_base_postings(self, term: str) -> bool:
        term_id = self.vocabulary.get(term)
        return term_id is not None and term_id + 1 < self.offsets.shape[0] and bool(
            self.offsets[term_id + 1] > self.offsets[term_id])

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
        parts_docs, parts_tfs = [docs], [tfs]
        if term_id + 1 < self.frozen_offsets.shape[0]:
            start, end = int(self.frozen_offsets[term_id]), int(self.frozen_offsets[term_id + 1])
            if end > start:
                parts_docs.append(self.frozen_doc[start:end])
                parts_tfs.append(self.frozen_tf[start:end])
        extra = self.delta.get(term_id)
        if extra:
            parts_docs.append(np.asarray(extra[0], dtype=np.int32))
            parts_tfs.append(np.asarray(extra[1], dtype=np.float32))
        if len(parts_docs) == 1:
            return docs, tfs
        return np.concatenate(parts_docs), np.concatenate(parts_tfs)

    def dense_tf(self, term: str, docs: np.ndarray, tfs: np.ndarray) -> np.ndarray | None:
        """``term``'s frequency in every note (0: absent) when it is common in a big bank
        (``docs``/``tfs``: its postings), else None."""
        if self.size < DENSE_MIN_NOTES or docs.shape[0] < self.size // DENSE_SHARE:
            return None
        found = self._dense.pop(term, None)
        if found is None:
            small = bool(tfs.max() <= np.iinfo(np.uint8).max)
            found = np.zeros(self.size, dtype=np.uint8 if small else np.float32)
            found[docs] = tfs
        self._dense[term] = found
        while len(self._dense) > DENSE_TERMS:
            del self._dense[next(iter(self._dense))]
        return found

    def runs(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The base postings of ``term`` in impact order (see :mod:`store.search.term_ranking`), the
        ``[start, end)`` of each run (one term frequency) in them, and each run's frequency."""
        term_id = self.vocabulary.get(term)
        if term_id is None or term_id + 1 >= self.run_offsets.shape[0]:
            return (np.zeros(0, dtype=np.int32), np.zeros((0, 2), dtype=Int),
                    np.zeros(0, dtype=np.float32))
        first, last = int(self.run_offsets[term_id]), int(self.run_offsets[term_id + 1])
        start, end = int(self.offsets[term_id]), int(self.offsets[term_id + 1])
        edges = self.run_start[first:last + 1] - start
        return (self.impact_doc[start:end], np.stack([edges[:-1], edges[1:]], axis=1),
                self.run_tf[first:last])

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
            base = np.isin(self.status, np.asarray(scope.statuses, dtype=np.int8))
            if not scope.include_superseded:
                base &= ~self.superseded
            if scope.kind is not None:
                code = self.kind_names.codes.get(scope.kind)
                base &= self._kinds.values == (-1 if code is None else code)
            if namespaces is not None:
                wanted = np.zeros(len(self.space_names.names) + 1, dtype=bool)
                for name in namespaces:
                    code = self.space_names.codes.get(name)
                    if code is not None:
                        wanted[code] = True
                base &= wanted[self._spaces.values]
            self._mask_cache[key] = base
        if not tags:
            return base
        result = base.copy()
        for group in tags:
            having = np.zeros(self.size, dtype=bool)
            for tag in group:
                having[self.tag_docs_of(tag)] = True
            result &= having
        return result

    def tag_docs_of(self, tag: str) -> np.ndarray:
        """The notes carrying ``tag``."""
        code = self.tag_names.codes.get(tag)
        if code is None:
            return np.zeros(0, dtype=np.int32)
        docs = self.tag_docs[self.tag_offsets[code]:self.tag_offsets[code + 1]] if (
            code + 1 < self.tag_offsets.shape[0]) else self.tag_docs[:0]
        extra = self.extra_tags.get(code)
        if extra:
            docs = np.concatenate([docs, np.asarray(extra, dtype=np.int32)])
        return docs

    def _clear_caches(self) -> None:
        self._mask_cache.clear()
        self._stats_cache.clear()

    def stats(self, terms: Sequence[str], mask: np.ndarray) -> Stats:
        """Statistics of the notes in ``mask`` for ``terms`` (cached per scope mask until the
        bank changes)."""
        cached_mask = any(m is mask for m in self._mask_cache.values())
        cached = self._stats_cache.get(id(mask)) if cached_mask else None
        if cached is None:
            cached = (int(np.count_nonzero(mask)), float(self.lengths[mask].sum()), {})
            if cached_mask:
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


def _check_arrays(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Shapes and ranges a snapshot's arrays must have (the checksums caught damage; this
    catches a file that is whole but wrong)."""

    def fail() -> None:
        raise SnapshotRejected("its arrays do not fit together")

    def csr(offsets: np.ndarray, count: int, total: int) -> None:
        if offsets.shape != (count + 1,) or int(offsets[0]) != 0 or int(offsets[-1]) != total:
            fail()
        if count and bool(np.any(np.diff(offsets) < 0)):
            fail()

    def within(values: np.ndarray, low: int, high: int) -> None:
        if values.shape[0] and (int(values.min()) < low or int(values.max()) >= high):
            fail()

    size = arrays["rowids"].shape[0]
    for name, dtype in (("rowids", "<i8"), ("lengths", "<f4"), ("status", "|i1"),
                        ("superseded", "|b1"), ("spaces", "<i4"), ("kinds", "<i2")):
        if arrays[name].shape != (size,) or arrays[name].dtype.str != dtype:
            fail()
    rowids = arrays["rowids"]
    if size and (bool(np.any(np.diff(rowids) <= 0)) or int(rowids[-1]) > meta["rowid_mark"]):
        fail()
    within(arrays["status"], GONE, len(STATUS_CODES))
    within(arrays["spaces"], 0, len(meta["space_names"]))
    within(arrays["kinds"], 0, len(meta["kind_names"]))
    vocabulary = int(meta["vocabulary_size"])
    total = arrays["post_doc"].shape[0]
    # The base covers the terms known at its last merge; the delta, every term.
    base_vocabulary = arrays["offsets"].shape[0] - 1
    if not 0 <= base_vocabulary <= vocabulary:
        fail()
    csr(arrays["offsets"], base_vocabulary, total)
    for name, dtype in (("post_doc", "<i4"), ("post_tf", "<f4"), ("impact_doc", "<i4")):
        if arrays[name].shape != (total,) or arrays[name].dtype.str != dtype:
            fail()
    base = int(meta["base_docs"])
    if not 0 <= base <= size:
        fail()
    within(arrays["post_doc"], 0, base)
    within(arrays["impact_doc"], 0, base)
    delta = arrays["delta_doc"].shape[0]
    csr(arrays["delta_offsets"], vocabulary, delta)
    for name, dtype in (("delta_doc", "<i4"), ("delta_tf", "<f4")):
        if arrays[name].shape != (delta,) or arrays[name].dtype.str != dtype:
            fail()
    within(arrays["delta_doc"], base, size)
    runs = arrays["run_tf"].shape[0]
    csr(arrays["run_offsets"], base_vocabulary, runs)
    csr(arrays["run_start"], runs, total)
    if not np.array_equal(arrays["run_start"][arrays["run_offsets"]], arrays["offsets"]):
        fail()
    within(arrays["run_tf"], 1, _LOW16 + 1)
    csr(arrays["tag_offsets"], len(meta["tag_names"]), arrays["tag_docs"].shape[0])
    within(arrays["tag_docs"], 0, size)
    sorted_terms, sorted_ids = arrays["vocab_sorted"], arrays["vocab_ids"]
    if sorted_terms.dtype.kind != "S" or sorted_ids.shape != sorted_terms.shape:
        fail()
    if sorted_terms.shape[0] + len(meta["long_terms"]) != vocabulary:
        fail()
    within(sorted_ids, 0, vocabulary)


class TermIndex:
    """Per-bank indexes of one database, refreshed from its tail before every search;
    ``folder`` (a SQLite workspace's folder) holds their snapshots."""

    def __init__(self, folder: Path | None = None) -> None:
        self.banks: dict[str, BankIndex] = {}
        self.seen_rowid = 0
        self.seen_change = 0
        self.folder = folder
        # What happened to each bank when first needed, and every snapshot written or refused
        # (newest last; for tests and diagnostics).
        self.history: list[tuple[str, str, str]] = []

    def _note(self, event: str, namespace: str, detail: str = "") -> None:
        self.history.append((event, namespace, detail))
        del self.history[:-100]

    def refresh(self, conn: Connection) -> None:
        """Apply new notes and liveness changes committed since the last call."""
        max_rowid, max_change = conn.execute(sql.TAIL_MARKS).fetchone()
        max_rowid, max_change = int(max_rowid or 0), int(max_change or 0)
        if max_rowid > self.seen_rowid:
            if self.banks:
                grouped: dict[str, list[RowLike]] = {}
                for row in conn.execute(sql.NOTES_AFTER, {"after": self.seen_rowid}):
                    for name in (row["namespace"], WORKSPACE):
                        if name in self.banks:
                            grouped.setdefault(name, []).append(row)
                    max_rowid = max(max_rowid, int(row["rowid"]))
                for name, rows in grouped.items():
                    self.banks[name].append(rows)
            self.seen_rowid = max_rowid
        if max_change > self.seen_change:
            if self.banks:
                self._apply_changes(conn, self.seen_change, self.banks.values())
            self.seen_change = max_change
        for bank in self.banks.values():
            bank.rowid_mark = max(bank.rowid_mark, self.seen_rowid)
            bank.change_mark = max(bank.change_mark, self.seen_change)
            if self.folder is not None and snapshots.snapshot_due(bank.size, bank.tail):
                self._save(conn, bank)

    def _apply_changes(
        self, conn: Connection, after: int, banks: Iterable[BankIndex]
    ) -> None:
        targets = list(banks)
        by_name = {bank.namespace: bank for bank in targets}
        for row in conn.execute(sql.CHANGED_NOTES, {"after": after}):
            rowid = int(row["note_rowid"])
            if row["namespace"] is None:  # deleted: find it in whichever bank has it
                for bank in targets:
                    bank.set_state(rowid, None, False)
                continue
            for name in (row["namespace"], WORKSPACE):
                found = by_name.get(name)
                if found is not None:
                    found.set_state(rowid, row["status"], bool(row["superseded"]))

    def bank(self, conn: Connection, namespace: str) -> BankIndex:
        """The index of one bank, read from its snapshot or built on first use (after
        :meth:`refresh`)."""
        bank = self.banks.get(namespace)
        if bank is None:
            loaded = self._load(conn, namespace) if self.folder is not None else None
            if loaded is not None and snapshots.snapshot_due(loaded.size, loaded.tail):
                self._save(conn, loaded)
            if loaded is not None:
                bank = loaded
            else:
                bank = BankIndex(namespace)
                if namespace == WORKSPACE:
                    rows = conn.execute(sql.ALL_NOTES)
                else:
                    rows = conn.execute(sql.BANK_NOTES, {"namespace": namespace})
                # Notes committed between the refresh and this read are in the build.
                bank.build(rows)
                bank.rowid_mark = max(bank.rowid_mark, self.seen_rowid)
                bank.change_mark = self.seen_change
                self._note("built", namespace, str(bank.size))
                if self.folder is not None and bank.size >= snapshots.SNAPSHOT_MIN_NOTES:
                    self._save(conn, bank)
            self.banks[namespace] = bank
        return bank

    # -- snapshots -------------------------------------------------------------------------

    def _load(self, conn: Connection, namespace: str) -> BankIndex | None:
        """The bank from its snapshot, checked against the database and caught up with the
        tail since; None when there is no usable snapshot."""
        assert self.folder is not None
        path = snapshots.snapshot_path(self.folder, namespace)
        try:
            snapshot = snapshots.read_snapshot(path, namespace)
            bank = BankIndex.from_snapshot(snapshot)
        except FileNotFoundError:
            return None
        except (SnapshotRejected, OSError, ValueError) as error:
            self._note("rejected", namespace, str(error))
            return None
        reason = self._mismatch(conn, snapshot.meta)
        if reason is not None:
            self._note("rejected", namespace, reason)
            return None
        if namespace == WORKSPACE:
            rows = conn.execute(sql.NOTES_AFTER, {"after": bank.rowid_mark})
        else:
            rows = conn.execute(snapshot_sql.BANK_NOTES_AFTER,
                                {"after": bank.rowid_mark, "namespace": namespace})
        bank.append(rows)
        self._apply_changes(conn, bank.change_mark, [bank])
        bank.rowid_mark = max(bank.rowid_mark, self.seen_rowid)
        bank.change_mark = max(bank.change_mark, self.seen_change)
        self._note("loaded", namespace, str(bank.tail))
        return bank

    def _mismatch(self, conn: Connection, meta: Mapping[str, Any]) -> str | None:
        # Fresh reads (no transaction): the database now, which may be ahead of this
        # process's last refresh if another process wrote the snapshot meanwhile.
        max_rowid, max_change = conn.execute(sql.TAIL_MARKS).fetchone()
        rowids = [rowid for rowid, _ in meta["fingerprint"]]
        ids = {int(r[0]): str(r[1]) for r in
               conn.execute(snapshot_sql.NOTE_IDS_AT, {"rowids": json.dumps(rowids)})}
        change = conn.execute(snapshot_sql.CHANGE_AT, {"seq": meta["change_mark"]}).fetchone()
        first_after = conn.execute(snapshot_sql.FIRST_CHANGE_AFTER,
                                   {"after": meta["change_mark"]}).fetchone()[0]
        return snapshots.mismatch(
            meta, max_rowid=int(max_rowid or 0), max_change=int(max_change or 0), ids=ids,
            change_row=None if change is None else int(change[0]),
            first_change_after=None if first_after is None else int(first_after),
        )

    def _save(self, conn: Connection, bank: BankIndex) -> None:
        """Write the bank's snapshot (a read-only workspace: nothing, and never again in this
        process)."""
        assert self.folder is not None
        meta, arrays = bank.snapshot_parts()
        docs = snapshots.fingerprint_docs(bank.size)
        rowids = [int(bank.rowids[d]) for d in docs]
        if bank.rowid_mark:
            rowids.append(bank.rowid_mark)
        ids = {int(r[0]): str(r[1]) for r in
               conn.execute(snapshot_sql.NOTE_IDS_AT, {"rowids": json.dumps(rowids)})}
        if any(rowid not in ids for rowid in rowids):
            return  # a note is gone (deleted): no fingerprint to check against, no snapshot
        change = conn.execute(snapshot_sql.CHANGE_AT, {"seq": bank.change_mark}).fetchone()
        meta["fingerprint"] = [[rowid, ids[rowid]] for rowid in dict.fromkeys(rowids)]
        meta["change_fingerprint"] = None if change is None else int(change[0])
        path = snapshots.snapshot_path(self.folder, bank.namespace)
        try:
            size = snapshots.write_snapshot(path, meta, arrays)
        except OSError as error:
            self._note("unwritable", bank.namespace, str(error))
            self.folder = None
            return
        bank.tail = 0
        self._note("saved", bank.namespace, str(size))

    # -- searching -------------------------------------------------------------------------

    def search(
        self,
        conn: Connection,
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
        query = Query(tuple(dict.fromkeys(terms)), require_all, limit, guard, echo_text)
        wanted = None if namespaces is None else list(dict.fromkeys(namespaces))
        if wanted is None or (len(wanted) > 1 and not per_bank_stats):
            # Pooled statistics over several banks: one pass over the workspace index.
            workspace = self.bank(conn, WORKSPACE)
            if wanted is None and namespace_range is not None:
                low, high = namespace_range
                wanted = [n for n in workspace.space_names.names if low <= n < high]
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
            ranked += score_bank(bank, mask, stats if per_bank_stats else pooled, query)
        ranked = order(ranked)
        if echo_text is not None:
            return ranked  # the caller demotes echoes once it has the texts, then cuts
        return ranked[:limit]


_INDEXES: weakref.WeakKeyDictionary[Database, TermIndex] = weakref.WeakKeyDictionary()


def index_for(db: Database) -> TermIndex:
    """The term index of this open database (one per :class:`Database` in a process). On a
    SQLite workspace it keeps snapshots in the workspace folder."""
    index = _INDEXES.get(db)
    if index is None:
        folder = db.workspace.root if db.backend == "sqlite" else None
        index = _INDEXES[db] = TermIndex(folder)
    return index


def _tags(tags_json: str | None) -> list[str]:
    if not tags_json:
        return []
    value: Any = json.loads(tags_json)
    return [tag for tag in value if isinstance(tag, str)] if isinstance(value, list) else []


__all__ = [
    "LIVE",
    "STATUS_CODES",
    "WORKSPACE",
    "BankIndex",
    "Ranked",
    "Scope",
    "Stats",
    "TermIndex",
    "demote_echoes",
    "index_for",
    "order",
]
