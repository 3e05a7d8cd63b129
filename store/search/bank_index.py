"""One bank's postings: the in-memory inverted index :mod:`store.search.term_index` keeps per
bank (note numbers and term frequencies by term, in note order and in impact order, the notes'
statuses and lengths, a delta segment for new notes, and the arrays a snapshot saves)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from store.db.seam import RowLike
from store.memory.bank_tags import effective_tags
from store.search import snapshot_sql as snapshot_sql
from store.search.bank_arrays import (
    DENSE_MIN_NOTES,
    DENSE_SHARE,
    DENSE_TERMS,
    GONE,
    LOW16,
    MERGE_AT_NOTES,
    MERGE_SHARE,
    STATUS_CODES,
    WORKSPACE,
    Column,
    Int,
    Names,
    Scope,
)
from store.search.search_policy import INDEX_TERMS_VERSION, index_terms
from store.search.term_ranking import Stats
from store.search.term_snapshot import Snapshot, SnapshotRejected, check_snapshot_arrays
from store.search.term_vocabulary import Vocabulary


class BankIndex:
    """The postings and per-note arrays of one bank (namespace), or of the whole workspace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace  # WORKSPACE: every note, each with its namespace code
        self.vocabulary = Vocabulary()
        # Per note, in rowid order (a note's number is its position).
        self._rowids = Column(np.zeros(0, dtype=Int))
        self._lengths = Column(np.zeros(0, dtype=np.float32))
        self._spaces = Column(np.zeros(0, dtype=np.int32))
        self._kinds = Column(np.zeros(0, dtype=np.int16))
        self.status = np.zeros(0, dtype=np.int8)
        self.superseded = np.zeros(0, dtype=bool)
        self.space_names = Names()
        self.kind_names = Names([None])
        self.tag_names = Names()
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
            for tag in effective_tags(row["namespace"], _tags(row["tags_json"])):
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
        lengths = np.minimum(self.lengths[docs], LOW16).astype(Int)
        return (terms << 32) | ((LOW16 - np.minimum(tfs, LOW16).astype(Int)) << 16) | lengths

    def _set_runs(self, keys: np.ndarray, vocabulary_size: int) -> None:
        heads = keys >> 16
        starts = np.flatnonzero(np.r_[True, heads[1:] != heads[:-1]]) if keys.shape[0] else (
            np.zeros(0, dtype=Int))
        self.run_start = np.concatenate([starts, [keys.shape[0]]]).astype(Int)
        self.run_tf = (LOW16 - (heads[starts] & LOW16)).astype(np.float32)
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
            check_snapshot_arrays(meta, arrays)
            bank.vocabulary = Vocabulary.from_snapshot(
                arrays["vocab_sorted"], arrays["vocab_ids"],
                {str(k): int(v) for k, v in meta["long_terms"].items()})
            bank._rowids = Column(arrays["rowids"])
            bank._lengths = Column(arrays["lengths"])
            bank._spaces = Column(arrays["spaces"])
            bank._kinds = Column(arrays["kinds"])
            bank.status = arrays["status"].copy()
            bank.superseded = arrays["superseded"].copy()
            bank.space_names = Names(str(n) for n in meta["space_names"])
            bank.kind_names = Names(meta["kind_names"])
            bank.tag_names = Names(str(n) for n in meta["tag_names"])
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


def _tags(tags_json: str | None) -> list[str]:
    if not tags_json:
        return []
    value: Any = json.loads(tags_json)
    return [tag for tag in value if isinstance(tag, str)] if isinstance(value, list) else []
